package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/metad/internal/raftstore/logcodec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testLog builds a deterministic entry for index, so a reader can check an
// entry against what was written without keeping a copy.
func testLog(index, term uint64) *raft.Log {
	n := int(index%97) + 1
	data := bytes.Repeat([]byte(fmt.Sprintf("%d:", index)), n)
	l := &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data}
	if index%3 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if index%5 != 0 {
		l.AppendedAt = time.Unix(1_700_000_000+int64(index), int64(index%1e9))
	}
	if index%11 == 0 {
		l.Type = raft.LogNoop
		l.Data = nil
	}
	return l
}

// testLogs is the run of n testLog entries from index first, all of term.
func testLogs(first uint64, n int, term uint64) []*raft.Log {
	batch := make([]*raft.Log, n)
	for i := range batch {
		batch[i] = testLog(first+uint64(i), term)
	}
	return batch
}

func openMem(t testing.TB, fs vfs.FS) *Store {
	t.Helper()
	s, err := Open("raft", WithFS(fs))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func sameLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt)
}

func mustBounds(t *testing.T, s raft.LogStore, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("bounds = %d..%d, want %d..%d", f, l, first, last)
	}
}

func TestEmptyStoreHasZeroBoundsAndNoLogs(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	mustBounds(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store = %v, want ErrLogNotFound", err)
	}
}

func TestStoreLogsRoundTripsEveryField(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	var batch []*raft.Log
	for i := uint64(1); i <= 40; i++ {
		batch = append(batch, testLog(i, 1+i/10))
	}
	if err := s.StoreLogs(batch); err != nil {
		t.Fatal(err)
	}
	mustBounds(t, s, 1, 40)
	for _, want := range batch {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		if !sameLog(&got, want) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, *want)
		}
	}
	var l raft.Log
	if err := s.GetLog(41, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end = %v, want ErrLogNotFound", err)
	}
}

