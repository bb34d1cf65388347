package partitiond

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/streamtest"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	streamv1 "github.com/strataio/strata/proto/strata/stream/v1"

	"github.com/strataio/strata/partitiond/internal/recordtest"
	"github.com/strataio/strata/partitiond/internal/streams"
)

func eventRecord(t testing.TB, topic, key string, ver uint64, payload string) []byte {
	t.Helper()
	r := wire.Record{Topic: topic, Key: key, AggregateVersion: ver, SchemaVersion: 1, EventType: "Happened", Payload: []byte(payload)}
	b, err := r.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func esTopic(name string) *metav1.Topic {
	tp := metadfake.NewTopic(name, 1, 1, "p1", "p1")
	tp.Config.EventSourcing = true
	return tp
}

func (c *cluster) streams(t testing.TB) streamv1.StreamServiceClient {
	t.Helper()
	return streamv1.NewStreamServiceClient(c.conn)
}

func appendEvent(t testing.TB, sc streamv1.StreamServiceClient, topic, key string, ver uint64, payload string) (*streamv1.AppendStreamResponse, error) {
	t.Helper()
	return sc.AppendStream(ctx(t), &streamv1.AppendStreamRequest{Stream: &streamv1.StreamRef{Topic: topic, Key: key},
		Version: ver, Record: eventRecord(t, topic, key, ver, payload)})
}

// appendEvents appends versions 1..n of key, each with payload.
func appendEvents(t testing.TB, sc streamv1.StreamServiceClient, topic, key string, n uint64, payload string) {
	t.Helper()
	for v := uint64(1); v <= n; v++ {
		if _, err := appendEvent(t, sc, topic, key, v, payload); err != nil {
			t.Fatalf("append %s/%s version %d: %v", topic, key, v, err)
		}
	}
}

func TestStreamAppendReadSnapshotAndRestart(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	plain := metadfake.NewTopic("plain", 1, 1, "p1", "p1")
	c.metad.PutTopic(plain)
	c.metad.PutTopic(esTopic("orders"))
	c.waitServing(t, "orders", 0)
	c.waitServing(t, "plain", 0)
	sc := c.streams(t)

	_, err := appendEvent(t, sc, "plain", "a", 1, "x")
	wantCode(t, err, errcode.EventSourcingNotEnabled)

	for v := uint64(1); v <= 5; v++ {
		resp, err := appendEvent(t, sc, "orders", "agg-1", v, fmt.Sprintf("e%d", v))
		if err != nil {
			t.Fatalf("append %d: %v", v, err)
		}
		if resp.GetVersion() != v {
			t.Fatalf("append %d answered %v", v, resp)
		}
		// Another aggregate interleaved in the same partition.
		if _, err := appendEvent(t, sc, "orders", "agg-2", v, "other"); err != nil {
			t.Fatal(err)
		}
	}
	_, err = appendEvent(t, sc, "orders", "agg-1", 5, "again")
	e := wantCode(t, err, errcode.VersionConflict)
	if e.Field("current") != "5" || e.Field("expected") != "5" {
		t.Fatalf("conflict fields %v", e)
	}
	_, err = appendEvent(t, sc, "orders", "agg-1", 7, "skip")
	wantCode(t, err, errcode.VersionConflict)

	ver, err := sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}})
	if err != nil || ver.GetVersion() != 5 {
		t.Fatalf("version %v %v", ver, err)
	}
	ver, err = sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "nobody"}})
	if err != nil || ver.GetVersion() != 0 {
		t.Fatalf("unknown aggregate version %v %v", ver, err)
	}

	read := func(from uint64, snap bool) *streamv1.ReadStreamResponse {
		t.Helper()
		resp, err := sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}, FromVersion: from, UseSnapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	checkEvents := func(resp *streamv1.ReadStreamResponse, first uint64) {
		t.Helper()
		recs := recordtest.Records(t, resp.GetRecords())
		if uint64(len(recs)) != 5-first+1 || int(resp.GetCount()) != len(recs) {
			t.Fatalf("read from %d: %d records, count %d", first, len(recs), resp.GetCount())
		}
		for i, v := range recs {
			got, _ := v.AggregateVersion()
			if got != first+uint64(i) || string(v.Payload()) != fmt.Sprintf("e%d", got) || v.KeyString() != "agg-1" {
				t.Fatalf("record %d: version %d payload %q key %q", i, got, v.Payload(), v.KeyString())
			}
		}
	}
	checkEvents(read(1, true), 1)
	checkEvents(read(3, true), 3)

	_, err = sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}})
	wantCode(t, err, errcode.InvalidFromVersion)

	none, err := sc.ReadSnapshot(ctx(t), &streamv1.ReadSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}})
	if err != nil || none.GetSnapshot() != nil {
		t.Fatalf("snapshot before save %v %v", none, err)
	}
	_, err = sc.SaveSnapshot(ctx(t), &streamv1.SaveSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}, Version: 6, Payload: []byte("s")})
	wantCode(t, err, errcode.SnapshotVersionExceedsStream)
	if _, err := sc.SaveSnapshot(ctx(t), &streamv1.SaveSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}, Version: 3, Payload: []byte(`{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	withSnap := read(2, true)
	if withSnap.GetSnapshot().GetVersion() != 3 || string(withSnap.GetSnapshot().GetPayload()) != `{"n":3}` {
		t.Fatalf("snapshot in read %v", withSnap.GetSnapshot())
	}
	checkEvents(withSnap, 4)
	// A snapshot before from_version is not used.
	after := read(4, true)
	if after.GetSnapshot() != nil {
		t.Fatalf("snapshot below from_version was used")
	}
	checkEvents(after, 4)

	// Restart: the index is rebuilt from the log, the snapshot store
	// reopened.
	dir := c.dataDir
	md, ca := c.metad, c.ca
	c.stop()
	c = startCluster(t, ca, md, dir)
	c.waitServing(t, "orders", 0)
	sc = c.streams(t)
	ver, err = sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}})
	if err != nil || ver.GetVersion() != 5 {
		t.Fatalf("version after restart %v %v", ver, err)
	}
	snap, err := sc.ReadSnapshot(ctx(t), &streamv1.ReadSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "orders", Key: "agg-1"}})
	if err != nil || snap.GetSnapshot().GetVersion() != 3 {
		t.Fatalf("snapshot after restart %v %v", snap, err)
	}
	_, err = appendEvent(t, sc, "orders", "agg-1", 5, "dup")
	wantCode(t, err, errcode.VersionConflict)
	if _, err := appendEvent(t, sc, "orders", "agg-1", 6, "e6"); err != nil {
		t.Fatal(err)
	}
	c.stop()
}

// TestStreamConcurrentAppenders: 8 appenders race for every version of one
// aggregate on the leader's StreamService (streamtest.Race: one winner per
// version, losers see version_conflict, the versions read back dense with
// the winners' payloads).
func TestStreamConcurrentAppenders(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	defer c.stop()
	c.metad.PutTopic(esTopic("race"))
	c.waitServing(t, "race", 0)
	sc := c.streams(t)
	total := streamtest.Versions(t, 1000)
	appenders := make([]streamtest.Appender, 8)
	for a := range appenders {
		appenders[a] = func(v uint64, payload string) (uint64, error) {
			resp, err := appendEvent(t, sc, "race", "k", v, payload)
			return resp.GetVersion(), err
		}
	}
	res, err := streamtest.Race(total, appenders, func(from uint64) ([]streamtest.Event, error) {
		resp, err := sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "race", Key: "k"}, FromVersion: from})
		if err != nil {
			return nil, err
		}
		var evs []streamtest.Event
		for _, r := range recordtest.Records(t, resp.GetRecords()) {
			ver, _ := r.AggregateVersion()
			evs = append(evs, streamtest.Event{Version: ver, Payload: string(r.Payload())})
		}
		return evs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d appenders, %d versions: %d conflicts, %v (%.0f appends/s)", len(appenders), total, res.Conflicts,
		res.Elapsed.Round(time.Millisecond), float64(total)/res.Elapsed.Seconds())
}

// TestStreamHeadsSurviveRetentionAndRestart: retention removes every event
// of an aggregate and the partition server restarts; the index, rebuilt
// from the log, still knows the aggregate's version (the heads file), so
// versions stay monotonic.
func TestStreamHeadsSurviveRetentionAndRestart(t *testing.T) {
	c := startCluster(t, nil, nil, "", func(cfg *Config) { cfg.SegmentBytes = 4096 })
	tp := esTopic("brief")
	tp.Config.RetentionBytes = 1 // every closed segment below the HWM goes
	c.metad.PutTopic(tp)
	c.waitServing(t, "brief", 0)
	sc := c.streams(t)
	big := string(make([]byte, 1500))
	appendEvents(t, sc, "brief", "gone", 3, big)
	appendEvents(t, sc, "brief", "filler", 8, big)
	c.retain(t)
	version := func() uint64 {
		t.Helper()
		ver, err := sc.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "brief", Key: "gone"}})
		if err != nil {
			t.Fatal(err)
		}
		return ver.GetVersion()
	}
	if v := version(); v != 3 {
		t.Fatalf("version after retention = %d", v)
	}
	dir, md, ca := c.dataDir, c.metad, c.ca
	c.stop()
	c = startCluster(t, ca, md, dir, func(cfg *Config) { cfg.SegmentBytes = 4096 })
	defer c.stop()
	c.waitServing(t, "brief", 0)
	sc = c.streams(t)
	if v := version(); v != 3 {
		t.Fatalf("version after retention and a restart = %d, want 3", v)
	}
	_, err := appendEvent(t, sc, "brief", "gone", 1, "again")
	if e := wantCode(t, err, errcode.VersionConflict); e.Field("current") != "3" {
		t.Fatalf("conflict %v", e)
	}
	if _, err := appendEvent(t, sc, "brief", "gone", 4, "next"); err != nil {
		t.Fatal(err)
	}
	h, err := sc.ReadStream(ctx(t), &streamv1.ReadStreamRequest{Stream: &streamv1.StreamRef{Topic: "brief", Key: "gone"}, FromVersion: 1})
	if err != nil || h.GetCount() != 1 || h.GetFirstRetainedVersion() != 4 || h.GetHeadVersion() != 4 {
		t.Fatalf("read after the restart %v %v", h, err)
	}
}

// TestSnapshotCatchUpIsIncremental: a replica that missed the snapshot
// pushes (not in the ISR, or down) gets them from its leader's listing;
// after that the listing carries only what the leader saved since.
func TestSnapshotCatchUpIsIncremental(t *testing.T) {
	c1 := startCluster(t, nil, nil, "")
	defer c1.stop()
	tp := metadfake.NewTopic("snaps", 1, 1, "p1", "p1", "p2")
	tp.Config.EventSourcing = true
	c1.metad.PutTopic(tp)
	c1.waitServing(t, "snaps", 0)
	sc := c1.streams(t)
	for _, key := range []string{"a", "b"} {
		if _, err := appendEvent(t, sc, "snaps", key, 1, "e"); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.SaveSnapshot(ctx(t), &streamv1.SaveSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "snaps", Key: key},
			Version: 1, Payload: []byte("s-" + key)}); err != nil {
			t.Fatal(err)
		}
	}
	// The leader's listing: everything, then only what changed after a
	// sequence number of the same store, and everything again for another
	// store id.
	admin := streamv1.NewStreamServiceClient(c1.dial(t, pki.RoleAdmin, "a1"))
	all, err := admin.ListSnapshots(ctx(t), &streamv1.ListSnapshotsRequest{Topic: "snaps", LifecycleEpoch: 1})
	if err != nil || len(all.GetSnapshots()) != 2 || all.GetIncremental() || all.GetSeq() != 2 || all.GetStoreId() == 0 {
		t.Fatalf("full listing %v %v", all, err)
	}
	none, err := admin.ListSnapshots(ctx(t), &streamv1.ListSnapshotsRequest{Topic: "snaps", LifecycleEpoch: 1, StoreId: all.GetStoreId(), SinceSeq: 2})
	if err != nil || len(none.GetSnapshots()) != 0 || !none.GetIncremental() || none.GetSeq() != 2 {
		t.Fatalf("incremental listing %v %v", none, err)
	}
	other, err := admin.ListSnapshots(ctx(t), &streamv1.ListSnapshotsRequest{Topic: "snaps", LifecycleEpoch: 1, StoreId: all.GetStoreId() + 2, SinceSeq: 2})
	if err != nil || len(other.GetSnapshots()) != 2 || other.GetIncremental() {
		t.Fatalf("listing for another store %v %v", other, err)
	}

	// p2 starts after the saves: it catches up from p1.
	c2 := startNode(t, nil, "p2", c1.ca, c1.metad, "")
	defer c2.stop()
	st2 := func() *streamPart {
		t.Helper()
		st, err := c2.role.storage()
		if err != nil {
			t.Fatal(err)
		}
		p, err := st.Partition("snaps", 0)
		if err != nil {
			return nil
		}
		return c2.role.streamParts.get(p)
	}
	caughtUp := func(seq uint64, keys ...string) {
		t.Helper()
		looptest.Eventually(t, fmt.Sprintf("p2 caught up to %d", seq), func() bool {
			sp := st2()
			if sp == nil || sp.cursor().seq != seq || sp.cursor().storeID != all.GetStoreId() {
				return false
			}
			store, err := sp.snapshots()
			if err != nil {
				return false
			}
			for _, k := range keys {
				if sn, ok := store.Get(k); !ok || string(sn.Payload) != "s-"+k {
					return false
				}
			}
			return true
		})
	}
	caughtUp(2, "a", "b")
	if _, err := appendEvent(t, sc, "snaps", "c", 1, "e"); err != nil {
		t.Fatal(err)
	}
	// Pushed when p2 is in the ISR by now, else fetched: either way the
	// next listing moves the cursor by one change.
	_, err = sc.SaveSnapshot(ctx(t), &streamv1.SaveSnapshotRequest{Stream: &streamv1.StreamRef{Topic: "snaps", Key: "c"}, Version: 1, Payload: []byte("s-c")})
	if err != nil {
		t.Fatal(err)
	}
	caughtUp(3, "a", "b", "c")
}

// TestFollowerTakesRemovedStreamHeads: retention on the leader removed
// every event of an aggregate (its head lives only in the leader's heads
// file); a replica that joins afterwards replicates from the new log start
// and never runs that retention. The snapshot catch-up brings it the
// leader's removed heads, it keeps them in its own heads file, and once it
// leads the aggregate goes on from its head instead of restarting at 1.
func TestFollowerTakesRemovedStreamHeads(t *testing.T) {
	small := func(cfg *Config) { cfg.SegmentBytes = 4096 }
	c1 := startCluster(t, nil, nil, "", small)
	defer c1.stop()
	tp := metadfake.NewTopic("heads", 1, 1, "p1", "p1", "p2")
	tp.Config.EventSourcing = true
	tp.Config.RetentionBytes = 1
	c1.metad.PutTopic(tp)
	c1.waitServing(t, "heads", 0)
	sc := c1.streams(t)
	big := string(make([]byte, 1500))
	appendEvents(t, sc, "heads", "gone", 3, big)
	appendEvents(t, sc, "heads", "filler", 8, big)
	c1.retain(t)

	c2 := startNode(t, nil, "p2", c1.ca, c1.metad, "", small)
	defer c2.stop()
	// The catch-up runs every 3 s; the bound leaves room for a loaded machine.
	looptest.EventuallyWithin(t, 45*time.Second, "p2 knows the removed stream's head", func() bool {
		st2, err := c2.role.storage()
		if err != nil {
			return false
		}
		p, err := st2.Partition("heads", 0)
		if err != nil {
			return false
		}
		h, err := c2.role.streamParts.get(p).idx.Head(ctx(t), "gone", "")
		return err == nil && h == 3
	})
	found := false
	_ = filepath.WalkDir(c2.dataDir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == streams.HeadsFile {
			found = true
		}
		return nil
	})
	if !found {
		t.Fatalf("p2 kept no %s", streams.HeadsFile)
	}

	// p2 leads.
	top, _ := c1.metad.Topic("heads")
	for _, ps := range top.Partitions {
		ps.Leader, ps.LeaderEpoch, ps.Isr = "p2", ps.LeaderEpoch+1, []string{"p2"}
	}
	c1.metad.PutTopic(top)
	sc2 := c2.streams(t)
	looptest.EventuallyWithin(t, 45*time.Second, "p2 answers as the leader", func() bool {
		v, err := sc2.StreamVersion(ctx(t), &streamv1.StreamVersionRequest{Stream: &streamv1.StreamRef{Topic: "heads", Key: "gone"}})
		return err == nil && v.GetVersion() == 3
	})
	_, err := appendEvent(t, sc2, "heads", "gone", 1, "again")
	if e := wantCode(t, err, errcode.VersionConflict); e.Field("current") != "3" {
		t.Fatalf("conflict %v", e)
	}
	if _, err := appendEvent(t, sc2, "heads", "gone", 4, "next"); err != nil {
		t.Fatal(err)
	}
}
