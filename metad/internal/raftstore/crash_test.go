package raftstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// TestCrashKeepsEverySyncedEntry simulates power loss on pebble's crashable
// in-memory FS while a writer appends (and now and then compacts) the log:
// the crash image keeps everything synced and a random share of what was
// not. After reopening, every entry whose StoreLogs returned before the
// crash must read back identical, the log must be one dense range, and no
// read may return a corrupt or foreign entry.
func TestCrashKeepsEverySyncedEntry(t *testing.T) {
	rounds := 30
	if testing.Short() {
		rounds = 8
	}
	for round := range rounds {
		for _, pct := range []int{0, 50, 100} {
			t.Run(fmt.Sprintf("round=%d/unsynced=%d%%", round, pct), func(t *testing.T) {
				crashRound(t, uint64(round), pct)
			})
		}
	}
}

func crashRound(t *testing.T, seed uint64, unsyncedPct int) {
	rng := rand.New(rand.NewPCG(seed, uint64(unsyncedPct)))
	fs := vfs.NewCrashableMem()
	s := openMem(t, fs)

	// Some history before the crash window, including a compaction, so the
	// image holds range tombstones and more than one WAL.
	appendN(t, s, 1, 200)
	if err := s.DeleteRange(1, 50); err != nil {
		t.Fatal(err)
	}

	var acked atomic.Uint64     // highest index whose StoreLogs returned nil
	var compacted atomic.Uint64 // highest index a returned DeleteRange removed
	acked.Store(200)
	compacted.Store(50)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := uint64(201)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n := 1 + int(next%7)
			if err := s.StoreLogs(testLogs(next, n, 1+next/100)); err != nil {
				t.Errorf("StoreLogs: %v", err)
				return
			}
			next += uint64(n)
			acked.Store(next - 1)
			if next%13 == 0 {
				c := compacted.Load() + 10
				if err := s.DeleteRange(c-9, c); err != nil {
					t.Errorf("DeleteRange: %v", err)
					return
				}
				compacted.Store(c)
			}
		}
	}()

	// Crash at a random moment while the writer is mid-flight. The bounds
	// read before the clone are a lower bound of what must survive; the
	// clone happens while further writes may be half done.
	for range 1 + rng.IntN(40) {
		var l raft.Log
		_ = s.GetLog(acked.Load(), &l)
	}
	mustHave := acked.Load()
	mayHaveCompacted := compacted.Load()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsyncedPct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 1))})
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := Open("raft", WithFS(crashed))
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer r.Close()
	first, _ := r.FirstIndex()
	last, _ := r.LastIndex()
	if last < mustHave {
		t.Fatalf("last index %d after crash, but %d was acknowledged", last, mustHave)
	}
	// A compaction acknowledged before the clone is durable; one in flight
	// may or may not be.
	if first < mayHaveCompacted+1 {
		t.Fatalf("first index %d after crash, but compaction through %d was acknowledged", first, mayHaveCompacted)
	}
	for idx := first; idx <= last; idx++ {
		var got raft.Log
		if err := r.GetLog(idx, &got); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("hole at %d inside %d..%d after crash", idx, first, last)
			}
			t.Fatalf("GetLog(%d) after crash: %v", idx, err)
		}
		if want := testLog(idx, got.Term); !sameLog(&got, want) {
			t.Fatalf("GetLog(%d) after crash = %+v, want %+v", idx, got, *want)
		}
		if idx <= 200 && got.Term != 1 {
			t.Fatalf("GetLog(%d) after crash has term %d, want 1", idx, got.Term)
		}
	}
}

func appendN(t *testing.T, s *Store, from, to uint64) {
	t.Helper()
	for i := from; i <= to; i += 10 {
		if err := s.StoreLogs(testLogs(i, int(min(10, to-i+1)), 1)); err != nil {
			t.Fatal(err)
		}
	}
}
