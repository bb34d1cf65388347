package partition

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/record"
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
		Defaults: Defaults{SegmentBytes: 64 << 10, IndexInterval: 1024, CheckpointBytes: 16 << 10}}
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
					rec := crashRecord(0, id, i, cnt)
					set = binary.BigEndian.AppendUint32(set, uint32(len(rec)))
					set = append(set, rec...)
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
	iterations := 50
	if testing.Short() {
		iterations = 10
	}
	if os.Getenv("STRATA_LONG") != "" {
		iterations = 300
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var acked []ackedBatch
	verified := uint64(0) // offsets below were fully checked once
	kills, midStartup := 0, 0
	start := time.Now()
	for iter := range iterations {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashIterEnv+"="+strconv.Itoa(iter+1))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
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
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for l := range lines { // drain what the child wrote before dying
			if b, ok := parseAck(l); ok {
				got = append(got, b)
			}
		}
		<-readDone
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("iteration %d: child ended on its own (%v): %s", iter, werr, stderr.String())
		}
		kills++
		acked = append(acked, got...)
		verified = verifyCrashLog(t, dir, acked, verified, rng, false)
	}
	verifyCrashLog(t, dir, acked, 0, rng, true)
	total := 0
	for _, b := range acked {
		total += b.n
	}
	t.Logf("kill -9: %d kills (%d during startup), %d acked batches, %d acked records, 0 lost, in %v",
		kills, midStartup, len(acked), total, time.Since(start).Round(time.Millisecond))
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

// verifyCrashLog opens the node in this process and checks: offsets are
// dense from 0; every record is a whole batch the child sent (nothing half
// visible) and byte-identical to it; every acknowledged batch is present.
// Records from `from` on are read; older acked batches are sampled unless
// full is set. It returns the new log end.
func verifyCrashLog(t *testing.T, dir string, acked []ackedBatch, from uint64, rng *rand.Rand, full bool) uint64 {
	t.Helper()
	n, err := Open(context.Background(), crashNodeConfig(dir))
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer n.Close()
	p, err := n.Partition(crashTopic, 0)
	if err != nil {
		return 0 // killed before the first create became durable
	}
	off, _ := p.ListOffsets()
	if off.Earliest != 0 || off.LEO != off.HWM {
		t.Fatalf("offsets after recovery %+v", off)
	}
	if full {
		from = 0
	}
	// Start reading at a batch boundary at or below from.
	startAt := uint64(0)
	for _, b := range acked {
		if b.base <= from && b.base > startAt {
			startAt = b.base
		}
	}
	records := map[uint64][]byte{}
	next := startAt
	for next < off.LEO {
		r, err := p.Fetch(context.Background(), &FetchRequest{Offset: next, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		set := r.Records
		for len(set) > 0 {
			rb, rest, ok, _ := record.Next(set)
			if !ok {
				t.Fatal("malformed record set")
			}
			v, err := wire.ParseRecord(rb)
			if err != nil {
				t.Fatal(err)
			}
			if v.Offset() != next {
				t.Fatalf("offsets not dense: got %d, want %d", v.Offset(), next)
			}
			records[next] = rb
			next++
			set = rest
		}
		if r.RecordCount == 0 {
			t.Fatalf("fetch at %d below the end %d returned nothing", next, off.LEO)
		}
	}
	// Every record belongs to a whole, byte-identical batch. Batches may
	// straddle startAt only at its start, which is a batch boundary.
	for o := startAt; o < off.LEO; {
		var id uint64
		var i, cnt int
		v, _ := wire.ParseRecord(records[o])
		if _, err := fmt.Sscanf(string(v.Payload()), "b=%d i=%d n=%d ", &id, &i, &cnt); err != nil || i != 0 {
			t.Fatalf("record %d does not start a batch (%q)", o, v.Payload()[:20])
		}
		for k := range cnt {
			got, ok := records[o+uint64(k)]
			if !ok || !bytes.Equal(got, crashRecord(o+uint64(k), id, k, cnt)) {
				t.Fatalf("batch %d at %d is not whole and identical (record %d)", id, o, k)
			}
		}
		o += uint64(cnt)
	}
	// Every acknowledged batch is there: new ones in full, old ones sampled.
	check := func(b ackedBatch) {
		if b.base+uint64(b.n) > off.LEO {
			t.Fatalf("acked batch %d at %d..%d lost (log end %d)", b.id, b.base, b.base+uint64(b.n)-1, off.LEO)
		}
		if _, ok := records[b.base]; !ok {
			r, err := p.Fetch(context.Background(), &FetchRequest{Offset: b.base, MaxRecords: b.n})
			if err != nil || r.RecordCount != b.n {
				t.Fatalf("acked batch at %d unreadable: %v", b.base, err)
			}
			set := r.Records
			for k := range b.n {
				records[b.base+uint64(k)], set, _, _ = record.Next(set)
			}
		}
		for k := range b.n {
			o := b.base + uint64(k)
			if !bytes.Equal(records[o], crashRecord(o, b.id, k, b.n)) {
				t.Fatalf("acked offset %d differs from what was acknowledged", o)
			}
		}
	}
	for _, b := range acked {
		if b.base >= startAt || full || rng.IntN(50) == 0 {
			check(b)
		}
	}
	return off.LEO
}
