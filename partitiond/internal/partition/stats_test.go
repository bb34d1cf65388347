package partition

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFsyncLatencyHistogram: every acknowledged acks=1 append was made
// durable by an fdatasync the node's histogram observed, and the collector
// exposes it as strata_storage_fsync_duration_seconds.
func TestFsyncLatencyHistogram(t *testing.T) {
	n, p := openPartition(t, "t", 0, TopicConfig{})
	appendPayloads(t, p, "a")
	appendPayloads(t, p, "b")
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(n))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "strata_storage_fsync_duration_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() < 1 || h.GetSampleCount() > 2 || len(h.GetBucket()) != 16 {
			t.Fatalf("fsync histogram: %d samples, %d buckets", h.GetSampleCount(), len(h.GetBucket()))
		}
		return
	}
	t.Fatal("strata_storage_fsync_duration_seconds not collected")
}
