package raftstore

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

// BenchmarkStoreLogs measures durable appends on the real filesystem (every
// StoreLogs is one fsync'd pebble batch): ops/s is StoreLogs calls per
// second, entries/s the entries they carried. Entries carry 256 bytes.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := make([]byte, 256)
			logs := make([]*raft.Log, batch)
			for i := range logs {
				logs[i] = &raft.Log{Type: raft.LogCommand, Term: 1, Data: data}
			}
			b.SetBytes(int64(batch * len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			next := uint64(1)
			for range b.N {
				for i, l := range logs {
					l.Index = next + uint64(i)
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
				next += uint64(batch)
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "ops/s")
			b.ReportMetric(float64(b.N*batch)/sec, "entries/s")
		})
	}
}

// BenchmarkGetLog measures reads of recently written entries.
func BenchmarkGetLog(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 4096
	var logs []*raft.Log
	for i := uint64(1); i <= n; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: make([]byte, 256)})
	}
	if err := s.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(256)
	b.ReportAllocs()
	b.ResetTimer()
	var l raft.Log
	for i := range b.N {
		if err := s.GetLog(uint64(i%n)+1, &l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
