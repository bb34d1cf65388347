package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/proctest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// childEnv makes the test binary run partitiond's main instead of the tests,
// so the process test runs the binary's exact code path without a separate
// go build.
const childEnv = "STRATA_PARTITIOND_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(node.Main(partitiondBinary(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if code := node.Main(partitiondBinary(), []string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help exit %d: %s", code, out.String())
	}
	for _, want := range []string{"partitiond", "-partitiond.segment-bytes", "-metad-addrs", "-partitiond.fetch-max-wait"} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Fatalf("--help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestKill9KeepsAcknowledgedAppends appends with acks=1 to a partitiond
// process, kills it with SIGKILL mid-stream, restarts it on the same data
// directory and checks every acknowledged record reads back byte-identical
// at its offset with dense offsets; a last SIGTERM shuts down cleanly.
func TestKill9KeepsAcknowledgedAppends(t *testing.T) {
	ca := pkitest.New(t)
	md := metadfake.Start(t, ca, metadfake.Options{})
	md.PutTopic(metadfake.NewTopic("crash", 1, 1, "p1", "p1"))
	files := ca.Files(t, pki.RolePartitiond, "p1")
	addr, health := looptest.FreeAddr(t), looptest.FreeAddr(t)
	// This test binary is the partitiond binary (see TestMain).
	c := proctest.New(t, proctest.Spec{Name: "partitiond", Path: os.Args[0], Env: []string{childEnv + "=1"}, HealthAddr: health,
		Args: []string{"--node-id", "p1", "--data-dir", t.TempDir(), "--rpc-listen", addr, "--metad-addrs", md.Addr,
			"--tls.ca", files.CA, "--tls.cert", files.Cert, "--tls.key", files.Key,
			"--ops-host", "127.0.0.1", "--health-check-port", looptest.Port(health), "--enable-exporter=false",
			"--partitiond.segment-bytes", "65536", "--log.level", "warn"}})

	// A fresh connection per process: a dead server's connection sits in
	// reconnect backoff.
	dial := func() (partitionv1.PartitionServiceClient, func()) {
		conn, err := rpc.Dial(addr, rpc.ClientOptions{Source: ca.Source(t, pki.RoleGateway, "g1"), ServerRoles: []pki.Role{pki.RolePartitiond}})
		if err != nil {
			t.Fatal(err)
		}
		return partitionv1.NewPartitionServiceClient(conn), func() { conn.Close() }
	}

	acked := map[uint64][]byte{} // offset → record payload
	sent := map[string]bool{}    // every payload sent, acknowledged or not
	var mu sync.Mutex
	seq := 0
	for round := 0; round < 3; round++ {
		c.Start()
		c.WaitReady(20 * time.Second)
		client, closeConn := dial()
		// Four concurrent appenders; kill while they run.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					payload := []byte(fmt.Sprintf("round-%d-rec-%06d-%s", round, seq, bytes.Repeat([]byte{'x'}, seq%300)))
					sent[string(payload)] = true
					mu.Unlock()
					r := wire.Record{Topic: "crash", Payload: payload}
					b, _ := r.AppendTo(nil)
					set := recordtest.Append(nil, b)
					cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
					resp, err := client.Append(cctx, &partitionv1.AppendRequest{Topic: "crash", Partition: 0, LifecycleEpoch: 1, Acks: 1, Records: set, RecordCount: 1})
					ccancel()
					if err != nil {
						continue
					}
					mu.Lock()
					acked[resp.GetBaseOffset()] = payload
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(150+round*70) * time.Millisecond)
		c.Kill()
		time.Sleep(50 * time.Millisecond)
		cancel()
		wg.Wait()
		closeConn()
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	if n < 10 {
		t.Fatalf("only %d appends acknowledged before the kills", n)
	}

	c.Start()
	c.WaitReady(20 * time.Second)
	client, closeConn := dial()
	defer closeConn()
	var from uint64
	var got [][]byte
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := client.Fetch(cctx, &partitionv1.FetchRequest{Topic: "crash", Partition: 0, Offset: from})
		ccancel()
		if err != nil {
			t.Fatalf("fetch %d: %v\n%s", from, err, c.LogTail(4000))
		}
		for _, v := range recordtest.Records(t, resp.GetRecords()) {
			if v.Offset() != uint64(len(got)) {
				t.Fatalf("offset %d at position %d: offsets not dense", v.Offset(), len(got))
			}
			got = append(got, append([]byte(nil), v.Payload()...))
		}
		if resp.GetNextOffset() == from {
			break
		}
		from = resp.GetNextOffset()
	}
	// Unacknowledged appends may or may not be there, but only whole and
	// as sent: every stored record is one the clients sent, once.
	seen := map[string]bool{}
	for off, p := range got {
		if !sent[string(p)] || seen[string(p)] {
			t.Fatalf("offset %d holds a record that was not sent, or a second copy: %q", off, p)
		}
		seen[string(p)] = true
	}
	for off, p := range acked {
		if off >= uint64(len(got)) {
			t.Fatalf("acknowledged offset %d lost (log holds %d records)", off, len(got))
		}
		if !bytes.Equal(got[off], p) {
			t.Fatalf("offset %d reads %q, acknowledged %q", off, got[off], p)
		}
	}
	t.Logf("%d acknowledged of %d stored records survived 3 kill -9 cycles", n, len(got))

	if err := c.Stop(30 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, c.LogTail(4000))
	}
}
