package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func keys(n int) []string {
	out := make([]string, 0, n)
	for p := range int32(n / 2) {
		out = append(out, GroupPartitionKey(p))
	}
	for s := range uint32(n - n/2) {
		out = append(out, TxnShardKey(s))
	}
	return out
}

func nodes(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("coordinatord-%d", i)
	}
	return out
}

func TestEmptyRingOwnsNothing(t *testing.T) {
	if got := New(nil, 0).Owner("txn/1"); got != "" {
		t.Fatalf("Owner on empty ring = %q", got)
	}
	if got := New([]string{"", ""}, 0).Len(); got != 0 {
		t.Fatalf("empty ids counted: %d", got)
	}
}

func TestSingleMemberOwnsEverything(t *testing.T) {
	r := New([]string{"c1"}, 0)
	for _, k := range keys(100) {
		if got := r.Owner(k); got != "c1" {
			t.Fatalf("Owner(%s) = %q", k, got)
		}
	}
}

func TestOwnerIgnoresInputOrderAndDuplicates(t *testing.T) {
	ms := nodes(7)
	a := New(ms, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := append([]string(nil), ms...)
		shuffled = append(shuffled, ms[rng.IntN(len(ms))]) // a duplicate
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		b := New(shuffled, 0)
		for _, k := range keys(500) {
			if a.Owner(k) != b.Owner(k) {
				t.Fatalf("Owner(%s) differs with member order %v", k, shuffled)
			}
		}
	}
}

// TestOwnersArePinned fixes a few owners so that a change to the hash or the
// point layout — which would move every group and shard in a running
// cluster — fails loudly.
func TestOwnersArePinned(t *testing.T) {
	r := New([]string{"c1", "c2", "c3"}, 0)
	got := []string{r.Owner(GroupPartitionKey(0)), r.Owner(GroupPartitionKey(1)), r.Owner(TxnShardKey(0)), r.Owner(TxnShardKey(49))}
	want := []string{"c3", "c2", "c2", "c1"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("owners = %v, want %v (the ring's hash changed)", got, want)
		}
	}
}

func TestAddingAMemberMovesKeysOnlyToIt(t *testing.T) {
	ks := keys(2000)
	for n := 1; n <= 8; n++ {
		before := New(nodes(n), 0)
		after := New(nodes(n+1), 0)
		added := nodes(n + 1)[n]
		moved := 0
		for _, k := range ks {
			b, a := before.Owner(k), after.Owner(k)
			if b != a {
				if a != added {
					t.Fatalf("n=%d: key %s moved %s -> %s, not to the added member", n, k, b, a)
				}
				moved++
			}
		}
		// Expected share of the new member is 1/(n+1); allow generous slack.
		if want := len(ks) / (n + 1); moved > want*2 || moved < want/2 {
			t.Fatalf("n=%d: %d of %d keys moved, expected about %d", n, moved, len(ks), want)
		}
	}
}

func TestRemovingAMemberMovesOnlyItsKeys(t *testing.T) {
	ks := keys(2000)
	all := nodes(6)
	before := New(all, 0)
	for gone := range all {
		var rest []string
		for i, m := range all {
			if i != gone {
				rest = append(rest, m)
			}
		}
		after := New(rest, 0)
		for _, k := range ks {
			b, a := before.Owner(k), after.Owner(k)
			if b != all[gone] && a != b {
				t.Fatalf("removing %s moved key %s from %s to %s", all[gone], k, b, a)
			}
			if a == all[gone] {
				t.Fatalf("removed member %s still owns %s", all[gone], k)
			}
		}
	}
}

func TestLoadIsSpread(t *testing.T) {
	ks := keys(10000)
	for _, n := range []int{2, 3, 5, 8} {
		r := New(nodes(n), 0)
		count := map[string]int{}
		for _, k := range ks {
			count[r.Owner(k)]++
		}
		mean := len(ks) / n
		for m, c := range count {
			if c > mean*3/2 || c < mean/2 {
				t.Fatalf("n=%d: %s owns %d keys, mean %d", n, m, c, mean)
			}
		}
		if len(count) != n {
			t.Fatalf("n=%d: only %d members own keys", n, len(count))
		}
	}
}

func TestKeysHaveTheTeamFormat(t *testing.T) {
	if got := GroupPartitionKey(7); got != "__consumer_offsets/7" {
		t.Fatal(got)
	}
	if got := TxnShardKey(49); got != "txn/49" {
		t.Fatal(got)
	}
}

func BenchmarkOwner(b *testing.B) {
	r := New(nodes(8), 0)
	ks := keys(1024)
	b.ReportAllocs()
	for i := range b.N {
		_ = r.Owner(ks[i%len(ks)])
	}
}
