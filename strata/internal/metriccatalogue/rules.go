package metriccatalogue

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The naming rules every Strata family follows (issue 18), checked against
// the live scrapes by TestCatalogueIsCurrent and documented in
// docs/metrics.md:
//   - a counter's name ends in _total and nothing else's does, except the
//     counters the spec names without the suffix (specCountersWithoutTotal);
//   - a role's families use that role's prefixes (rolePrefixes), so one
//     concept has one place and a dashboard can tell the role by the name;
//   - every label is one of boundedLabels, each bounded by something the
//     operator controls (topics, groups, brokers) or by a closed set of
//     values: a new label is a deliberate decision, never a producer id.

// specCountersWithoutTotal are counters whose spec names carry no _total.
var specCountersWithoutTotal = []string{
	"strata_storage_segment_cache_hits",
	"strata_storage_segment_cache_misses",
	"strata_storage_segment_cache_evictions",
	"strata_consumer_metadata_replayed_records",
}

// rolePrefixes lists the name prefixes each role may use. strata_broker_ is
// shared by the gateway and partitiond because the spec names broker metrics
// that live on either side of the hop (publishes on the gateway, compaction
// and sequence checks on the partition leader).
var rolePrefixes = map[string][]string{
	"gateway":      {"strata_broker_", "strata_wire_", "strata_streams_active"},
	"partitiond":   {"strata_partition_", "strata_storage_", "strata_replication_", "strata_cluster_replication_", "strata_stream_", "strata_broker_"},
	"coordinatord": {"strata_consumer_", "strata_transaction"},
	"metad":        {"strata_metad_", "strata_cluster_"},
}

// commonPrefixes are exposed by every role (libs code).
var commonPrefixes = []string{"strata_build_info", "strata_process_ready", "strata_rpc_server_"}

// boundedLabels are the label names a family may carry, with what bounds
// each one.
var boundedLabels = map[string]string{
	"topic":       "topics that exist (series are dropped with the topic where computed at scrape time)",
	"partition":   "partitions of those topics",
	"group":       "consumer groups that exist",
	"broker":      "partition servers of the cluster",
	"broker_id":   "partition servers of the cluster",
	"command":     "the Wire v2 command table (unknown names are folded into one value)",
	"method":      "the registered gRPC methods",
	"code":        "the errcode catalogue",
	"result":      "a closed set per family (ok, error, duplicate, …)",
	"reason":      "a closed set per family",
	"state":       "a closed set of states",
	"phase":       "metadata, replay",
	"ack_mode":    "0, 1, all",
	"error_class": "the errcode classes",
	"event":       "replication event kinds",
	"direction":   "in, out",
	"live":        "true, false",
	"role":        "the four roles",
	"version":     "one value per process",
	"revision":    "one value per process",
	"go_version":  "one value per process",
}

// Rules returns every violation of the naming rules in c, sorted. Families
// of the Go client libraries (go_, process_) are theirs, not ours.
func Rules(c Catalogue) []string {
	var out []string
	for name, f := range c {
		if !strings.HasPrefix(name, "strata_") {
			continue
		}
		isCounter := f.Type == "counter"
		hasTotal := strings.HasSuffix(name, "_total")
		switch {
		case isCounter && !hasTotal && !slices.Contains(specCountersWithoutTotal, name):
			out = append(out, fmt.Sprintf("%s: a counter whose name does not end in _total", name))
		case !isCounter && hasTotal:
			out = append(out, fmt.Sprintf("%s: a %s whose name ends in _total", name, f.Type))
		case !isCounter && slices.Contains(specCountersWithoutTotal, name):
			out = append(out, fmt.Sprintf("%s: the spec's count is a %s, not a counter", name, f.Type))
		}
		for _, role := range f.Roles {
			if !hasAnyPrefix(name, commonPrefixes) && !hasAnyPrefix(name, rolePrefixes[role]) {
				out = append(out, fmt.Sprintf("%s: not a prefix of role %s (%s)", name, role, strings.Join(rolePrefixes[role], ", ")))
			}
		}
		for _, l := range f.Labels {
			if _, ok := boundedLabels[l]; !ok {
				out = append(out, fmt.Sprintf("%s: label %q is not a known bounded label", name, l))
			}
		}
	}
	sort.Strings(out)
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
