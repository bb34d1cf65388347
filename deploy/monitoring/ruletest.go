package monitoring

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

// RuleTestFile is a rule unit-test file in promtool's format (`promtool
// test rules`). The subset read here: input series, alert tests with
// expected labels and annotations.
type RuleTestFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval model.Duration  `yaml:"evaluation_interval"`
	Tests              []RuleTestGroup `yaml:"tests"`

	dir string
}

// RuleTestGroup is one test: series loaded at an interval, alerts checked
// at evaluation times.
type RuleTestGroup struct {
	Name        string         `yaml:"name"`
	Interval    model.Duration `yaml:"interval"`
	InputSeries []struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	} `yaml:"input_series"`
	AlertRuleTests []AlertTestCase `yaml:"alert_rule_test"`
}

// AlertTestCase expects exactly ExpAlerts of Alertname to fire at EvalTime
// (none when empty).
type AlertTestCase struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []struct {
		ExpLabels      map[string]string `yaml:"exp_labels"`
		ExpAnnotations map[string]string `yaml:"exp_annotations"`
	} `yaml:"exp_alerts"`
}

// LoadRuleTests reads a test file; a field outside the subset above is an
// error rather than a silently skipped check.
func LoadRuleTests(path string) (*RuleTestFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f RuleTestFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	f.dir = filepath.Dir(path)
	return &f, nil
}

// firedAlert is a firing alert's labels and annotations.
type firedAlert struct {
	Labels, Annotations map[string]string
}

func (a firedAlert) String() string { return fmt.Sprintf("%v %v", a.Labels, a.Annotations) }

// Run evaluates the file's rules over g's series the way Prometheus's rule
// manager does (every evaluation interval from time 0) and returns every
// expectation that did not hold.
func (f *RuleTestFile) Run(g RuleTestGroup) (errs []error) {
	interval := time.Duration(g.Interval)
	if interval == 0 {
		interval = time.Minute
	}
	evalInterval := time.Duration(f.EvaluationInterval)
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(interval))
	for _, s := range g.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	ll, err := promqltest.NewLazyLoader(load.String(), promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := ll.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	ll.SubqueryInterval = evalInterval

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(ll.QueryEngine(), ll.Storage()),
		Appendable: ll.Storage(),
		Context:    ctx,
		NotifyFunc: func(context.Context, string, ...*rules.Alert) {},
		Logger:     promslog.NewNopLogger(),
	})
	var files []string
	for _, rf := range f.RuleFiles {
		files = append(files, filepath.Join(f.dir, rf))
	}
	groupMap, lerrs := m.LoadGroups(evalInterval, labels.EmptyLabels(), "", nil, false, files...)
	if lerrs != nil {
		return lerrs
	}
	// Groups run in file order (recording rules before the alerts that
	// read them), as the manager schedules them.
	order, err := groupOrder(files)
	if err != nil {
		return []error{err}
	}
	groups := make([]*rules.Group, 0, len(groupMap))
	for _, gr := range groupMap {
		groups = append(groups, gr)
	}
	sort.Slice(groups, func(i, j int) bool { return order[groups[i].Name()] < order[groups[j].Name()] })
	for _, gr := range groups {
		for _, r := range gr.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // no restore from the (empty) ALERTS history
			}
		}
	}

	var last time.Duration
	for _, c := range g.AlertRuleTests {
		last = max(last, time.Duration(c.EvalTime))
	}
	cases := g.AlertRuleTests
	sort.SliceStable(cases, func(i, j int) bool { return cases[i].EvalTime < cases[j].EvalTime })
	next := 0
	for at := time.Duration(0); at <= last; at += evalInterval {
		ts := time.Unix(0, 0).UTC().Add(at)
		var evalErrs []error
		ll.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErrs = append(evalErrs, err)
				return
			}
			for _, gr := range groups {
				gr.Eval(ll.Context(), ts)
				for _, r := range gr.Rules() {
					if r.LastError() != nil {
						evalErrs = append(evalErrs, fmt.Errorf("rule %s at %v: %w", r.Name(), at, r.LastError()))
					}
				}
			}
		})
		if len(evalErrs) > 0 {
			return evalErrs
		}
		// A case at eval_time t is checked against the evaluation at the
		// last step not after t.
		for next < len(cases) && time.Duration(cases[next].EvalTime) < at+evalInterval {
			c := cases[next]
			next++
			got := firing(groups, c.Alertname)
			var want []firedAlert
			for _, a := range c.ExpAlerts {
				l := map[string]string{"alertname": c.Alertname}
				for k, v := range a.ExpLabels {
					l[k] = v
				}
				ann := a.ExpAnnotations
				if ann == nil {
					ann = map[string]string{}
				}
				want = append(want, firedAlert{l, ann})
			}
			sortAlerts(want)
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				errs = append(errs, fmt.Errorf("%s at %v:\n  want %v\n  got  %v", c.Alertname, model.Duration(c.EvalTime), want, got))
			}
		}
	}
	return errs
}

// firing returns the firing alerts of the rules named alertname.
func firing(groups []*rules.Group, alertname string) []firedAlert {
	var out []firedAlert
	for _, gr := range groups {
		for _, r := range gr.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != alertname {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					out = append(out, firedAlert{a.Labels.Map(), a.Annotations.Map()})
				}
			}
		}
	}
	sortAlerts(out)
	return out
}

func sortAlerts(as []firedAlert) {
	sort.Slice(as, func(i, j int) bool { return as[i].String() < as[j].String() })
}

// groupOrder maps each rule group name to its position in files.
func groupOrder(files []string) (map[string]int, error) {
	order := map[string]int{}
	for _, f := range files {
		gs, errs := LoadRules(f)
		if len(errs) > 0 {
			return nil, errs[0]
		}
		for _, g := range gs.Groups {
			order[g.Name] = len(order)
		}
	}
	return order, nil
}
