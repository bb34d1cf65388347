package groups

import (
	"hash/fnv"
	"testing"

	"github.com/strataio/strata/libs/ring"
)

func TestPartitionIsFNV1a32ModN(t *testing.T) {
	for _, g := range []string{"", "orders", "g-1", "ünïcode"} {
		h := fnv.New32a()
		h.Write([]byte(g))
		if got, want := Partition(g, 16), int32(h.Sum32()%16); got != want {
			t.Fatalf("Partition(%q,16) = %d, want %d", g, got, want)
		}
		if Partition(g, 0) != Partition(g, DefaultOffsetsPartitions) {
			t.Fatalf("n=0 must use the default")
		}
	}
	// Fixed vectors: changing the hash would strand every stored group,
	// and the gateway and coordinatord must agree forever.
	for _, v := range []struct {
		g    string
		n    int32
		want int32
	}{{"orders", 16, 12}, {"orders", 50, 20}, {"g", 16, 6}, {"consumer-1", 16, 7}} {
		if got := Partition(v.g, v.n); got != v.want {
			t.Fatalf("Partition(%q,%d) = %d, want %d", v.g, v.n, got, v.want)
		}
	}
}

func TestPartitionOwnerMatchesRing(t *testing.T) {
	r := ring.New([]string{"c1", "c2", "c3"}, 0)
	for p := int32(0); p < 16; p++ {
		if PartitionOwner(r, p) != r.Owner(ring.GroupPartitionKey(p)) {
			t.Fatal("owner differs from the ring")
		}
	}
	if PartitionOwner(ring.New(nil, 0), 1) != "" {
		t.Fatal("empty ring must own nothing")
	}
}

func TestOffsetsPartitionsDefault(t *testing.T) {
	if OffsetsPartitions(nil, 0) != DefaultOffsetsPartitions || OffsetsPartitions(nil, 8) != 8 {
		t.Fatal("defaults")
	}
}
