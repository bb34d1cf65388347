package monitoring

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// LoadRules parses a rule file with Prometheus's own rule-file parser:
// unknown fields, bad durations, invalid templates and unparsable
// expressions are errors.
func LoadRules(path string) (*rulefmt.RuleGroups, []error) {
	return rulefmt.ParseFile(path, false, model.LegacyValidation, promParser, slog.New(slog.DiscardHandler))
}

// Severities are the values an alert's severity label may take.
var Severities = []string{"critical", "warning"}

// CheckRules checks every rule of groups against s: recording rules become
// part of the scope (with the labels their expression keeps), alerts need a
// severity and a summary and description.
func (s Scope) CheckRules(groups *rulefmt.RuleGroups) []error {
	var errs []error
	scope := Scope{Catalogue: s.Catalogue, Extra: map[string][]string{}}
	for k, v := range s.Extra {
		scope.Extra[k] = v
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				scope.Extra[r.Record] = outputLabels(r.Expr)
			}
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			for _, err := range scope.CheckExpr(r.Expr) {
				errs = append(errs, fmt.Errorf("group %s, rule %s: %v", g.Name, name, err))
			}
			if r.Alert == "" {
				continue
			}
			if !slices.Contains(Severities, r.Labels["severity"]) {
				errs = append(errs, fmt.Errorf("alert %s: severity %q, want one of %v", name, r.Labels["severity"], Severities))
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				errs = append(errs, fmt.Errorf("alert %s: summary and description annotations are required", name))
			}
		}
	}
	return errs
}

// outputLabels approximates the labels a recording rule's result keeps:
// the grouping labels of its outermost aggregation (the rules here are all
// of that form); nil when it is not an aggregation.
func outputLabels(expr string) []string {
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		return nil
	}
	if agg, ok := e.(*parser.AggregateExpr); ok && !agg.Without {
		return slices.Clone(agg.Grouping)
	}
	return nil
}
