package framework

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

// Dial connects a client to a gateway's client address; it is closed at
// cleanup. With STRATA_PRINCIPAL set (an external deployment running with
// enable_sasl, such as the compose stack) it authenticates with
// STRATA_PRINCIPAL and STRATA_TOKEN, as the strata CLI does.
func Dial(t testing.TB, ctx context.Context, addr string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, addr, client.Options{ClientID: "e2e", Principal: os.Getenv("STRATA_PRINCIPAL"), Token: os.Getenv("STRATA_TOKEN")})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Connect opens a scenario's session: a context that ends after timeout (or
// with the test) and a client of c's first gateway, closed at cleanup.
func Connect(t testing.TB, c Cluster, timeout time.Duration) (context.Context, *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	return ctx, Dial(t, ctx, c.Gateways()[0].ClientAddr)
}

// WaitTopic waits until a gateway's metadata cache knows the topic (another
// gateway learns it through metad's watch).
func WaitTopic(t testing.TB, ctx context.Context, c *client.Client, topic string) {
	t.Helper()
	for {
		if _, err := c.Metadata(ctx, topic); err == nil {
			return
		} else if ctx.Err() != nil {
			t.Fatalf("topic %s never visible: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PublishAcked publishes n keyed records with acks=all (on a replicated
// topic only acks=all survives the loss of the leader; acks=1 may lose the
// tail, spec 4.6) and returns the acknowledged payloads per partition in
// offset order.
func PublishAcked(t testing.TB, ctx context.Context, cl *client.Client, topic string, n int) map[int32][]string {
	t.Helper()
	prod := client.NewProducer(cl, client.ProducerOptions{Acks: "all"})
	type sent struct {
		r *client.Result
		v string
	}
	var all []sent
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%04d", topic, i)
		r, err := prod.Send(ctx, client.Message{Topic: topic, Partition: -1, Key: fmt.Sprintf("k%d", i), Value: []byte(v)})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{r, v})
	}
	if err := prod.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := map[int32][]string{}
	for _, s := range all {
		off, err := s.r.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		list := out[s.r.Partition]
		for uint64(len(list)) <= off {
			list = append(list, "")
		}
		list[off] = s.v
		out[s.r.Partition] = list
	}
	return out
}

// CheckAcked reads back every partition's acknowledged records (as
// PublishAcked returns them) and fails the test on the first one that is not
// at its offset.
func CheckAcked(t testing.TB, ctx context.Context, cl *client.Client, topic string, acked map[int32][]string) {
	t.Helper()
	for part, want := range acked {
		got := ReadAll(t, ctx, cl, topic, part, uint64(len(want)))
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("p%d offset %d: %q, want %q", part, i, got[i], want[i])
			}
		}
	}
}

// Committed returns group's committed offset of one partition, retrying
// FETCH_OFFSET while it fails (a coordinator restarting or taking the group
// over answers with errors for a while).
func Committed(t testing.TB, ctx context.Context, cl *client.Client, topic string, part int32, group string) uint64 {
	t.Helper()
	var off uint64
	Retry(t, ctx, func() (err error) {
		off, err = cl.FetchOffset(ctx, topic, part, group)
		return err
	})
	return off
}

// ReadAll reads offsets [0, n) of one partition, retrying while the
// partition comes back after a restart.
func ReadAll(t testing.TB, ctx context.Context, cl *client.Client, topic string, part int32, n uint64) []string {
	t.Helper()
	var out []string
	for uint64(len(out)) < n {
		var b []string
		Retry(t, ctx, func() error {
			batch, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: part, Offset: uint64(len(out)), MaxRecords: 100, WaitMS: 200})
			if err != nil {
				return err
			}
			b = b[:0]
			for _, r := range batch.Records {
				b = append(b, string(r.Payload))
			}
			return nil
		})
		out = append(out, b...)
	}
	return out
}

// ConsumeAll reads [from, ...) of one partition until an empty poll and
// returns the records.
func ConsumeAll(t testing.TB, ctx context.Context, cl *client.Client, topic string, part int32, from uint64) []wire.Record {
	t.Helper()
	var out []wire.Record
	next := from
	for {
		b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: part, Offset: next, Member: "e2e", Group: "e2e-reader-" + topic, MaxRecords: 1000})
		if err != nil {
			t.Fatalf("consume %s/%d@%d: %v", topic, part, next, err)
		}
		if len(b.Records) == 0 {
			return out
		}
		for _, r := range b.Records {
			r.Payload = append([]byte(nil), r.Payload...)
			out = append(out, r)
			next = r.Offset + 1
		}
	}
}

// Offsets returns LIST_OFFSETS of every partition keyed by partition,
// retrying until every partition answers (the first request after a CREATE
// may meet a partition still being opened).
func Offsets(t testing.TB, ctx context.Context, cl *client.Client, topic string) map[int32]client.PartitionOffsets {
	t.Helper()
	var offs []client.PartitionOffsets
	Retry(t, ctx, func() (err error) {
		offs, err = cl.ListOffsets(ctx, topic, -1)
		return err
	})
	m := map[int32]client.PartitionOffsets{}
	for _, o := range offs {
		m[o.Partition] = o
	}
	return m
}

// ConsumeGroup joins group, polls until want records arrived (or, for want
// 0, a few empty polls), commits and leaves; it returns the payloads sorted.
func ConsumeGroup(t testing.TB, ctx context.Context, c *client.Client, group, topic string, want int) []string {
	t.Helper()
	k := client.NewConsumer(c, client.ConsumerOptions{Group: group, Topic: topic, WaitMS: 200})
	var out []string
	empty := 0
	for len(out) < want || (want == 0 && empty < 6) {
		recs, err := k.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(recs) == 0 {
			empty++
		}
		for _, r := range recs {
			out = append(out, string(r.Payload))
		}
	}
	if err := k.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if err := k.Close(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	sort.Strings(out)
	return out
}

// FNVPartition is the spec's hash_key partitioner: FNV-1a 64 of the key
// modulo the partition count, computed independently of the server code.
func FNVPartition(key string, partitions int) int32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int32(h.Sum64() % uint64(partitions))
}
