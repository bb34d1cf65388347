package faults

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
)

// TestCorruptOffsetsRecordKeepsAllInOneNotReady: an unversioned record in
// __consumer_offsets (written here straight to partitiond with the
// coordinator's certificate, as a buggy or foreign writer would) stops the
// replay after a restart. The laptop's /ready then stays 503 with
// consumer_metadata naming the corruption, and the group's commands answer
// coordinator_not_available reason=corrupt instead of serving an empty or
// partial state (spec 7).
func TestCorruptOffsetsRecordKeepsAllInOneNotReady(t *testing.T) {
	a := framework.StartAllInOne(t)
	srv := a.Server()
	ctx, cl := framework.Connect(t, a, 2*time.Minute)
	const topic, group = "corrupt-t", "corrupt-g"
	commitOneOffset(t, ctx, cl, topic, group, 7)

	corruptOffsets(t, ctx, a, group)

	// Restart on the same data, without waiting for /ready: it must not come.
	a.Stop()
	a.Start()
	srv = a.Server()
	waitConsumerMetadataCorrupt(t, srv.HealthAddr())
	ready := "http://" + srv.HealthAddr() + "/ready"
	cl2 := framework.Dial(t, ctx, srv.ClientAddr())
	_, err := cl2.FetchOffset(ctx, topic, 0, group)
	if e := errcode.From(err); e.Code != errcode.CoordinatorNotAvailable.Name() || e.Field("reason") != "corrupt" || !e.Retryable {
		t.Fatalf("FETCH_OFFSET of a group on the corrupt partition: %v", err)
	}
	// It stays so: a corrupt partition is never served from an empty state.
	time.Sleep(time.Second)
	if resp, err := http.Get(ready); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/ready later: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// corruptOffsets appends an unversioned record to group's
// __consumer_offsets partition, straight to partitiond with the
// coordinator's certificate, as a buggy or foreign writer would.
func corruptOffsets(t *testing.T, ctx context.Context, a *framework.AllInOne, group string) {
	t.Helper()
	srv, dir := a.Server(), a.DataDir()
	id := pki.Identity{Role: pki.RoleCoordinatord, NodeID: "local-coordinatord"}
	files, err := pki.EnsureLocal(filepath.Join(dir, "certs"), []pki.Identity{id})
	if err != nil {
		t.Fatal(err)
	}
	src, err := pki.NewSource(files[id])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := rpc.Dial(srv.RPCAddr(pki.RolePartitiond), rpc.ClientOptions{Source: src, ServerRoles: []pki.Role{pki.RolePartitiond}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := groups.Partition(group, groups.DefaultOffsetsPartitions)
	rec := wire.Record{Topic: groups.OffsetsTopic, Partition: p, Key: `group/"` + group + `"`,
		Payload: []byte(`{"type":"group","group":"` + group + `"}`)}
	set := binary.BigEndian.AppendUint32(nil, 0)
	if set, err = rec.AppendTo(set); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(set, uint32(len(set)-4))
	if _, err := partitionv1.NewPartitionServiceClient(conn).Append(ctx, &partitionv1.AppendRequest{Topic: groups.OffsetsTopic,
		Partition: p, Acks: -1, Records: set, RecordCount: 1}); err != nil {
		t.Fatal(err)
	}

}

// waitConsumerMetadataCorrupt polls /ready (60 s at most) until the
// consumer_metadata check names the unversioned record, failing on a 200;
// it returns the last checks.
func waitConsumerMetadataCorrupt(t *testing.T, healthAddr string) map[string]string {
	t.Helper()
	var checks map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, got := looptest.ReadyChecks(t, healthAddr)
		if code == http.StatusOK {
			t.Fatalf("/ready 200 over a corrupt offsets partition: %v", got)
		}
		checks = got
		if strings.Contains(checks["consumer_metadata"], "unversioned_record") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := checks["consumer_metadata"]; !strings.Contains(c, "corrupt") || !strings.Contains(c, "unversioned_record") {
		t.Fatalf("consumer_metadata check: %q (all: %v)", c, checks)
	}
	return checks
}

// commitOneOffset creates a one-partition topic and commits offset on it
// for a member of group.
func commitOneOffset(t *testing.T, ctx context.Context, cl *client.Client, topic, group string, offset uint64) {
	t.Helper()
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var j client.JoinResult
	framework.Retry(t, ctx, func() (err error) {
		j, err = cl.JoinGroup(ctx, group, "m", topic)
		return err
	})
	if err := cl.CommitOffset(ctx, topic, 0, group, offset, j.Member, j.Generation); err != nil {
		t.Fatal(err)
	}
}

// TestDiagnosticsOnlyModeOverCorruptOffsets: restarted with
// gateway.diagnostics_only over a corrupt offsets partition, the all-in-one
// serves health and metrics, /ready reports the retained consumer_metadata
// failure (and diagnostics_only), /live passes, and the client listener is
// never opened (spec 4.1).
func TestDiagnosticsOnlyModeOverCorruptOffsets(t *testing.T) {
	a := framework.StartAllInOne(t)
	ctx, cl := framework.Connect(t, a, 2*time.Minute)
	const topic, group = "diag-t", "diag-g"
	commitOneOffset(t, ctx, cl, topic, group, 3)
	clientAddr := a.Server().ClientAddr()
	corruptOffsets(t, ctx, a, group)
	a.Stop()
	// The same client port as before: it must stay closed.
	a.Configure(func(c *allinone.Config) {
		c.Gateway.DiagnosticsOnly = true
		c.Gateway.ClientListen = clientAddr
	})
	a.Start()
	srv := a.Server()
	checks := waitConsumerMetadataCorrupt(t, srv.HealthAddr())
	if !strings.Contains(checks["diagnostics_only"], "client listener is not opened") {
		t.Fatalf("diagnostics_only check: %v", checks)
	}
	if srv.ClientAddr() != "" {
		t.Fatalf("client listener bound at %s", srv.ClientAddr())
	}
	if nc, err := net.DialTimeout("tcp", clientAddr, time.Second); err == nil {
		nc.Close()
		t.Fatalf("%s accepts connections in diagnostics-only mode", clientAddr)
	}
	for _, u := range []string{"http://" + srv.HealthAddr() + "/live", "http://" + srv.MetricsAddr() + "/metrics"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", u, resp.StatusCode)
		}
		if strings.HasSuffix(u, "/metrics") {
			// Spec 6: recovery_ready stays 0 in diagnostics-only mode
			// (the replay phase; the metadata phase did complete).
			var series []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(line, "strata_consumer_metadata_recovery_ready") {
					series = append(series, line)
				}
			}
			if !slices.Contains(series, `strata_consumer_metadata_recovery_ready{phase="replay"} 0`) {
				t.Fatalf("strata_consumer_metadata_recovery_ready: %q", series)
			}
		}
	}
}
