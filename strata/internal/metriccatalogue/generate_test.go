package metriccatalogue

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite docs/metrics.md from the registries")

// TestMain checks for leaked goroutines (the in-process all-in-one runs
// in this process) and removes the binaries clustertest built.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { clustertest.RemoveBuilds() }))
}

// repoRoot is the workspace root, three levels above this package.
const repoRoot = "../../.."

var cataloguePath = filepath.Join(repoRoot, "docs", "metrics.md")

const preamble = `# Metrics catalogue

Every metric family a Strata process exposes on ` + "`/metrics`" + `, generated from the registries, never
typed by hand: ` + "`TestCatalogueIsCurrent`" + ` (package ` + "`strata/internal/metriccatalogue`" + `) starts
the in-process all-in-one and a split process cluster of role binaries (1 metad, 2 partitiond,
2 coordinatord, 1 gateway; replication factor 2), drives the traffic that makes label-bearing and
state-bearing families appear (topics, acks=all and idempotent publishes with a duplicate and a sequence
gap, a consumer group that commits, a group whose topic is deleted, compaction passes, follower
replication, a malformed frame, a corrupt compressed payload), scrapes every process and renders this
file. The test fails when the file is stale, when a ` + "`strata_`" + ` name written in the roles' source
is missing here, and when the all-in-one exposes a family the split deployment does not. Rewrite it with

    go test github.com/strataio/strata/strata/internal/metriccatalogue -run TestCatalogueIsCurrent -update

The spec's ` + "`svc_`" + ` prefix is ` + "`strata_`" + ` here. **roles**: the role binaries whose
` + "`/metrics`" + ` expose the family (` + "`all`" + `: every role; the all-in-one ` + "`strata run`" + `
exposes the union on one registry). **labels**: the label names of its series (` + "`le`" + ` and
` + "`quantile`" + ` of histograms and summaries left out). A histogram ` + "`x`" + ` is queried as
` + "`x_bucket`" + `, ` + "`x_sum`" + ` and ` + "`x_count`" + `. Families computed at scrape time (partition,
group, cluster and replication gauges) have series only while their object exists. Dashboards and alert
rules under ` + "`deploy/`" + ` are checked against this file (docs/deployment.md).

The same test enforces the naming rules (` + "`rules.go`" + `): a counter ends in ` + "`_total`" + ` and nothing else
does (except the four counters the spec names without it: ` + "`strata_storage_segment_cache_hits`" + `,
` + "`_misses`" + `, ` + "`_evictions`" + ` and ` + "`strata_consumer_metadata_replayed_records`" + `); each role uses its own
prefixes (gateway ` + "`strata_broker_`" + `/` + "`strata_wire_`" + `, partitiond ` + "`strata_partition_`" + `/` + "`strata_storage_`" + `/
` + "`strata_replication_`" + `/` + "`strata_stream_`" + ` plus the spec's ` + "`strata_broker_`" + ` leader-side names, coordinatord
` + "`strata_consumer_`" + `/` + "`strata_transaction`" + `, metad ` + "`strata_metad_`" + `/` + "`strata_cluster_`" + `); and every label is on a list of bounded
labels (topics, groups, brokers, closed value sets) — no producer, member or client ids.
`

