package partition

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/proctest"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// The kill -9 test re-executes the test binary as a child that appends to a
// partition on the real disk with acks=1 and reports every acknowledgement
// on stdout; the parent SIGKILLs it at a random moment and checks the log.
const (
	crashChildEnv  = "STRATA_PARTITIOND_CRASH_CHILD"
	crashIterEnv   = "STRATA_PARTITIOND_CRASH_ITER"
	crashTopic     = "crash"
	crashProducers = 4
)

// crashPayload is record i of batch id (n records): self-describing, so the
// parent can regenerate any record it finds.
func crashPayload(id uint64, i, n int) []byte {
	size := 24 + int((id*31+uint64(i)*17)%290)
	p := make([]byte, size)
	h := fmt.Sprintf("b=%d i=%d n=%d ", id, i, n)
	copy(p, h)
	for j := len(h); j < size; j++ {
		p[j] = byte(id) ^ byte(i*7+j)
	}
	return p
}

func crashRecord(off uint64, id uint64, i, n int) []byte {
	r := wire.Record{Topic: crashTopic, Partition: 0, Offset: off, Payload: crashPayload(id, i, n)}
	b, err := r.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	return b
}

func crashNodeConfig(dir string) NodeConfig {
	return NodeConfig{Dir: dir, FS: vfs.Default,
		Defaults: Defaults{SegmentBytes: 64 << 10, IndexInterval: 1024, CheckpointBytes: 16 << 10,
			SegmentPreallocate: 16 << 10}} // fallocate steps: kills land inside preallocated space
}

// crashChild is the child's main: append until killed.
func crashChild() int {
	dir := os.Getenv(crashChildEnv)
	iter, _ := strconv.ParseUint(os.Getenv(crashIterEnv), 10, 64)
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	n, err := Open(context.Background(), crashNodeConfig(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: crashTopic, Partition: 0})
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		return 2
	}
	say("READY")
	var wg sync.WaitGroup
	for g := range crashProducers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := uint64(0); ; k++ {
				id := iter<<32 | uint64(g)<<24 | k
				cnt := 1 + int(id%19)
				var set []byte
				for i := range cnt {
					set = recordtest.Append(set, crashRecord(0, id, i, cnt))
				}
				res, err := p.Append(context.Background(), &AppendRequest{Acks: AcksLeader, Records: set, RecordCount: uint32(cnt)})
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					return
				}
				say("ACK %d %d %d", res.BaseOffset, id, cnt)
				if g == 0 && k%50 == 49 {
					n.Maintain(context.Background())
				}
			}
		}()
	}
	wg.Wait()
	return 3
}

type ackedBatch struct {
	base uint64
	id   uint64
	n    int
}

func TestKillNineAckedAppendsSurvive(t *testing.T) {
	t.Parallel()
	iterations := 50
	if testing.Short() {
		iterations = 10
	}
	if os.Getenv("STRATA_LONG") != "" {
		iterations = 300
	}
	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "crash-child.log") // stderr of every child
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var acked []ackedBatch
	var verified crashVerified
	kills, midStartup, killedWhileAppending := 0, 0, 0
	start := time.Now()
	for iter := range iterations {
		child := proctest.Start(t, proctest.Spec{Name: "crash-child", Path: os.Args[0], LogPath: logPath, Lines: true,
			Env: []string{crashChildEnv + "=" + dir, crashIterEnv + "=" + strconv.Itoa(iter+1)}})
		lines := child.Lines()
		var got []ackedBatch
		// One kill in ten lands during startup or recovery, the rest while
		// appends are in flight.
		early := rng.IntN(10) == 0
		delay := time.Duration(rng.IntN(120_000)) * time.Microsecond
		var timer <-chan time.Time
		if early {
			timer = time.After(time.Duration(rng.IntN(40_000)) * time.Microsecond)
			midStartup++
		}
	wait:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				if l == "READY" && timer == nil {
					timer = time.After(delay)
					continue
				}
				if b, ok := parseAck(l); ok {
					got = append(got, b)
				}
			case <-timer:
				break wait
			}
		}
		child.Kill()
		for l := range lines { // drain what the child wrote before dying
			if b, ok := parseAck(l); ok {
				got = append(got, b)
			}
		}
		if ws, ok := child.ExitState().Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("iteration %d: child ended on its own (%v): %s", iter, child.ExitState(), child.Log())
		}
		kills++
		if len(got) > 0 {
			killedWhileAppending++
		}
		acked = append(acked, got...)
		verifyCrashLog(t, dir, acked, got, &verified)
	}
	// A last pass from scratch: every acknowledged batch ever, in full.
	verifyCrashLog(t, dir, acked, acked, &crashVerified{})
	// Many kills must land while appends are acknowledged, or the test
	// only exercises startup (a loose bound: on a loaded machine the first
	// acknowledgement can come later than a short random delay).
	if killedWhileAppending < iterations/4 {
		t.Fatalf("only %d of %d kills happened after acknowledged appends", killedWhileAppending, iterations)
	}
	total := 0
	for _, b := range acked {
		total += b.n
	}
	t.Logf("kill -9: %d kills (%d during startup, %d after acknowledged appends), %d acked batches, %d acked records, 0 lost, in %v",
		kills, midStartup, killedWhileAppending, len(acked), total, time.Since(start).Round(time.Millisecond))
}