func TestStoreLogsRejectsBadBatches(t *testing.T) {
	cases := []struct {
		name string
		logs []*raft.Log
	}{
		{"index zero", []*raft.Log{testLog(0, 1)}},
		{"decreasing", []*raft.Log{testLog(5, 1), testLog(4, 1)}},
		{"duplicate", []*raft.Log{testLog(5, 1), testLog(5, 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openMem(t, vfs.NewMem())
			defer s.Close()
			err := s.StoreLogs(tc.logs)
			if !errors.Is(err, errcode.InvalidParameter) {
				t.Fatalf("StoreLogs = %v, want invalid_parameter", err)
			}
			mustBounds(t, s, 0, 0) // nothing half-written
		})
	}
}

func TestDeleteRangeIsInclusiveAndMovesBounds(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	for i := uint64(1); i <= 20; i++ {
		if err := s.StoreLog(testLog(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRange(1, 5); err != nil { // prefix (compaction)
		t.Fatal(err)
	}
	mustBounds(t, s, 6, 20)
	if err := s.DeleteRange(15, 20); err != nil { // suffix (conflict)
		t.Fatal(err)
	}
	mustBounds(t, s, 6, 14)
	var l raft.Log
	for _, idx := range []uint64{5, 15} {
		if err := s.GetLog(idx, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) after delete = %v", idx, err)
		}
	}
	for _, idx := range []uint64{6, 14} {
		if err := s.GetLog(idx, &l); err != nil {
			t.Fatalf("GetLog(%d) survived neighbour = %v", idx, err)
		}
	}
	if err := s.DeleteRange(0, ^uint64(0)); err != nil { // everything, max+1 overflow
		t.Fatal(err)
	}
	mustBounds(t, s, 0, 0)
	if err := s.StoreLog(testLog(1000, 3)); err != nil { // after a snapshot install
		t.Fatal(err)
	}
	mustBounds(t, s, 1000, 1000)
}

func TestDeleteRangeAcrossAGapLandsOnStoredEntries(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	for _, i := range []uint64{1, 2, 3, 10, 11, 12} {
		if err := s.StoreLog(testLog(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	mustBounds(t, s, 10, 12)
	if err := s.DeleteRange(11, 40); err != nil {
		t.Fatal(err)
	}
	mustBounds(t, s, 10, 10)
	if err := s.DeleteRange(100, 200); err != nil { // outside: no-op
		t.Fatal(err)
	}
	mustBounds(t, s, 10, 10)
}

func TestBoundsSurviveReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs)
	for i := uint64(1); i <= 30; i++ {
		if err := s.StoreLog(testLog(i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRange(1, 7); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs)
	defer s.Close()
	mustBounds(t, s, 8, 30)
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("GetUint64 after reopen = %d, %v", v, err)
	}
}

func TestStableStoreMissingKeyIsRaftsNotFound(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	if _, err := s.Get([]byte("x")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get missing = %v, want \"not found\" (raft matches the text)", err)
	}
	if _, err := s.GetUint64([]byte("x")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 missing = %v, want \"not found\"", err)
	}
	if err := s.Set([]byte("x"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("x"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("x")); err != nil || string(v) != "v2" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("empty")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get of an empty value = %q, %v; want empty, nil", v, err)
	}
	// Stable keys and log keys never collide: a key that looks like a log key
	// stays in the stable keyspace.
	if err := s.Set(logKey(1), []byte("stable")); err != nil {
		t.Fatal(err)
	}
	mustBounds(t, s, 0, 0)
}

func TestGetUint64RejectsAWrongSizedValue(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	if err := s.Set([]byte("k"), []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUint64([]byte("k")); !errors.Is(err, errcode.StorageCorrupt) {
		t.Fatalf("GetUint64 = %v, want storage_corrupt", err)
	}
}

func TestGetLogReportsCorruptValues(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	if err := s.StoreLog(testLog(1, 1)); err != nil {
		t.Fatal(err)
	}
	good := logcodec.Append(nil, testLog(2, 1))
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 0x40
	cases := map[uint64][]byte{
		3: {},                             // empty
		4: good[:10],                      // torn
		5: flipped,                        // bit flip
		6: append([]byte{9}, good[1:]...), // unknown version
		7: good,                           // valid entry under the wrong key
	}
	for idx, v := range cases {
		if err := s.db.Set(logKey(idx), v, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for idx := range cases {
		var l raft.Log
		if err := s.GetLog(idx, &l); !errors.Is(err, errcode.StorageCorrupt) {
			t.Fatalf("GetLog(%d) = %v, want storage_corrupt", idx, err)
		}
	}
}

func TestClosedStoreRefusesEveryCall(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	var l raft.Log
	for name, err := range map[string]error{
		"StoreLog":    s.StoreLog(testLog(1, 1)),
		"GetLog":      s.GetLog(1, &l),
		"DeleteRange": s.DeleteRange(1, 2),
		"Set":         s.Set([]byte("k"), nil),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("%s after Close = %v", name, err)
		}
	}
}

// TestRandomOperationsMatchInmemStore drives the store and raft.InmemStore
// with the same random operation sequences — the ones Raft issues: appends at
// the tail, prefix deletes (compaction), suffix deletes (conflicts), full
// deletes followed by appends past a gap (snapshot install), restarts — and
// compares every observable after every step.
func TestRandomOperationsMatchInmemStore(t *testing.T) {
	seeds := 12
	steps := 300
	if testing.Short() {
		seeds, steps = 3, 150
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
			fs := vfs.NewMem()
			s := openMem(t, fs)
			defer func() { s.Close() }()
			oracle := raft.NewInmemStore()
			term := uint64(1)
			for step := range steps {
				first, _ := oracle.FirstIndex()
				last, _ := oracle.LastIndex()
				op := rng.IntN(100)
				switch {
				case op < 55 || last == 0: // append at the tail
					term += uint64(rng.IntN(2))
					n := 1 + rng.IntN(8)
					batch := testLogs(last+1, n, term)
					mustBoth(t, s.StoreLogs(batch), oracle.StoreLogs(batch))
				case op < 70: // compaction
					max := first + uint64(rng.IntN(int(last-first)+1))
					mustBoth(t, s.DeleteRange(first, max), oracle.DeleteRange(first, max))
				case op < 85: // conflicting suffix
					min := first + uint64(rng.IntN(int(last-first)+1))
					mustBoth(t, s.DeleteRange(min, last), oracle.DeleteRange(min, last))
				case op < 90: // snapshot install: everything goes, next append is past a gap
					mustBoth(t, s.DeleteRange(first, last), oracle.DeleteRange(first, last))
					next := last + 2 + uint64(rng.IntN(50))
					term++
					mustBoth(t, s.StoreLog(testLog(next, term)), oracle.StoreLog(testLog(next, term)))
				case op < 95: // stable keys
					k := []byte(fmt.Sprintf("k%d", rng.IntN(4)))
					v := uint64(rng.IntN(1000))
					mustBoth(t, s.SetUint64(k, v), oracle.SetUint64(k, v))
				default: // restart
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = openMem(t, fs)
				}
				compareStores(t, step, s, oracle)
			}
		})
	}
}

func mustBoth(t *testing.T, got, want error) {
	t.Helper()
	if (got == nil) != (want == nil) {
		t.Fatalf("store error %v, oracle error %v", got, want)
	}
}

func compareStores(t *testing.T, step int, s *Store, oracle *raft.InmemStore) {
	t.Helper()
	first, _ := oracle.FirstIndex()
	last, _ := oracle.LastIndex()
	f, err1 := s.FirstIndex()
	l, err2 := s.LastIndex()
	if err1 != nil || err2 != nil || f != first || l != last {
		t.Fatalf("step %d: bounds %d..%d (%v %v), oracle %d..%d", step, f, l, err1, err2, first, last)
	}
	lo := first
	if lo > 2 {
		lo -= 2
	}
	for idx := lo; idx <= last+2; idx++ {
		var got, want raft.Log
		gerr := s.GetLog(idx, &got)
		werr := oracle.GetLog(idx, &want)
		if !errors.Is(gerr, werr) && !(gerr == nil && werr == nil) {
			t.Fatalf("step %d: GetLog(%d) = %v, oracle %v", step, idx, gerr, werr)
		}
		if gerr == nil && !sameLog(&got, &want) {
			t.Fatalf("step %d: GetLog(%d) = %+v, oracle %+v", step, idx, got, want)
		}
	}
	for i := range 4 {
		k := []byte(fmt.Sprintf("k%d", i))
		want, _ := oracle.GetUint64(k)
		got, err := s.GetUint64(k)
		if err != nil && want != 0 {
			t.Fatalf("step %d: GetUint64(%s) = %v, oracle %d", step, k, err, want)
		}
		if err == nil && got != want {
			t.Fatalf("step %d: GetUint64(%s) = %d, oracle %d", step, k, got, want)
		}
	}
}
