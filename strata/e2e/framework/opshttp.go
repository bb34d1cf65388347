package framework

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HTTP performs one request and returns the status code and body; a
// transport failure is reported as code 0.
func HTTP(t testing.TB, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No keep-alive: scrapes must not hold sockets the descriptor and
	// connection checks would count.
	req.Close = true
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// WaitReady polls http://healthAddr/ready until it answers 200, as a
// readiness probe would; after timeout the test fails with the last answer.
func WaitReady(t testing.TB, healthAddr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		code, body := HTTP(t, http.MethodGet, "http://"+healthAddr+"/ready")
		if code == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%d %s", code, body)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("/ready of %s not 200 after %v: %s", healthAddr, timeout, last)
}

// Metrics scrapes /metrics and returns every sample keyed by its series
// exactly as exposed (name{label="value",...}); labels are sorted by the
// Prometheus encoder, so keys are stable.
func Metrics(t testing.TB, metricsAddr string) map[string]float64 {
	t.Helper()
	code, body := HTTP(t, http.MethodGet, "http://"+metricsAddr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// Metric returns one series' value (0 when absent: counters with labels
// appear only after their first increment).
func Metric(t testing.TB, metricsAddr, series string) float64 {
	t.Helper()
	return Metrics(t, metricsAddr)[series]
}

// JSON decodes a JSON reply into a generic map.
func JSON(t testing.TB, what string, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: not JSON: %v: %q", what, err, b)
	}
	return m
}
