package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSeriesKeysEverySample(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	up := prometheus.NewGauge(prometheus.GaugeOpts{Name: "up", Help: "h"})
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "calls_total", Help: "h"}, []string{"result", "method"})
	took := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "took_seconds", Help: "h"})
	reg.MustRegister(up, calls, took)
	up.Set(1)
	calls.WithLabelValues("ok", "get").Add(3)
	took.Observe(0.1)
	took.Observe(0.2)
	got := Series(t, reg)
	want := map[string]float64{
		"up{}":                              1,
		"calls_total{method=get,result=ok}": 3,
		"took_seconds{}":                    2,
	}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if k := Key("calls_total", map[string]string{"result": "ok", "method": "get"}); k != "calls_total{method=get,result=ok}" {
		t.Fatalf("Key = %q", k)
	}
}
