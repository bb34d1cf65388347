package load

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// liveHist is a latency histogram workers add to concurrently (atomic
// counters, the buckets of Histogram), so that the progress line can read
// the p99 so far while the run goes on. It exists only when progress is
// shown; the report still comes from the per-worker Histograms.
type liveHist struct {
	counts [64][subCount]atomic.Uint64
	total  atomic.Uint64
}

func (l *liveHist) record(d time.Duration) {
	e, s := bucket(max(int64(d), 0))
	l.counts[e][s].Add(1)
	l.total.Add(1)
}

// quantile is Histogram.Quantile over the values recorded so far (values
// recorded during the walk may or may not count).
func (l *liveHist) quantile(q float64) time.Duration {
	total := l.total.Load()
	if total == 0 {
		return 0
	}
	target := max(uint64(math.Ceil(q*float64(total))), 1)
	var seen uint64
	var last time.Duration
	for e := range l.counts {
		start := 0
		if e > 0 {
			start = subHalf
		}
		for s := start; s < subCount; s++ {
			c := l.counts[e][s].Load()
			if c == 0 {
				continue
			}
			seen += c
			last = time.Duration(upper(e, s))
			if seen >= target {
				return last
			}
		}
	}
	return last
}

// observe adds a request latency to the live histogram, when there is one.
func (s *side) observe(d time.Duration) {
	if s.live != nil {
		s.live.record(d)
	}
}

// isTerminal says whether w is a character device (a terminal): progress
// lines are for people watching, not for logs and pipes.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress prints a progress line per side every cfg.ProgressEvery
// (1 s) to cfg.Progress, when set; the returned stop waits for the printer
// to end, so no line follows the report.
func startProgress(ctx context.Context, cfg Config, prod, cons *side) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	var sides []namedSide
	for _, n := range []namedSide{{"produce", prod}, {"consume", cons}} {
		if n.s != nil {
			n.s.live = &liveHist{}
			sides = append(sides, n)
		}
	}
	every := cfg.ProgressEvery
	if every <= 0 {
		every = time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	t := time.NewTicker(every)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		reportProgress(ctx, cfg.Progress, t.C, time.Now(), sides)
	}()
	return func() {
		cancel()
		t.Stop()
		wg.Wait()
	}
}

type namedSide struct {
	name string
	s    *side
}

// reportProgress prints, at every tick, per side: elapsed time, records/s
// and MB/s over the last interval, p99 request latency so far, records and
// errors so far.
func reportProgress(ctx context.Context, w io.Writer, tick <-chan time.Time, start time.Time, sides []namedSide) {
	type last struct{ records, bytes int64 }
	prev := make([]last, len(sides))
	prevT := start
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-tick:
		}
		dt := now.Sub(prevT).Seconds()
		if dt <= 0 {
			continue
		}
		for i, n := range sides {
			r, b := n.s.records.Load(), n.s.bytes.Load()
			fmt.Fprintf(w, "%6.1fs %s %10.0f records/s %8.2f MB/s  p99 %8.3f ms  records %d errors %d\n",
				now.Sub(start).Seconds(), n.name, float64(r-prev[i].records)/dt, float64(b-prev[i].bytes)/1e6/dt,
				float64(n.s.live.quantile(0.99))/1e6, r, n.s.errors.Load())
			prev[i] = last{r, b}
		}
		prevT = now
	}
}
