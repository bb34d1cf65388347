package route

import "strings"

// IsTopicPattern reports whether a topic parameter is a wildcard pattern
// (topic names never hold '*' or '?').
func IsTopicPattern(s string) bool { return strings.ContainsAny(s, "*?") }

// MatchTopicPattern matches name against a glob where '*' is any run and
// '?' one byte (every other byte literal, unlike path.Match's classes and
// escapes). CONSUME serves patterns with it, and the auth guard checks the
// policies of the same topics.
func MatchTopicPattern(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == name[n]):
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