// TestCatalogueIsCurrent builds the catalogue from real scrapes and compares
// it with docs/metrics.md (-update rewrites the file).
func TestCatalogueIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process cluster: skipped with -short")
	}
	start := time.Now()
	aio := allInOneFamilies(t)
	t.Logf("all-in-one: %d families in %v", len(aio), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	cat := splitCatalogue(t)
	t.Logf("split cluster: %d families in %v", len(cat), time.Since(start).Round(time.Millisecond))

	// The all-in-one hosts the same role code on one registry: it may
	// expose nothing the split deployment lacks, with the same type and help.
	for name, f := range aio {
		s := cat[name]
		switch {
		case s == nil:
			t.Errorf("%s: exposed by the all-in-one only", name)
		case s.Type != f.Type || s.Help != f.Help:
			t.Errorf("%s: all-in-one %s %q, split %s %q", name, f.Type, f.Help, s.Type, s.Help)
		default:
			for _, l := range f.Labels {
				if !slices.Contains(s.Labels, l) {
					t.Errorf("%s: label %s only on the all-in-one", name, l)
				}
			}
		}
	}
	for _, v := range Rules(cat) {
		t.Errorf("metric rule: %s", v)
	}
	for _, name := range sourceMetricNames(t) {
		if cat[name] == nil {
			t.Errorf("%s is registered in the roles' source but no scrape showed it: drive the traffic that makes it appear", name)
		}
	}
	if t.Failed() {
		return
	}

	got := cat.Markdown(preamble)
	if *update {
		if err := os.WriteFile(cataloguePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d families)", cataloguePath, len(cat))
		return
	}
	want, err := os.ReadFile(cataloguePath)
	if err != nil {
		t.Fatalf("%v: generate it with -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale; rerun with -update. First difference:\n%s", cataloguePath, firstDiff(string(want), string(got)))
	}
}

// allInOneFamilies runs the in-process all-in-one (every role on one
// registry), drives the traffic and returns what its /metrics exposes.
func allInOneFamilies(t *testing.T) map[string]*Family {
	a := framework.StartAllInOne(t, func(c *allinone.Config) {
		c.Partitiond.RetentionCheckInterval = 200 * time.Millisecond
		c.Coordinatord.LagRefreshInterval = 200 * time.Millisecond
	})
	gw := a.Gateways()[0]
	exercise(t, gw.ClientAddr)
	var fams map[string]*Family
	framework.Eventually(t, 30*time.Second, "asynchronous families on the all-in-one", func() (bool, string) {
		fams = scrape(t, gw.MetricsAddr)
		missing := missingOf(fams, asyncFamilies)
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})
	return fams
}

// splitCatalogue runs the role binaries as separate processes, drives the
// traffic and merges every process's scrape under its role.
func splitCatalogue(t *testing.T) Catalogue {
	c := clustertest.Start(t, clustertest.Spec{Metad: 1, Partitiond: 2, Coordinatord: 2, Gateways: 1,
		Env: map[pki.Role][]string{
			// Two replicas per partition: the leaders export follower lag.
			pki.RoleMetad:        {"STRATA_METAD_DEFAULT_REPLICATION_FACTOR=2", "STRATA_METAD_NODE_LEASE_TIMEOUT=2s"},
			pki.RolePartitiond:   {"STRATA_PARTITIOND_RETENTION_CHECK_INTERVAL=200ms"},
			pki.RoleCoordinatord: {"STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR=2", "STRATA_COORDINATORD_LAG_REFRESH_INTERVAL=200ms"},
		}})
	failover(t, c)
	exercise(t, c.GatewayAddrs()[0])
	var cat Catalogue
	framework.Eventually(t, 30*time.Second, "asynchronous families on the split cluster", func() (bool, string) {
		cat = Catalogue{}
		for _, p := range c.Procs {
			if err := cat.Add(string(p.Role), scrape(t, p.MetricsAddr)); err != nil {
				t.Fatal(err)
			}
		}
		missing := missingOf(cat, append(slices.Clone(asyncFamilies), replicationFamilies...))
		return len(missing) == 0, fmt.Sprintf("missing %v", missing)
	})
	return cat
}