func parseAck(l string) (ackedBatch, bool) {
	f := strings.Fields(l)
	if len(f) != 4 || f[0] != "ACK" {
		return ackedBatch{}, false
	}
	base, e1 := strconv.ParseUint(f[1], 10, 64)
	id, e2 := strconv.ParseUint(f[2], 10, 64)
	n, e3 := strconv.Atoi(f[3])
	return ackedBatch{base: base, id: id, n: n}, e1 == nil && e2 == nil && e3 == nil
}

// crashVerified is what earlier verifications established: the record set
// bytes of offsets [0, end), each record checked once as part of a whole,
// byte-identical batch, every acknowledged batch among them included.
type crashVerified struct {
	end uint64
	raw []byte
}

// readRaw returns the record set bytes of offsets [from, to).
func readRaw(t *testing.T, p *Partition, from, to uint64) []byte {
	t.Helper()
	var raw []byte
	for next := from; next < to; {
		r, err := p.Fetch(context.Background(), &FetchRequest{Offset: next, MaxRecords: int(min(to-next, 1<<16)), MaxBytes: 4 << 20})
		if err != nil {
			t.Fatalf("fetch %d: %v", next, err)
		}
		if r.RecordCount == 0 {
			t.Fatalf("fetch at %d below %d returned nothing", next, to)
		}
		raw = append(raw, r.Records...)
		next = r.NextOffset
	}
	return raw
}

// verifyCrashLog opens the node in this process after a kill and checks
// every acknowledged offset: the offsets verified after earlier kills read
// back byte for byte as then (so every batch acknowledged before is still
// there and identical); the records since are dense, each part of a whole
// batch the child sent (nothing half visible), byte-identical to it, and
// every batch acknowledged since (fresh) is among them. It extends v.
func verifyCrashLog(t *testing.T, dir string, acked, fresh []ackedBatch, v *crashVerified) {
	t.Helper()
	n, err := Open(context.Background(), crashNodeConfig(dir))
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer n.Close()
	p, err := n.Partition(crashTopic, 0)
	if err != nil {
		if len(acked) > 0 {
			t.Fatalf("partition with %d acknowledged batches missing after recovery: %v", len(acked), err)
		}
		return // killed before the first create became durable
	}
	off, _ := p.ListOffsets()
	if off.Earliest != 0 || off.LEO != off.HWM || off.LEO < v.end {
		t.Fatalf("offsets after recovery %+v, %d verified before", off, v.end)
	}
	if old := readRaw(t, p, 0, v.end); !bytes.Equal(old, v.raw) {
		t.Fatalf("the %d offsets verified after earlier kills changed", v.end)
	}
	raw := readRaw(t, p, v.end, off.LEO)
	records := map[uint64][]byte{}
	for j, rv := range recordtest.Records(t, raw) {
		next := v.end + uint64(j)
		if rv.Offset() != next {
			t.Fatalf("offsets not dense: got %d, want %d", rv.Offset(), next)
		}
		records[next] = rv.Bytes()
	}
	if uint64(len(records)) != off.LEO-v.end {
		t.Fatalf("read %d records from %d, log end %d", len(records), v.end, off.LEO)
	}
	// Every record belongs to a whole, byte-identical batch; v.end is a
	// batch boundary (the log end after a recovery).
	for o := v.end; o < off.LEO; {
		var id uint64
		var i, cnt int
		rv, _ := wire.ParseRecord(records[o])
		if _, err := fmt.Sscanf(string(rv.Payload()), "b=%d i=%d n=%d ", &id, &i, &cnt); err != nil || i != 0 {
			t.Fatalf("record %d does not start a batch (%q)", o, rv.Payload()[:20])
		}
		for k := range cnt {
			got, ok := records[o+uint64(k)]
			if !ok || !bytes.Equal(got, crashRecord(o+uint64(k), id, k, cnt)) {
				t.Fatalf("batch %d at %d is not whole and identical (record %d)", id, o, k)
			}
		}
		o += uint64(cnt)
	}
	// Every batch acknowledged since the last verification is there.
	for _, b := range fresh {
		if b.base < v.end || b.base+uint64(b.n) > off.LEO {
			t.Fatalf("acked batch %d at %d..%d lost or misplaced (verified up to %d, log end %d)",
				b.id, b.base, b.base+uint64(b.n)-1, v.end, off.LEO)
		}
		for k := range b.n {
			o := b.base + uint64(k)
			if !bytes.Equal(records[o], crashRecord(o, b.id, k, b.n)) {
				t.Fatalf("acked offset %d differs from what was acknowledged", o)
			}
		}
	}
	v.raw = append(v.raw, raw...)
	v.end = off.LEO
}
