package monitoring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// promParser parses PromQL as Prometheus does with its default features.
var promParser = parser.NewParser(parser.Options{})

// TargetLabels are the labels the scrape configurations attach to every
// Strata series (deploy/compose/prometheus.yml and
// deploy/prometheus/kubernetes-scrape.yaml; TestScrapeConfigs checks them).
var TargetLabels = []string{"job", "instance", "component"}

// Scope is what an expression may name: the catalogue's families (their
// series carry the target labels too) plus series that exist without being
// in it (Prometheus's `up`, recording rules), each with all its labels.
type Scope struct {
	Catalogue Catalogue
	Extra     map[string][]string
}

// NewScope returns the catalogue plus `up`, whose labels are the target
// labels.
func NewScope(c Catalogue) Scope {
	return Scope{Catalogue: c, Extra: map[string][]string{"up": slices.Clone(TargetLabels)}}
}

// labelsOf returns the labels series called name carry and whether the
// name is known.
func (s Scope) labelsOf(name string) ([]string, bool) {
	if l, ok := s.Extra[name]; ok {
		return l, true
	}
	out := slices.Clone(TargetLabels)
	f, ok := s.Catalogue.Lookup(name)
	if !ok {
		return nil, false
	}
	out = append(out, f.Labels...)
	switch {
	case f.Type == "histogram" && strings.HasSuffix(name, "_bucket"):
		out = append(out, "le")
	case f.Type == "summary" && name == f.Name:
		out = append(out, "quantile")
	}
	return out, true
}

// CheckExpr parses expr and reports what is wrong with it: a syntax error,
// a selector without a literal metric name, a metric that is not in scope,
// a matcher on a label its series never carry, or a by/without/on/ignoring
// label that no selected series carries (nor label_replace creates).
func (s Scope) CheckExpr(expr string) []error {
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		return []error{err}
	}
	var errs []error
	available := map[string]bool{}
	var grouping []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			name := n.Name
			if name == "" {
				errs = append(errs, fmt.Errorf("selector %s names no metric", n))
				return nil
			}
			have, ok := s.labelsOf(name)
			if !ok {
				errs = append(errs, fmt.Errorf("metric %s is not in the catalogue", name))
				return nil
			}
			for _, l := range have {
				available[l] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName && !slices.Contains(have, m.Name) {
					errs = append(errs, fmt.Errorf("%s has no label %q (it has %v)", name, m.Name, have))
				}
			}
		case *parser.AggregateExpr:
			grouping = append(grouping, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				grouping = append(grouping, n.VectorMatching.MatchingLabels...)
				grouping = append(grouping, n.VectorMatching.Include...)
			}
		case *parser.Call:
			// label_replace(v, dst, ...) and label_join(v, dst, ...)
			// create dst.
			if (n.Func.Name == "label_replace" || n.Func.Name == "label_join") && len(n.Args) > 1 {
				if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
					available[dst.Val] = true
				}
			}
		}
		return nil
	})
	for _, l := range grouping {
		if !available[l] {
			errs = append(errs, fmt.Errorf("grouping label %q is carried by no series of the expression", l))
		}
	}
	return errs
}

// MetricNames returns the metric names an expression selects (for coverage
// checks); it assumes expr parses.
func MetricNames(expr string) []string {
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		return nil
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(out, vs.Name) {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out
}
