package placement

import (
	"hash/fnv"
	"testing"
)

func TestKeyPartitionMatchesStdlibFNV1a64(t *testing.T) {
	for _, k := range []string{"", "a", "user-42", "aggregate-7", "\x00\xff"} {
		h := fnv.New64a()
		h.Write([]byte(k))
		want := int32(h.Sum64() % 7)
		if got := KeyPartition([]byte(k), 7); got != want {
			t.Fatalf("KeyPartition(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestTxnShardMatchesStdlibFNV1a32(t *testing.T) {
	for _, id := range []string{"", "txn-1", "orders"} {
		h := fnv.New32a()
		h.Write([]byte(id))
		if got, want := TxnShard(id, 50), h.Sum32()%50; got != want {
			t.Fatalf("TxnShard(%q) = %d, want %d", id, got, want)
		}
	}
	if TxnShard("x", 0) != 0 {
		t.Fatal("zero shards must map to 0")
	}
}

func TestRoundRobinCycles(t *testing.T) {
	var r RoundRobin
	for i := 0; i < 6; i++ {
		if got := r.Next(3); got != int32(i%3) {
			t.Fatalf("step %d: %d", i, got)
		}
	}
}

func TestKeyPartitionStringAgrees(t *testing.T) {
	for _, k := range []string{"", "a", "user-42", "\x00\xff"} {
		if KeyPartitionString(k, 13) != KeyPartition([]byte(k), 13) {
			t.Fatalf("%q: string and byte forms disagree", k)
		}
	}
}

func TestGroupPartitionMatchesStdlibFNV1a32(t *testing.T) {
	for _, g := range []string{"", "billing", "g-1"} {
		h := fnv.New32a()
		h.Write([]byte(g))
		if got, want := GroupPartition(g, 16), int32(h.Sum32()%16); got != want {
			t.Fatalf("GroupPartition(%q) = %d, want %d", g, got, want)
		}
	}
}

// The spec's examples (committed 5): a request for 2 starts at 5, a request
// for 10 starts at 10; nothing committed: the request; neither: reset.
func TestStartOffset(t *testing.T) {
	for _, c := range []struct {
		s      Start
		want   uint64
		wantOK bool
	}{
		{Start{Committed: 5, HasCommitted: true, Requested: 2, HasRequested: true}, 5, true},
		{Start{Committed: 5, HasCommitted: true, Requested: 10, HasRequested: true}, 10, true},
		{Start{Committed: 5, HasCommitted: true, Requested: 5, HasRequested: true}, 5, true},
		{Start{Committed: 5, HasCommitted: true}, 5, true},
		{Start{Requested: 7, HasRequested: true}, 7, true},
		{Start{Requested: 0, HasRequested: true}, 0, true},
		{Start{}, 0, false},
	} {
		got, ok := c.s.Offset()
		if got != c.want || ok != c.wantOK {
			t.Errorf("%+v: got %d,%v want %d,%v", c.s, got, ok, c.want, c.wantOK)
		}
	}
}
