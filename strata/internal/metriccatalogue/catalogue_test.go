package metriccatalogue

import (
	"slices"
	"strings"
	"testing"
)

const exposition = `# HELP go_gc_duration_seconds A summary of the wall-time pause.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1e-05
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 3
# HELP strata_broker_command_duration_seconds Command dispatch latency; for streams it ends at acceptance.
# TYPE strata_broker_command_duration_seconds histogram
strata_broker_command_duration_seconds_bucket{command="CREATE",le="0.1"} 1
strata_broker_command_duration_seconds_bucket{command="CREATE",le="+Inf"} 1
strata_broker_command_duration_seconds_sum{command="CREATE"} 0.01
strata_broker_command_duration_seconds_count{command="CREATE"} 1
# HELP strata_consumer_group_lag max(HWM - committed next offset, 0) \\ with a line\nbreak
# TYPE strata_consumer_group_lag gauge
strata_consumer_group_lag{group="g,1}",partition="0",topic="a\"b"} 4
strata_consumer_group_lag{group="g2",partition="1",topic="c", shard="x"} 0 1700000000000
# HELP strata_storage_segments Segment files of open handlers.
# TYPE strata_storage_segments gauge
strata_storage_segments 7
# HELP strata_unused A family without samples.
# TYPE strata_unused counter
`

func TestParseExposition(t *testing.T) {
	fams, err := ParseExposition(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Family{
		"go_gc_duration_seconds":                 {Type: "summary", Help: "A summary of the wall-time pause."},
		"strata_broker_command_duration_seconds": {Type: "histogram", Help: "Command dispatch latency; for streams it ends at acceptance.", Labels: []string{"command"}},
		"strata_consumer_group_lag":              {Type: "gauge", Help: "max(HWM - committed next offset, 0) \\ with a line\nbreak", Labels: []string{"group", "partition", "shard", "topic"}},
		"strata_storage_segments":                {Type: "gauge", Help: "Segment files of open handlers."},
		"strata_unused":                          {Type: "counter", Help: "A family without samples."},
	}
	if len(fams) != len(want) {
		t.Fatalf("%d families, want %d: %v", len(fams), len(want), fams)
	}
	for name, w := range want {
		f := fams[name]
		if f == nil || f.Type != w.Type || f.Help != w.Help || !slices.Equal(f.Labels, w.Labels) {
			t.Errorf("%s: got %+v, want %+v", name, f, w)
		}
	}
}

func TestParseExpositionRejectsUndeclaredAndMalformed(t *testing.T) {
	for name, in := range map[string]string{
		"undeclared":        "strata_x 1\n",
		"unterminated":      "# TYPE strata_x gauge\nstrata_x{a=\"b} 1\n",
		"label without =":   "# TYPE strata_x gauge\nstrata_x{a} 1\n",
		"bad type line":     "# TYPE strata_x\n",
		"suffix of a gauge": "# TYPE strata_x gauge\nstrata_x_count 1\n",
	} {
		if _, err := ParseExposition(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestCatalogueMergesRolesAndRejectsConflicts(t *testing.T) {
	c := Catalogue{}
	for _, role := range []string{"gateway", "metad"} {
		if err := c.Add(role, map[string]*Family{"strata_rpc_x": {Name: "strata_rpc_x", Type: "counter", Help: "h", Labels: []string{role}}}); err != nil {
			t.Fatal(err)
		}
	}
	f := c["strata_rpc_x"]
	if !slices.Equal(f.Roles, []string{"metad", "gateway"}) || !slices.Equal(f.Labels, []string{"gateway", "metad"}) {
		t.Fatalf("merged %+v", f)
	}
	if err := c.Add("partitiond", map[string]*Family{"strata_rpc_x": {Name: "strata_rpc_x", Type: "gauge", Help: "h"}}); err == nil {
		t.Fatal("a type conflict was merged")
	}
	for _, role := range []string{"partitiond", "coordinatord"} {
		if err := c.Add(role, map[string]*Family{"strata_rpc_x": {Name: "strata_rpc_x", Type: "counter", Help: "h|i"[:1]}}); err != nil {
			t.Fatal(err)
		}
	}
	c["strata_b"] = &Family{Name: "strata_b", Type: "gauge", Help: "a|b", Roles: []string{"metad"}}
	md := string(c.Markdown("# T\n"))
	for _, want := range []string{
		Header,
		"| `strata_rpc_x` | counter | `gateway`, `metad` | all | h |",
		"| `strata_b` | gauge | — | metad | a\\|b |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Index(md, "strata_b") > strings.Index(md, "strata_rpc_x") {
		t.Error("rows not sorted by name")
	}
}

func TestRulesCatchEachViolation(t *testing.T) {
	c := Catalogue{
		"strata_broker_commands_total":              {Type: "counter", Labels: []string{"command", "result"}, Roles: []string{"gateway"}},
		"strata_storage_segment_cache_hits":         {Type: "counter", Roles: []string{"partitiond"}},
		"go_gc_cycles_total":                        {Type: "gauge", Roles: []string{"metad"}},
		"strata_build_info":                         {Type: "gauge", Labels: []string{"version"}, Roles: []string{"metad", "gateway"}},
		"strata_broker_seqnum_gap_total":            {Type: "counter", Labels: []string{"topic", "producer_id"}, Roles: []string{"partitiond"}},
		"strata_gateway_publish_records_total":      {Type: "counter", Roles: []string{"gateway"}},
		"strata_consumer_metadata_replayed_records": {Type: "gauge", Roles: []string{"coordinatord"}},
		"strata_storage_reads":                      {Type: "counter", Roles: []string{"partitiond"}},
		"strata_metad_nodes_total":                  {Type: "gauge", Roles: []string{"metad"}},
	}
	got := Rules(c)
	want := []string{
		`strata_broker_seqnum_gap_total: label "producer_id" is not a known bounded label`,
		"strata_consumer_metadata_replayed_records: the spec's count is a gauge, not a counter",
		"strata_gateway_publish_records_total: not a prefix of role gateway (strata_broker_, strata_wire_, strata_streams_active)",
		"strata_metad_nodes_total: a gauge whose name ends in _total",
		"strata_storage_reads: a counter whose name does not end in _total",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
