package group

import (
	"path"
	"slices"
	"strings"

	"github.com/strataio/strata/libs/errcode"
)

// TP is one topic-partition.
type TP struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// Less orders TPs by topic, then partition.
func (a TP) Less(b TP) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

func cmpTP(a, b TP) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// SortTPs sorts in place and returns l.
func SortTPs(l []TP) []TP {
	slices.SortFunc(l, cmpTP)
	return l
}

// Selector is a group's topic selector: exactly one of Topic, Topics or
// Pattern (a path.Match glob).
type Selector struct {
	Topic   string   `json:"topic,omitempty"`
	Topics  []string `json:"topics,omitempty"`
	Pattern string   `json:"pattern,omitempty"`
}

// Validate enforces "exactly one selector" and well-formed values.
func (s Selector) Validate() error {
	n := 0
	if s.Topic != "" {
		n++
	}
	if len(s.Topics) > 0 {
		n++
	}
	if s.Pattern != "" {
		n++
		if _, err := path.Match(s.Pattern, ""); err != nil {
			return errcode.InvalidParameter.New("pattern is not a valid glob", "param", "pattern")
		}
	}
	if n != 1 {
		return errcode.InvalidParameter.New("exactly one of topic, topics or pattern is required", "param", "selector")
	}
	for _, t := range s.Topics {
		if strings.TrimSpace(t) == "" {
			return errcode.InvalidParameter.New("topics holds an empty name", "param", "topics")
		}
	}
	return nil
}

// Normalize sorts and de-duplicates Topics.
func (s Selector) Normalize() Selector {
	if len(s.Topics) > 0 {
		t := slices.Clone(s.Topics)
		slices.Sort(t)
		s.Topics = slices.Compact(t)
	}
	return s
}

// MultiTopic reports whether the group answers with topic_assignments.
func (s Selector) MultiTopic() bool { return s.Topic == "" }

// Equal compares normalized selectors.
func (s Selector) Equal(o Selector) bool {
	a, b := s.Normalize(), o.Normalize()
	return a.Topic == b.Topic && a.Pattern == b.Pattern && slices.Equal(a.Topics, b.Topics)
}

// Matches reports whether topic is selected. Patterns never select internal
// topics ("__" prefix).
func (s Selector) Matches(topic string) bool {
	switch {
	case s.Topic != "":
		return topic == s.Topic
	case len(s.Topics) > 0:
		return slices.Contains(s.Topics, topic)
	case s.Pattern != "":
		if strings.HasPrefix(topic, "__") {
			return false
		}
		ok, _ := path.Match(s.Pattern, topic)
		return ok
	}
	return false
}

// Describe returns the topic_name of GROUP_STATUS: the topic, the topics
// comma-joined, or the pattern.
func (s Selector) Describe() string {
	switch {
	case s.Topic != "":
		return s.Topic
	case len(s.Topics) > 0:
		return strings.Join(s.Topics, ",")
	}
	return s.Pattern
}

// Expand returns the sorted topic-partitions s selects from topics (name ->
// partition count). Exact selectors need every named topic to exist
// (topic_not_found); a pattern may match nothing yet.
func Expand(s Selector, topics map[string]int32) ([]TP, error) {
	var names []string
	switch {
	case s.Topic != "":
		names = []string{s.Topic}
	case len(s.Topics) > 0:
		names = s.Normalize().Topics
	default:
		for n := range topics {
			if s.Matches(n) {
				names = append(names, n)
			}
		}
	}
	var out []TP
	for _, n := range names {
		parts, ok := topics[n]
		if !ok {
			if s.Pattern != "" {
				continue
			}
			return nil, errcode.TopicNotFound.New("selector names a missing topic", "topic", n)
		}
		for p := range parts {
			out = append(out, TP{Topic: n, Partition: p})
		}
	}
	return SortTPs(out), nil
}
