package partitiond

import (
	"testing"

	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// TestListOffsetsForTime: ListOffsets with timestamp_ms answers, per
// partition, the first offset of the first batch holding a timestamp at or
// after it (the time index), the HWM when nothing is that late, and
// nothing extra without it.
func TestListOffsetsForTime(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("timed", 1, 1, "p1", "p1"))
	c.waitServing(t, "timed", 0)
	for _, ts := range []int64{1_000, 2_000, 3_000} {
		set := recordtest.Set(t, wire.Record{Topic: "timed", Payload: []byte("x"), Timestamp: ts})
		if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "timed", Partition: 0, Acks: 1, Records: set, RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ts int64) uint64 {
		t.Helper()
		lo, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "timed", TimestampMs: &ts})
		if err != nil || len(lo.GetPartitions()) != 1 || lo.GetPartitions()[0].GetError() != nil {
			t.Fatalf("list offsets at %d: %v %v", ts, lo, err)
		}
		return lo.GetPartitions()[0].GetOffsetForTime()
	}
	for ts, want := range map[int64]uint64{0: 0, 1_000: 0, 1_500: 1, 2_000: 1, 3_000: 2, 3_001: 3, 99_999: 3} {
		if got := at(ts); got != want {
			t.Errorf("offset for time %d = %d, want %d", ts, got, want)
		}
	}
}
