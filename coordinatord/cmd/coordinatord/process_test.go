package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/proctest"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// startChild runs this test binary as the coordinatord binary with a fresh
// data directory.
func startChild(t *testing.T, ca *pkitest.PKI, metaAddr, rpcAddr string) *proctest.Proc {
	t.Helper()
	f := ca.Files(t, pki.RoleCoordinatord, "c1")
	return proctest.Start(t, proctest.Spec{Name: "coordinatord", Path: os.Args[0], Env: []string{childEnv + "=1"},
		Args: []string{"--node-id", "c1", "--data-dir", t.TempDir(), "--rpc-listen", rpcAddr,
			"--tls.ca", f.CA, "--tls.cert", f.Cert, "--tls.key", f.Key, "--metad-addrs", metaAddr,
			"--ops-host", "127.0.0.1", "--health-check-port", strconv.Itoa(looptest.FreePort(t)), "--enable-exporter=false",
			"--log.level", "warn", "--coordinatord.session-timeout", "60s"}})
}

// TestKill9DuringCommitsKeepsAcknowledgedOffsets commits continuously to
// four groups, kill -9s the coordinatord process mid-stream, restarts it
// and checks that every acknowledged commit survived the takeover and that
// no offset below one is ever answered.
func TestKill9DuringCommitsKeepsAcknowledgedOffsets(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	ca := pkitest.New(t)
	part := partitionfake.Start(t, ca, partitionfake.Options{})
	meta := metadfake.Start(t, ca, metadfake.Options{})
	meta.PutNode(&metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: part.Addr, Live: true})
	meta.PutTopic(metadfake.NewTopic("t", 1, 0, "p1", "p1"))
	rpcAddr := looptest.FreeAddr(t)
	child := startChild(t, ca, meta.Addr, rpcAddr)
	conn, err := rpc.Dial(rpcAddr, rpc.ClientOptions{Source: ca.Source(t, pki.RoleGateway, "g1"), ServerRoles: []pki.Role{pki.RoleCoordinatord}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := coordinatorv1.NewCoordinatorServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	join := func(g string) *coordinatorv1.JoinGroupResponse {
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			j, err := cl.JoinGroup(cctx, &coordinatorv1.JoinGroupRequest{Group: g, Member: "m", Topic: "t"})
			ccancel()
			if err == nil {
				return j
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Error("join never succeeded") // not Fatal: called from the committers
		return nil
	}
	groupsN := 4
	acked := make([]atomic.Uint64, groupsN)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range groupsN {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := fmt.Sprintf("k%d", i)
			j := join(g)
			if j == nil {
				return
			}
			for off := uint64(1); ; off++ {
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := cl.CommitOffset(cctx, &coordinatorv1.CommitOffsetRequest{Group: g, Topic: "t", Partition: 0, Offset: off,
					Member: j.GetMember(), Generation: &j.Generation})
				ccancel()
				if err != nil {
					return // the process died: the last ack stands
				}
				acked[i].Store(off)
			}
		}()
	}
	// Kill mid-stream once every group has commits acknowledged: waiting on
	// acknowledgements, not a fixed sleep, because the child (a -race test
	// binary) can take seconds to start on a loaded machine.
	for ready := false; !ready; {
		ready = true
		for i := range acked {
			ready = ready && acked[i].Load() >= 50
		}
		if ctx.Err() != nil || t.Failed() {
			t.Fatal("not every group got 50 commits acknowledged")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	child.Kill()
	close(stop)
	wg.Wait()
	for i := range acked {
		if acked[i].Load() == 0 {
			t.Fatalf("group k%d got no commit acknowledged before the kill", i)
		}
	}
	startChild(t, ca, meta.Addr, rpcAddr)
	total := uint64(0)
	for i := range groupsN {
		g := fmt.Sprintf("k%d", i)
		var got uint64
		for {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			fo, err := cl.FetchOffset(cctx, &coordinatorv1.FetchOffsetRequest{Group: g, Topic: "t", Partition: 0})
			ccancel()
			if err == nil {
				got = fo.GetOffset()
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no answer after restart: %v", err)
			}
			if e := errcode.From(err); !e.Retryable {
				t.Fatalf("after restart: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The commit in flight at the kill may or may not have landed.
		a := acked[i].Load()
		if got < a || got > a+1 {
			t.Fatalf("%s: offset %d after takeover, acknowledged %d", g, got, a)
		}
		total += a
	}
	t.Logf("acknowledged commits before kill -9: %d across %d groups; all present after takeover", total, groupsN)
}
