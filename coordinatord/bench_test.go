package coordinatord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// benchGroup starts a coordinator over the fakes with one member holding
// every partition of a topic with parts partitions.
func benchGroup(b *testing.B, parts int32) (*coord, *coordinatorv1.JoinGroupResponse) {
	c := newCluster(b)
	c.putTopic("bench", parts, 0)
	cfg := testConfig(c)
	cfg.SessionTimeout = time.Minute
	co := startCoord(b, c, "c1", cfg)
	co.waitReady(b)
	j, err := co.client.JoinGroup(context.Background(), &coordinatorv1.JoinGroupRequest{Group: "bg", Member: "m", Topic: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return co, j
}

// reportLatency adds p50/p99 in microseconds.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkBatchCommit1024(b *testing.B) {
	co, j := benchGroup(b, 1024)
	ctx := context.Background()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		var sb strings.Builder
		for p := range 1024 {
			if p > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, "P%d:%d", p, i+1)
		}
		start := time.Now()
		r, err := co.client.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "bg", Topic: "bench", Member: j.GetMember(),
			Generation: u64(j.GetGeneration()), OffsetsList: sb.String()})
		lat = append(lat, time.Since(start))
		if err != nil || r.GetBatched() != 1024 {
			b.Fatal(r, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*1024)/b.Elapsed().Seconds(), "entries/s")
	reportLatency(b, lat)
}

// measureCalls runs call b.N times (i counts from 0), failing the benchmark
// on its first error, and reports the latency of the calls.
func measureCalls(b *testing.B, call func(i int) error) {
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		err := call(i)
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	reportLatency(b, lat)
}

func BenchmarkCommitOffset(b *testing.B) {
	co, j := benchGroup(b, 4)
	ctx := context.Background()
	measureCalls(b, func(i int) error {
		_, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "bg", Topic: "bench", Partition: 0,
			Offset: uint64(i + 1), Member: j.GetMember(), Generation: u64(j.GetGeneration())})
		return err
	})
}

func BenchmarkHeartbeat(b *testing.B) {
	co, j := benchGroup(b, 4)
	ctx := context.Background()
	measureCalls(b, func(int) error {
		_, err := co.client.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "bg", Topic: "bench", Member: j.GetMember(), Generation: u64(j.GetGeneration())})
		return err
	})
}

func BenchmarkJoinSyncLeave(b *testing.B) {
	co, _ := benchGroup(b, 16)
	ctx := context.Background()
	measureCalls(b, func(i int) error {
		jr, err := co.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "bg", Member: fmt.Sprintf("x%d", i), Topic: "bench"})
		if err != nil {
			return err
		}
		if _, err := co.client.SyncGroup(ctx, &coordinatorv1.SyncGroupRequest{Group: "bg", Member: jr.GetMember(), Generation: jr.GetGeneration(), Topic: "bench"}); err != nil {
			return err
		}
		_, err = co.client.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "bg", Member: jr.GetMember(), Topic: "bench"})
		return err
	})
}

// BenchmarkParallelCommits commits from 64 goroutines, one group each
// (spread over the offsets partitions): the group-commit path.
func BenchmarkParallelCommits(b *testing.B) {
	co, _ := benchGroup(b, 1)
	ctx := context.Background()
	const groupsN = 64
	joins := make([]*coordinatorv1.JoinGroupResponse, groupsN)
	for i := range groupsN {
		j, err := co.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: fmt.Sprintf("pg%d", i), Member: "m", Topic: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		joins[i] = j
	}
	var next atomic.Int64
	b.SetParallelism(groupsN / 2)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)-1) % groupsN
		j := joins[i]
		g := fmt.Sprintf("pg%d", i)
		for off := uint64(1); pb.Next(); off++ {
			if _, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: g, Topic: "bench", Partition: 0,
				Offset: off, Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

// BenchmarkFetchOffset reads one committed offset at a time: every read is
// confirmed against the offsets partition's high watermark first.
func BenchmarkFetchOffset(b *testing.B) {
	co, j := benchGroup(b, 4)
	ctx := context.Background()
	if _, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "bg", Topic: "bench", Partition: 0,
		Offset: 7, Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
		b.Fatal(err)
	}
	measureCalls(b, func(int) error {
		r, err := co.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "bg", Topic: "bench", Partition: 0})
		if err == nil && r.GetOffset() != 7 {
			err = fmt.Errorf("fetched offset %d, want 7", r.GetOffset())
		}
		return err
	})
}

// BenchmarkParallelFetchOffset reads from 64 goroutines: concurrent reads
// of one offsets partition share their confirmations.
func BenchmarkParallelFetchOffset(b *testing.B) {
	co, _ := benchGroup(b, 4)
	ctx := context.Background()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := co.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "bg", Topic: "bench", Partition: 0}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkTxnWithOffsets measures one consume-process-produce transaction
// against the fakes: BEGIN_TXN (a fresh epoch by INIT_PRODUCER_ID), one
// TXN_PUBLISH, SEND_OFFSETS_TO_TXN of one partition and END_TXN commit. It
// reports the SEND_OFFSETS_TO_TXN and END_TXN latencies, where the pending
// offset mark costs its writes (docs/transactions.md).
func BenchmarkTxnWithOffsets(b *testing.B) {
	co, j := benchGroup(b, 4)
	ctx := context.Background()
	cl := co.client
	var send, end []time.Duration
	b.ResetTimer()
	for i := range b.N {
		ini, err := cl.InitProducerId(ctx, &coordinatorv1.InitProducerIdRequest{TransactionalId: "bench-copier"})
		if err != nil {
			b.Fatal(err)
		}
		pid, ep := ini.GetProducerId(), ini.GetEpoch()
		if _, err := cl.BeginTxn(ctx, &coordinatorv1.BeginTxnRequest{TransactionalId: "bench-copier", ProducerId: pid, Epoch: ep}); err != nil {
			b.Fatal(err)
		}
		if _, err := cl.TxnPublish(ctx, &coordinatorv1.TxnPublishRequest{TransactionalId: "bench-copier", ProducerId: pid, Epoch: ep, Seq: 1,
			Topic: "bench", Records: txnRecord(b, "bench", "x"), RecordCount: 1}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := cl.SendOffsetsToTxn(ctx, &coordinatorv1.SendOffsetsToTxnRequest{TransactionalId: "bench-copier", ProducerId: pid, Epoch: ep,
			Topic: "bench", Group: "bg", Member: j.GetMember(), Generation: j.GetGeneration(), OffsetsList: fmt.Sprintf("P0:%d", i+1)}); err != nil {
			b.Fatal(err)
		}
		send = append(send, time.Since(start))
		start = time.Now()
		if _, err := cl.EndTxn(ctx, &coordinatorv1.EndTxnRequest{TransactionalId: "bench-copier", ProducerId: pid, Epoch: ep, Commit: true}); err != nil {
			b.Fatal(err)
		}
		end = append(end, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(send)
	slices.Sort(end)
	b.ReportMetric(float64(send[len(send)/2].Microseconds()), "send-p50-µs")
	b.ReportMetric(float64(send[len(send)*99/100].Microseconds()), "send-p99-µs")
	b.ReportMetric(float64(end[len(end)/2].Microseconds()), "commit-p50-µs")
	b.ReportMetric(float64(end[len(end)*99/100].Microseconds()), "commit-p99-µs")
}
