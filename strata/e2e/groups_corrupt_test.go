package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// TestCorruptOffsetsRecordKeepsAllInOneNotReady: an unversioned record in
// __consumer_offsets (written here straight to partitiond with the
// coordinator's certificate, as a buggy or foreign writer would) stops the
// replay after a restart. The laptop's /ready then stays 503 with
// consumer_metadata naming the corruption, and the group's commands answer
// coordinator_not_available reason=corrupt instead of serving an empty or
// partial state (spec 7).
func TestCorruptOffsetsRecordKeepsAllInOneNotReady(t *testing.T) {
	dir := t.TempDir()
	srv, stop := runAllInOne(t, dir)
	waitReady(t, "http://"+srv.HealthAddr()+"/ready", 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := dial(t, ctx, srv.ClientAddr())
	const topic, group = "corrupt-t", "corrupt-g"
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	var j client.JoinResult
	retry(t, ctx, func() (err error) {
		j, err = cl.JoinGroup(ctx, group, "m", topic)
		return err
	})
	if err := cl.CommitOffset(ctx, topic, 0, group, 7, j.Member, j.Generation); err != nil {
		t.Fatal(err)
	}

	// Append the bad record to the group's offsets partition.
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

	stop()
	srv, _ = runAllInOne(t, dir)
	ready := "http://" + srv.HealthAddr() + "/ready"
	var checks map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Checks map[string]string `json:"checks"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("/ready 200 over a corrupt offsets partition: %v", body.Checks)
		}
		checks = body.Checks
		if strings.Contains(checks["consumer_metadata"], "unversioned_record") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := checks["consumer_metadata"]; !strings.Contains(c, "corrupt") || !strings.Contains(c, "unversioned_record") {
		t.Fatalf("consumer_metadata check: %q (all: %v)", c, checks)
	}
	cl2 := dial(t, ctx, srv.ClientAddr())
	_, err = cl2.FetchOffset(ctx, topic, 0, group)
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