// failover drives the families that only faults make appear. It kills the
// partition server L leading cat-failover/0 (RF 2): the other server's
// fetch session from L fails (async replication failures). Once metad has
// expired L's lease, the single-copy partition of cat-offline on L is
// offline (no leader), and a publish to it is retried inside the gateway
// until route_retry_wait ends (replication retries). L is started again so
// that every process can be scraped.
func failover(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cl := framework.Dial(t, ctx, c.GatewayAddrs()[0])
	framework.OK(t, ctx, cl, "CREATE topic=cat-failover partitions=1")
	// Two partitions over two servers: one on each (metad's placement).
	framework.OK(t, ctx, cl, "CREATE topic=cat-offline partitions=2 replication_factor=1")
	for _, topic := range []string{"cat-failover", "cat-offline"} {
		framework.WaitTopic(t, ctx, cl, topic)
		framework.PublishAcked(t, ctx, cl, topic, 2)
	}
	victim := framework.LeaderOf(t, ctx, c, cl, "cat-failover", 0)
	victim.Kill()

	var offline int32 = -1
	framework.Eventually(t, 30*time.Second, "a cat-offline partition without a leader", func() (bool, string) {
		st, err := framework.Status(ctx, cl)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range st.Partitions {
			if p.Topic == "cat-offline" && p.Leader == "" {
				offline = p.Partition
			}
		}
		return offline >= 0, fmt.Sprintf("%+v", st.Partitions)
	})
	framework.Eventually(t, 30*time.Second, "a publish to the offline partition refused with leader_not_found", func() (bool, string) {
		_, err := cl.Publish(ctx, client.PublishRequest{Topic: "cat-offline", Partition: offline, Acks: client.AcksLeader, Message: "offline"})
		if err == nil {
			t.Fatal("a partition without a leader accepted a publish")
		}
		return errcode.CodeOf(err) == errcode.LeaderNotFound.Name(), err.Error()
	})
	victim.Start()
	victim.WaitReady(30 * time.Second)
}

// asyncFamilies appear some time after the traffic: compaction runs on the
// maintenance pass, the topic-lookup failure when coordinatord sees the
// deletion, lag and out-of-range once coordinatord has read the partitions'
// high watermarks. replicationFamilies need followers (the split cluster
// only).
var (
	asyncFamilies = []string{"strata_broker_log_compaction_runs_total", "strata_consumer_group_observation_failures_total",
		"strata_consumer_group_lag", "strata_consumer_group_offset_out_of_range"}
	replicationFamilies = []string{"strata_replication_lag_records", "strata_cluster_replication_lag_seconds"}
)

