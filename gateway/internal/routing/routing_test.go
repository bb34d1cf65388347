package routing

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
