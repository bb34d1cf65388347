package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Dashboard is the part of a Grafana dashboard JSON model the checks read.
type Dashboard struct {
	UID           string   `json:"uid"`
	Title         string   `json:"title"`
	SchemaVersion int      `json:"schemaVersion"`
	Tags          []string `json:"tags"`
	Panels        []Panel  `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a collapsed row holds its panels.
type Panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	GridPos    *GridPos    `json:"gridPos"`
	Datasource *Datasource `json:"datasource"`
	Targets    []Target    `json:"targets"`
	Panels     []Panel     `json:"panels"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H, W, X, Y int
}

// Target is one query of a panel.
type Target struct {
	Expr         string      `json:"expr"`
	RefID        string      `json:"refId"`
	LegendFormat string      `json:"legendFormat"`
	Datasource   *Datasource `json:"datasource"`
}

// Datasource references a data source, here always the dashboard's
// datasource variable.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Variable is a templating variable. Query is a string or, in newer
// Grafana versions, an object with a query field.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *Datasource     `json:"datasource"`
}

// QueryText returns the variable's query as text.
func (v Variable) QueryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// LoadDashboard reads a dashboard JSON file.
func LoadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// AllPanels returns every panel, the panels of collapsed rows included.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// datasourceRef is how every panel and query names its data source: the
// dashboard's datasource variable, so the dashboard imports anywhere.
const datasourceRef = "${datasource}"

// grafanaVar matches Grafana variable references: $name, ${name},
// ${name:format} and [[name]].
var grafanaVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[A-Za-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)|\[\[([A-Za-z_][A-Za-z0-9_]*)\]\]`)

// builtinDurations are Grafana's global variables that stand for a
// duration in a range selector.
var builtinDurations = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// ExpandVariables replaces Grafana variables in a PromQL template so the
// Prometheus parser can read it: built-in durations by a duration, every
// other variable (used inside label values) by a placeholder. It returns
// the names of the non-built-in variables used.
func ExpandVariables(expr string) (string, []string) {
	var used []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVar.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if d, ok := builtinDurations[name]; ok {
			return d
		}
		if !slices.Contains(used, name) {
			used = append(used, name)
		}
		return "placeholder"
	})
	return out, used
}

// labelValuesQuery matches a Grafana label_values(selector, label) query.
var labelValuesQuery = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// Check returns every problem of d: identity, layout, data sources,
// variables, and each expression against s.
func (d *Dashboard) Check(s Scope) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
		bad("uid %q, title %q, schemaVersion %d: all three are required", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Type {
		case "datasource":
			if v.Name != "datasource" || v.QueryText() != "prometheus" {
				bad("datasource variable %q must be named datasource and select prometheus", v.Name)
			}
		case "query":
			if v.Datasource == nil || v.Datasource.UID != datasourceRef {
				bad("variable %s: datasource must be %s", v.Name, datasourceRef)
			}
			q, _ := ExpandVariables(v.QueryText())
			m := labelValuesQuery.FindStringSubmatch(strings.TrimSpace(q))
			if m == nil {
				bad("variable %s: query %q is not label_values(selector, label)", v.Name, v.QueryText())
				continue
			}
			for _, err := range s.CheckExpr(m[1]) {
				bad("variable %s: %v", v.Name, err)
			}
			if !s.carries(m[1], m[2]) {
				bad("variable %s: the series of %s carry no label %s", v.Name, m[1], m[2])
			}
		}
	}
	if !vars["datasource"] {
		bad("no datasource variable")
	}
	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID == 0 || ids[p.ID] {
			bad("%s: id missing or repeated", where)
		}
		ids[p.ID] = true
		if p.Title == "" {
			bad("%s: no title", where)
		}
		if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			bad("%s: gridPos %+v outside the 24-column grid", where, p.GridPos)
		}
		if p.Type == "row" || p.Type == "text" {
			continue
		}
		if len(p.Targets) == 0 {
			bad("%s: no query", where)
		}
		if p.Datasource == nil || p.Datasource.UID != datasourceRef {
			bad("%s: datasource must be %s", where, datasourceRef)
		}
		refs := map[string]bool{}
		for _, t := range p.Targets {
			if t.RefID == "" || refs[t.RefID] {
				bad("%s: refId %q missing or repeated", where, t.RefID)
			}
			refs[t.RefID] = true
			if t.Datasource != nil && t.Datasource.UID != datasourceRef {
				bad("%s/%s: datasource must be %s", where, t.RefID, datasourceRef)
			}
			expr, used := ExpandVariables(t.Expr)
			for _, u := range used {
				if !vars[u] {
					bad("%s/%s: variable $%s is not defined", where, t.RefID, u)
				}
			}
			if strings.TrimSpace(expr) == "" {
				bad("%s/%s: empty expression", where, t.RefID)
				continue
			}
			for _, err := range s.CheckExpr(expr) {
				bad("%s/%s: %v", where, t.RefID, err)
			}
		}
	}
	return errs
}

// carries reports whether the series a selector picks carry label l.
func (s Scope) carries(selector, l string) bool {
	for _, name := range MetricNames(selector) {
		have, _ := s.labelsOf(name)
		if slices.Contains(have, l) {
			return true
		}
	}
	return false
}

// Exprs returns every query expression of d (variables expanded).
func (d *Dashboard) Exprs() []string {
	var out []string
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			e, _ := ExpandVariables(t.Expr)
			out = append(out, e)
		}
	}
	return out
}
