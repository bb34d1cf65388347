package monitoring

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	// Registers kubernetes_sd_configs with the configuration loader.
	_ "github.com/prometheus/prometheus/discovery/kubernetes"
)

const (
	cataloguePath = "../../docs/metrics.md"
	dashboardDir  = "../grafana/dashboards"
	rulesPath     = "../prometheus/strata-rules.yaml"
	ruleTestsPath = "../prometheus/strata-rules.test.yaml"
)

func catalogue(t *testing.T) Catalogue {
	t.Helper()
	c, err := LoadCatalogue(cataloguePath)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCatalogueReads(t *testing.T) {
	c := catalogue(t)
	if len(c) < 50 {
		t.Fatalf("only %d families in %s", len(c), cataloguePath)
	}
	f, ok := c.Lookup("strata_broker_command_duration_seconds_bucket")
	if !ok || f.Type != "histogram" || !slices.Equal(f.Labels, []string{"command"}) || !slices.Equal(f.Roles, []string{"gateway"}) {
		t.Fatalf("histogram bucket lookup: %+v %v", f, ok)
	}
	if _, ok := c.Lookup("strata_storage_segments_count"); ok {
		t.Fatal("a gauge has no _count series")
	}
	if f := c["process_cpu_seconds_total"]; !slices.Equal(f.Roles, Roles) {
		t.Fatalf("roles \"all\" not expanded: %+v", f)
	}
	// Target labels must not collide with a family's own labels, or
	// Prometheus renames the family's to exported_<label> on scrape.
	for _, f := range c {
		for _, l := range f.Labels {
			if slices.Contains(TargetLabels, l) {
				t.Errorf("%s has label %s, which the scrape configuration sets on every target", f.Name, l)
			}
		}
	}
}

func dashboards(t *testing.T) map[string]*Dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashboardDir, err)
	}
	out := map[string]*Dashboard{}
	for _, f := range files {
		d, err := LoadDashboard(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

// TestDashboards parses every query of every dashboard with the Prometheus
// parser and checks its metrics and labels against the catalogue.
func TestDashboards(t *testing.T) {
	s := NewScope(catalogue(t))
	uids := map[string]string{}
	for name, d := range dashboards(t) {
		t.Run(name, func(t *testing.T) {
			if other, dup := uids[d.UID]; dup {
				t.Errorf("uid %s also used by %s", d.UID, other)
			}
			uids[d.UID] = name
			for _, err := range d.Check(s) {
				t.Error(err)
			}
			if n := len(d.Exprs()); n < 5 {
				t.Errorf("only %d queries", n)
			}
		})
	}
}

// TestDashboardsCoverTheBrief: each dashboard shows what operators expect
// of it (issue 16), named by the metrics its queries must use.
func TestDashboardsCoverTheBrief(t *testing.T) {
	want := map[string][]string{
		"strata-overview.json": {"up", "strata_process_ready", "strata_cluster_has_leader", "strata_cluster_is_leader",
			"strata_cluster_offline_partitions", "strata_cluster_under_replicated_partitions", "strata_cluster_partition_leader", "strata_metad_nodes"},
		"strata-traffic.json": {"strata_broker_commands_total", "strata_broker_command_duration_seconds_bucket", "strata_broker_command_errors_total",
			"strata_partition_high_watermark", "strata_broker_publish_acknowledgements_total", "strata_rpc_server_duration_seconds_bucket"},
		"strata-consumer-groups.json": {"strata_consumer_group_lag", "strata_consumer_group_committed_offset", "strata_consumer_group_coordinator_up",
			"strata_consumer_group_offset_out_of_range", "strata_consumer_group_members"},
		"strata-storage.json": {"strata_storage_pending_writes", "strata_storage_fsync_duration_seconds_bucket", "strata_storage_segments", "strata_storage_bytes",
			"strata_partition_log_start_offset", "strata_broker_log_compaction_runs_total"},
		"strata-replication.json": {"strata_cluster_partition_in_sync_replicas", "strata_cluster_partition_replicas",
			"strata_cluster_replication_lag_seconds", "strata_replication_lag_records", "strata_replication_events_total"},
	}
	ds := dashboards(t)
	for file, metrics := range want {
		d := ds[file]
		if d == nil {
			t.Errorf("dashboard %s missing", file)
			continue
		}
		var used []string
		for _, e := range d.Exprs() {
			used = append(used, MetricNames(e)...)
		}
		for _, m := range metrics {
			if !slices.Contains(used, m) {
				t.Errorf("%s: no query uses %s", file, m)
			}
		}
	}
	// The lag dashboard shows TOTAL-LAG per group, the CLI's figure.
	found := false
	for _, p := range ds["strata-consumer-groups.json"].AllPanels() {
		for _, tg := range p.Targets {
			found = found || (strings.Contains(p.Title, "TOTAL-LAG per group") && strings.HasPrefix(strings.TrimSpace(tg.Expr), "sort_desc(sum by (group)"))
		}
	}
	if !found {
		t.Error("no TOTAL-LAG per group panel")
	}
}

// TestDashboardCheckCatchesMistakes proves the checks can fail.
func TestDashboardCheckCatchesMistakes(t *testing.T) {
	s := NewScope(catalogue(t))
	cases := map[string]struct{ expr, want string }{
		"syntax":            {`sum(rate(strata_broker_commands_total[5m])`, "unclosed"},
		"unknown metric":    {`rate(strata_broker_comands_total[5m])`, "not in the catalogue"},
		"unknown label":     {`strata_consumer_group_lag{consumer_group="x"}`, `no label "consumer_group"`},
		"bad grouping":      {`sum by (grp) (strata_consumer_group_lag)`, `grouping label "grp"`},
		"no metric name":    {`{topic="x"}`, "names no metric"},
		"le on a gauge":     {`strata_storage_segments{le="1"}`, `no label "le"`},
		"undefined var":     {`strata_consumer_group_lag{group=~"$nope"}`, "variable $nope is not defined"},
		"gauge as counter":  {`strata_storage_segments_total`, "not in the catalogue"},
		"bucket of a gauge": {`strata_storage_bytes_bucket`, "not in the catalogue"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := &Dashboard{UID: "u", Title: "t", SchemaVersion: 39}
			d.Templating.List = []Variable{{Name: "datasource", Type: "datasource", Query: []byte(`"prometheus"`)}}
			ds := &Datasource{Type: "prometheus", UID: datasourceRef}
			d.Panels = []Panel{{ID: 1, Type: "timeseries", Title: "p", GridPos: &GridPos{H: 8, W: 12}, Datasource: ds,
				Targets: []Target{{RefID: "A", Expr: c.expr}}}}
			errs := d.Check(s)
			if !slices.ContainsFunc(errs, func(e error) bool { return strings.Contains(e.Error(), c.want) }) {
				t.Fatalf("want an error containing %q, got %v", c.want, errs)
			}
		})
	}
	// A valid expression with variables passes the same path.
	d := &Dashboard{UID: "u", Title: "t", SchemaVersion: 39}
	d.Templating.List = []Variable{{Name: "datasource", Type: "datasource", Query: []byte(`"prometheus"`)},
		{Name: "group", Type: "query", Datasource: &Datasource{UID: datasourceRef}, Query: []byte(`{"query":"label_values(strata_consumer_group_lag, group)"}`)}}
	d.Panels = []Panel{{ID: 1, Type: "stat", Title: "p", GridPos: &GridPos{H: 8, W: 12}, Datasource: &Datasource{UID: datasourceRef},
		Targets: []Target{{RefID: "A", Expr: `sum by (group) (rate(strata_consumer_group_commits_total[$__rate_interval])) * 0 + sum by (group) (strata_consumer_group_lag{group=~"${group}"})`}}}}
	if errs := d.Check(s); len(errs) > 0 {
		t.Fatalf("valid dashboard rejected: %v", errs)
	}
	d.Templating.List[1].Query = []byte(`"label_values(strata_consumer_group_lag, grp)"`)
	if errs := d.Check(s); len(errs) == 0 {
		t.Fatal("a variable on a label the series lack was accepted")
	}
}

// TestAlertRules parses the rule file with Prometheus's rule-file parser
// and checks every expression against the catalogue.
func TestAlertRules(t *testing.T) {
	groups, errs := LoadRules(rulesPath)
	for _, err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for _, err := range NewScope(catalogue(t)).CheckRules(groups) {
		t.Error(err)
	}
	// The spec's suggested alert conditions (section 6), one alert each.
	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	for _, want := range []string{
		"StrataTargetDown",                // scrape target down
		"StrataGatewayNotReady",           // svc_broker_ready equal 0
		"StrataMetadNoLeader",             // distribution enabled with no leader
		"StrataUnderReplicatedPartitions", // under-replicated partitions above 0
		"StrataConsumerOffsetOutOfRange",  // offset_out_of_range equal 1
		"StrataGroupCoordinatorNotUnique", // coordinator_up sum per group not equal 1
		"StrataConsumerLagSustained",      // sustained lag
		"StrataPendingWritesStuck",        // pending writes above 0 for long
		"StrataPublishLatencyHigh",        // write latency
		"StrataFsyncLatencyHigh",          // fsync latency
		"StrataProcessNotReady",           // readiness of every process, not only gateways
		"StrataCompactionFailed",          // compaction runs with result error
	} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

func TestRuleCheckCatchesMistakes(t *testing.T) {
	s := NewScope(catalogue(t))
	for name, expr := range map[string]string{
		"unknown metric":    `svc_broker_ready == 0`,
		"unknown label":     `strata_broker_ready{role="gateway"} == 0`,
		"lost group label":  `sum by (group) (strata:consumer_group_lag:sum) > 1`,
		"recording missing": `strata:nope > 1`,
	} {
		groups, errs := LoadRules(rulesPath)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		groups.Groups[1].Rules[0].Expr = expr
		if name == "lost group label" {
			groups.Groups[0].Rules[0].Expr = `sum(strata_consumer_group_lag)`
		}
		if errs := s.CheckRules(groups); len(errs) == 0 {
			t.Errorf("%s: %q accepted", name, expr)
		}
	}
}

// TestAlertRuleUnitTests runs strata-rules.test.yaml (promtool's format)
// with Prometheus's rule manager: every alert fires where expected, with
// the expected labels and annotations, and nowhere else.
func TestAlertRuleUnitTests(t *testing.T) {
	f, err := LoadRuleTests(ruleTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Tests {
		t.Run(g.Name, func(t *testing.T) {
			for _, err := range f.Run(g) {
				t.Error(err)
			}
		})
	}
	// Every alert has a case where it fires and one where it stays quiet.
	groups, _ := LoadRules(rulesPath)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, g := range f.Tests {
		for _, c := range g.AlertRuleTests {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				quiet[c.Alertname] = true
			}
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && (!fires[r.Alert] || !quiet[r.Alert]) {
				t.Errorf("alert %s: firing case %v, quiet case %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
}

// TestRuleUnitTestRunnerFails: a wrong expectation must fail the runner.
func TestRuleUnitTestRunnerFails(t *testing.T) {
	f, err := LoadRuleTests(ruleTestsPath)
	if err != nil {
		t.Fatal(err)
	}
	g := f.Tests[0]
	cases := slices.Clone(g.AlertRuleTests)
	for i := range cases {
		c := &cases[i]
		if len(c.ExpAlerts) > 0 {
			c.ExpAlerts = nil // expect silence where the alert fires
		}
	}
	g.AlertRuleTests = cases
	if errs := f.Run(g); len(errs) == 0 {
		t.Fatal("a firing alert expected quiet passed")
	}
}

// TestScrapeConfigs loads the Prometheus configurations with Prometheus's
// own loader: the compose one loads the rules, both name the job strata and
// set the component target label the rules and dashboards use.
func TestScrapeConfigs(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	compose, err := config.LoadFile("../compose/prometheus.yml", false, log)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(compose.RuleFiles, func(f string) bool { return filepath.Base(f) == "strata-rules.yaml" }) {
		t.Errorf("compose prometheus.yml rule_files %v lack strata-rules.yaml", compose.RuleFiles)
	}
	if len(compose.ScrapeConfigs) != 1 || compose.ScrapeConfigs[0].JobName != "strata" {
		t.Fatalf("compose scrape configs: want one job strata")
	}
	components := map[string]int{}
	for _, g := range staticGroups(t, compose.ScrapeConfigs[0]) {
		for name := range g {
			if !slices.Contains(TargetLabels, name) {
				t.Errorf("compose target label %q is not one of %v", name, TargetLabels)
			}
		}
		components[g["component"]]++
	}
	for _, r := range Roles {
		if components[r] == 0 {
			t.Errorf("compose scrapes no %s", r)
		}
	}

	k8s, err := config.LoadFile("../prometheus/kubernetes-scrape.yaml", false, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(k8s.ScrapeConfigs) != 1 || k8s.ScrapeConfigs[0].JobName != "strata" {
		t.Fatalf("kubernetes scrape config: want one job strata")
	}
	setsComponent := false
	for _, rc := range k8s.ScrapeConfigs[0].RelabelConfigs {
		setsComponent = setsComponent || rc.TargetLabel == "component"
		if rc.TargetLabel != "" && !strings.HasPrefix(rc.TargetLabel, "__") && !slices.Contains(TargetLabels, rc.TargetLabel) {
			t.Errorf("kubernetes relabel sets %q, not one of %v", rc.TargetLabel, TargetLabels)
		}
	}
	if !setsComponent {
		t.Error("kubernetes scrape config does not set component")
	}
}

// staticGroups returns the labels of every static target group of sc.
func staticGroups(t *testing.T, sc *config.ScrapeConfig) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, d := range sc.ServiceDiscoveryConfigs {
		static, ok := d.(discovery.StaticConfig)
		if !ok {
			t.Fatalf("compose scrape config uses %T, want static targets", d)
		}
		for _, g := range static {
			l := map[string]string{}
			for k, v := range g.Labels {
				l[string(k)] = string(v)
			}
			out = append(out, l)
		}
	}
	return out
}
