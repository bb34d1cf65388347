// Package metriccatalogue builds Strata's metric catalogue (docs/metrics.md)
// from what running processes really expose on /metrics, so the catalogue
// that dashboards, alert rules and operators rely on is never typed by hand.
// ParseExposition reads one scrape in the Prometheus text format, a
// Catalogue merges the scrapes of every role, and Markdown renders it.
package metriccatalogue

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Family is one metric family: its name, type and help as the registry
// declares them, the label names its series carry (the histogram and
// summary bucket labels le and quantile left out) and the roles whose
// processes expose it.
type Family struct {
	Name   string
	Type   string
	Help   string
	Labels []string
	Roles  []string
}

// suffixes are the sample-name suffixes a family of each type adds to its
// name in the text format.
var suffixes = map[string][]string{
	"histogram": {"_bucket", "_sum", "_count"},
	"summary":   {"_sum", "_count"},
}

// ParseExposition reads one scrape in the Prometheus text exposition format
// (version 0.0.4) and returns its families by name. A sample without a
// preceding # TYPE or # HELP line of its family is an error: every family
// of a client_golang registry declares both.
func ParseExposition(r io.Reader) (map[string]*Family, error) {
	fams := map[string]*Family{}
	family := func(name string) *Family {
		f := fams[name]
		if f == nil {
			f = &Family{Name: name, Type: "untyped"}
			fams[name] = f
		}
		return f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "#"); ok {
			fields := strings.Fields(rest)
			if len(fields) < 2 {
				continue // a plain comment
			}
			switch fields[0] {
			case "HELP":
				help := strings.TrimPrefix(strings.TrimSpace(rest), "HELP")
				help = strings.TrimPrefix(strings.TrimSpace(help), fields[1])
				family(fields[1]).Help = unescapeHelp(strings.TrimSpace(help))
			case "TYPE":
				if len(fields) != 3 {
					return nil, fmt.Errorf("line %d: malformed TYPE line %q", line, text)
				}
				family(fields[1]).Type = fields[2]
			}
			continue
		}
		name, labels, err := parseSample(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		f := owner(fams, name)
		if f == nil {
			return nil, fmt.Errorf("line %d: sample %s of an undeclared family", line, name)
		}
		for _, l := range labels {
			if (l == "le" && f.Type == "histogram") || (l == "quantile" && f.Type == "summary") {
				continue
			}
			if !slices.Contains(f.Labels, l) {
				f.Labels = append(f.Labels, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, f := range fams {
		sort.Strings(f.Labels)
	}
	return fams, nil
}

// owner returns the family a sample name belongs to: the family of that
// name, or the histogram or summary whose name plus a suffix it is.
func owner(fams map[string]*Family, sample string) *Family {
	if f := fams[sample]; f != nil {
		return f
	}
	for typ, sfx := range suffixes {
		for _, s := range sfx {
			if base, ok := strings.CutSuffix(sample, s); ok {
				if f := fams[base]; f != nil && f.Type == typ {
					return f
				}
			}
		}
	}
	return nil
}

// parseSample splits a sample line into its metric name and label names.
// Label values may hold any escaped character, including , } and ".
func parseSample(line string) (string, []string, error) {
	end := strings.IndexAny(line, "{ \t")
	if end <= 0 {
		return "", nil, fmt.Errorf("malformed sample %q", line)
	}
	name := line[:end]
	if line[end] != '{' {
		return name, nil, nil
	}
	var labels []string
	i := end + 1
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == ',') {
			i++
		}
		if i < len(line) && line[i] == '}' {
			return name, labels, nil
		}
		eq := strings.IndexByte(line[i:], '=')
		if eq <= 0 || i+eq+1 >= len(line) || line[i+eq+1] != '"' {
			return "", nil, fmt.Errorf("malformed labels in %q", line)
		}
		labels = append(labels, strings.TrimSpace(line[i:i+eq]))
		i += eq + 2
		for i < len(line) && line[i] != '"' {
			if line[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(line) {
			return "", nil, fmt.Errorf("unterminated label value in %q", line)
		}
		i++ // the closing quote
	}
}

func unescapeHelp(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Roles are Strata's roles in the order the catalogue lists them.
var Roles = []string{"metad", "partitiond", "coordinatord", "gateway"}

// Catalogue is the union of the families every role exposes.
type Catalogue map[string]*Family

// Add merges the families one process of role exposed. The same family
// seen with another type or help is an error: the catalogue would have to
// pick one, and a dashboard could be right for one role and wrong for the
// other.
func (c Catalogue) Add(role string, fams map[string]*Family) error {
	for name, f := range fams {
		have := c[name]
		if have == nil {
			have = &Family{Name: name, Type: f.Type, Help: f.Help}
			c[name] = have
		}
		if have.Type != f.Type || have.Help != f.Help {
			return fmt.Errorf("%s: %s %q on %s, but %s %q elsewhere", name, f.Type, f.Help, role, have.Type, have.Help)
		}
		for _, l := range f.Labels {
			if !slices.Contains(have.Labels, l) {
				have.Labels = append(have.Labels, l)
			}
		}
		sort.Strings(have.Labels)
		if !slices.Contains(have.Roles, role) {
			have.Roles = append(have.Roles, role)
		}
		slices.SortFunc(have.Roles, func(a, b string) int { return rank(a) - rank(b) })
	}
	return nil
}

func rank(role string) int {
	if i := slices.Index(Roles, role); i >= 0 {
		return i
	}
	return len(Roles)
}

// Header is the column header of the catalogue table; the deploy module's
// reader (deploy/monitoring) checks it before reading rows.
const Header = "| metric | type | labels | roles | help |"

// Markdown renders the catalogue as docs/metrics.md: a preamble, then one
// table row per family sorted by name. The rows use only what the registry
// declared, so two runs over the same code render the same bytes.
func (c Catalogue) Markdown(preamble string) []byte {
	var b bytes.Buffer
	b.WriteString(preamble)
	b.WriteString("\n" + Header + "\n|---|---|---|---|---|\n")
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := c[n]
		labels := "—"
		if len(f.Labels) > 0 {
			labels = "`" + strings.Join(f.Labels, "`, `") + "`"
		}
		roles := strings.Join(f.Roles, ", ")
		if len(f.Roles) == len(Roles) {
			roles = "all"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, f.Type, labels, roles, escapeCell(f.Help))
	}
	return b.Bytes()
}

// escapeCell keeps a help text inside its table cell.
func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