func missingOf[F any](fams map[string]F, names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := fams[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// exercise drives the traffic that makes every traffic-bound family appear.
func exercise(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := framework.Dial(t, ctx, addr)
	framework.OK(t, ctx, cl, "CREATE topic=cat-log partitions=2")
	framework.OK(t, ctx, cl, "CREATE topic=cat-compact partitions=1 cleanup_policy=compact")
	framework.OK(t, ctx, cl, "CREATE topic=cat-gone partitions=1")
	for _, topic := range []string{"cat-log", "cat-compact", "cat-gone"} {
		framework.WaitTopic(t, ctx, cl, topic)
		framework.PublishAcked(t, ctx, cl, topic, 10)
	}

	// Idempotent publishes: a retried sequence (duplicate) and a gap.
	pub := func(seq uint64) error {
		_, err := cl.Publish(ctx, client.PublishRequest{Topic: "cat-log", Partition: 0, Acks: client.AcksAll,
			ProducerID: "cat-producer", SeqNum: seq, Idempotent: true, Message: fmt.Sprintf("s%d", seq)})
		return err
	}
	for _, seq := range []uint64{1, 1} {
		if err := pub(seq); err != nil {
			t.Fatalf("idempotent publish %d: %v", seq, err)
		}
	}
	if err := pub(5); err == nil {
		t.Fatal("a sequence gap was accepted")
	}
	// Event sourcing: an append, a stale one and a snapshot (partitiond's
	// stream counters).
	framework.OK(t, ctx, cl, "CREATE topic=cat-events partitions=1 event_sourcing=true")
	framework.WaitTopic(t, ctx, cl, "cat-events")
	framework.Retry(t, ctx, func() error {
		_, err := cl.AppendStream(ctx, client.Event{Topic: "cat-events", Key: "agg", Version: 1, Payload: []byte("e1")})
		if errcode.CodeOf(err) == errcode.VersionConflict.Name() {
			return nil // an earlier attempt was stored
		}
		return err
	})
	if _, err := cl.AppendStream(ctx, client.Event{Topic: "cat-events", Key: "agg", Version: 1, Payload: []byte("stale")}); err == nil {
		t.Fatal("a stale stream version was accepted")
	}
	if err := cl.SaveSnapshot(ctx, "cat-events", "agg", 1, []byte("{}")); err != nil {
		t.Fatalf("save snapshot: %v", err)
	}
	// A replay proof (an unknown match: answered, not proven).
	framework.OK(t, ctx, cl, "CREATE topic=cat-replay partitions=1 event_sourcing=true aggregate_replay=true idempotent=true")
	framework.WaitTopic(t, ctx, cl, "cat-replay")
	framework.Retry(t, ctx, func() error {
		_, err := cl.AggregateReplayProof(ctx, "cat-replay", "nobody", client.ProofOptions{})
		if errcode.CodeOf(err) == errcode.AggregateProofUnavailable.Name() {
			return nil
		}
		return err
	})
	// A command error.
	if _, err := cl.Do(ctx, "DESCRIBE topic=cat-missing"); err == nil {
		t.Fatal("DESCRIBE of a missing topic succeeded")
	}

	// Consumer groups: one that commits, one whose exact topic is then
	// deleted (coordinatord counts the failed topic lookup).
	framework.ConsumeGroup(t, ctx, cl, "cat-group", "cat-log", 11) // 10 + one idempotent record
	framework.ConsumeGroup(t, ctx, cl, "cat-gone-group", "cat-gone", 10)
	if _, err := cl.DeleteTopic(ctx, "cat-gone", false); err != nil {
		t.Fatalf("delete cat-gone: %v", err)
	}

	// Wire failures: text instead of a negotiation frame, and a corrupt
	// gzip payload on a negotiated connection.
	nc := framework.DialRaw(t, addr)
	if _, err := nc.Write([]byte("HELLO, this is plain text and certainly not a Wire v2 frame\n")); err != nil {
		t.Fatal(err)
	}
	framework.ExpectClosed(t, nc)
	r := framework.Negotiate(t, addr, wire.CompressionGzip)
	listID, _ := wire.TableA.ID(wire.CmdList)
	garbage := []byte("certainly not a gzip stream..")
	h, err := r.Codec.AppendHeader(nil, wire.Header{Kind: wire.KindRequest, Command: listID, RequestID: 1}, garbage, 40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Conn.Write(append(h, garbage...)); err != nil {
		t.Fatal(err)
	}
	if f := r.MustRead(); f.Header.Status == wire.StatusOK {
		t.Fatal("a corrupt compressed payload was answered OK")
	}
}

// scrape reads one process's /metrics in the text format.
func scrape(t *testing.T, addr string) map[string]*Family {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Close = true
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", addr, resp.StatusCode, err)
	}
	fams, err := ParseExposition(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	return fams
}

// metricLiteral is a strata_ metric name written as a Go string literal;
// prefixedName is a name passed to a helper d(name, ...) that prepends
// "strata_" (coordinatord's descriptors), in a file that does so.
var (
	metricLiteral = regexp.MustCompile(`"(strata_[a-z0-9_]*[a-z0-9])"`)
	prefixedName  = regexp.MustCompile(`\bd\("([a-z][a-z0-9_]*[a-z0-9])",`)
)

// sourceMetricNames lists the strata_ names written as literals in the
// non-test Go files of the roles and libs (and the names coordinatord
// prefixes with "strata_"): each must be in the catalogue, so a family no
// traffic above produces fails the test instead of silently missing.
func sourceMetricNames(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, dir := range []string{"metad", "partitiond", "coordinatord", "gateway", "libs"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricLiteral.FindAllSubmatch(b, -1) {
				seen[string(m[1])] = true
			}
			if bytes.Contains(b, []byte(`"strata_"+name`)) {
				for _, m := range prefixedName.FindAllSubmatch(b, -1) {
					seen["strata_"+string(m[1])] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	if len(out) < 10 {
		t.Fatalf("only %d strata_ names found under %s: wrong root?", len(out), repoRoot)
	}
	return out
}

// firstDiff shows the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d\n  file:      %s\n  generated: %s", i+1, w, g)
		}
	}
	return "(none)"
}
