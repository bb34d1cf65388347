// Package load is Strata's load tool (`strata bench
// produce|consume|e2e|groups`): it drives a Wire v2 server through
// libs/client over N pipelined connections with batches of synthetic
// records, optionally rate limited, or with consumer-group commands
// (groups.go), and reports throughput and latency percentiles as text or
// JSON.
package load

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Modes of the load tool.
const (
	ModeProduce = "produce"
	ModeConsume = "consume"
	ModeE2E     = "e2e"
	ModeGroups  = "groups"
	ModeTxn     = "txn"
)

// Config describes one run.
type Config struct {
	Mode string
	Addr string
	// Client holds the connection options (compression, TLS, timeouts).
	Client client.Options
	Topic  string
	// Partitions is used when the tool creates a missing topic (produce, e2e,
	// groups).
	Partitions int
	// Conns is the number of connections; Inflight the pipelined requests
	// per connection (producers; consumers over different partitions).
	Conns    int
	Inflight int
	// RecordSize is the payload size in bytes (at least 8: e2e stamps the
	// send time in the first 8 bytes); BatchSize the records per PUBLISH.
	RecordSize int
	BatchSize  int
	Acks       string
	// Duration bounds the run; Count, when > 0, stops after that many records
	// (whichever comes first).
	Duration time.Duration
	Count    int64
	// Rate limits produced records per second over all connections (0: none).
	Rate float64
	// Group, when set, is sent with CONSUME (committed offsets take precedence).
	Group string

	// groups mode (groups.go); Count counts its operations.
	// BatchEntries is the entries per BATCH_COMMIT (1..1,024; default
	// 1,024); a topic the mode creates gets at least that many partitions.
	BatchEntries int
	// Mix weighs the commands of the timed loop (zero value: equal parts).
	Mix Mix
	// Rejoins is the JOIN+SYNC+LEAVE cycles per connection after the loop
	// (0: none; the flag's default is 20).
	Rejoins int
	// KeepGroups keeps the groups of a groups run (default: deleted at
	// the end, so runs leave nothing behind).
	KeepGroups bool

	// TxnSize is the records per transaction of the txn mode (txn.go);
	// Count counts its transactions.
	TxnSize int

	// Progress, when set, receives a progress line per side every
	// ProgressEvery (default 1 s): records/s, MB/s, p99 so far (produce,
	// consume and e2e modes).
	Progress      io.Writer
	ProgressEvery time.Duration
}

// Defaults fills zero fields.
func (c *Config) Defaults() {
	if c.Topic == "" {
		c.Topic = "strata-bench"
		if c.Mode == ModeGroups {
			c.Topic = "strata-bench-groups"
		}
	}
	if c.Partitions <= 0 {
		c.Partitions = 4
	}
	if c.Conns <= 0 {
		c.Conns = 4
	}
	if c.Inflight <= 0 {
		c.Inflight = 4
	}
	if c.RecordSize < 8 {
		c.RecordSize = max(c.RecordSize, 8)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Acks == "" {
		c.Acks = "1"
	}
	if c.Duration <= 0 && c.Count <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.BatchEntries <= 0 {
		c.BatchEntries = wire.MaxOffsetEntries
	}
	if c.TxnSize == 0 {
		c.TxnSize = 10
	}
	if c.Mix == (Mix{}) {
		c.Mix = DefaultMix
	}
}

// Latency summarises a histogram in milliseconds.
type Latency struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

func summarize(h *Histogram) Latency {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return Latency{Count: h.Count(), P50: ms(h.Quantile(0.50)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean())}
}

// Side is the outcome of the producing or the consuming half.
type Side struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	Errors        int64   `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	// Latency is per request: PUBLISH round trip (write time for acks 0) or
	// CONSUME round trip.
	Latency Latency `json:"request_latency"`
}

// Result is the report of one run.
type Result struct {
	Mode        string   `json:"mode"`
	Addr        string   `json:"addr"`
	Topic       string   `json:"topic"`
	Conns       int      `json:"connections"`
	RecordSize  int      `json:"record_size,omitempty"`
	BatchSize   int      `json:"batch_size,omitempty"`
	Acks        string   `json:"acks,omitempty"`
	Compression string   `json:"compression"`
	Rate        float64  `json:"rate_limit,omitempty"`
	Produce     *Side    `json:"produce,omitempty"`
	Consume     *Side    `json:"consume,omitempty"`
	EndToEnd    *Latency `json:"end_to_end_latency,omitempty"`
	// Groups is the report of the groups mode (per command figures).
	Groups *GroupsReport `json:"groups,omitempty"`
	// Txn is the report of the txn mode.
	Txn *TxnReport `json:"txn,omitempty"`
}

// Failures counts what makes a run fail: requests that failed on either
// side, in any groups command, and committed offsets read back different
// from the last acknowledged commit. A load tool that reports errors and
// exits 0 lets a broken deployment pass a script.
func (r *Result) Failures() int64 {
	var n int64
	for _, s := range []*Side{r.Produce, r.Consume} {
		if s != nil {
			n += s.Errors
		}
	}
	if g := r.Groups; g != nil {
		for _, c := range g.Commands {
			n += c.Errors
		}
		n += g.OffsetMismatches
	}
	if r.Txn != nil {
		n += r.Txn.Errors
	}
	return n
}

// side collects one half's counters across workers.
type side struct {
	records, bytes, errors atomic.Int64
	mu                     sync.Mutex
	hist                   Histogram
	live                   *liveHist // progress lines only (progress.go)
	firstErr               string
	start                  time.Time
	end                    time.Time
}

func (s *side) fail(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
	s.mu.Unlock()
}

// stops handles err of a request made under ctx and reports whether the
// worker stops: when the run has ended (ctx is done; the error is not
// counted) or err is not retryable (counted, as retryable ones are).
func (s *side) stops(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	s.fail(err)
	return !errcode.IsRetryable(err)
}

func (s *side) merge(h *Histogram) {
	s.mu.Lock()
	s.hist.Merge(h)
	s.mu.Unlock()
}

func (s *side) result() *Side {
	secs := s.end.Sub(s.start).Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	r := &Side{Records: s.records.Load(), Bytes: s.bytes.Load(), Seconds: secs, Errors: s.errors.Load(),
		FirstError: s.firstErr, Latency: summarize(&s.hist)}
	r.RecordsPerSec = float64(r.Records) / secs
	r.MBPerSec = float64(r.Bytes) / 1e6 / secs
	return r
}

// Run executes cfg and returns the report.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.Defaults()
	switch cfg.Mode {
	case ModeProduce, ModeConsume, ModeE2E:
	case ModeTxn:
		if cfg.TxnSize <= 0 {
			return nil, errcode.InvalidParameter.New("txn-size must be positive", "param", "txn-size")
		}
	case ModeGroups:
		if err := cfg.checkGroups(); err != nil {
			return nil, err
		}
	default:
		return nil, errcode.InvalidParameter.New("mode must be produce, consume, e2e, groups or txn", "param", "mode", "value", cfg.Mode)
	}
	if !wire.ValidAcks(cfg.Acks) {
		return nil, errcode.InvalidParameter.New("bad acks", "param", "acks", "value", cfg.Acks)
	}
	clients := make([]*client.Client, cfg.Conns)
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range clients {
		c, err := client.Dial(ctx, cfg.Addr, cfg.Client)
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	if cfg.Mode == ModeGroups {
		return runGroups(ctx, cfg, clients)
	}
	if cfg.Mode == ModeTxn {
		return runTxn(ctx, cfg, clients)
	}
	parts, err := ensureTopic(ctx, clients[0], cfg)
	if err != nil {
		return nil, err
	}
	cfg.Partitions = parts
	res := &Result{Mode: cfg.Mode, Addr: cfg.Addr, Topic: cfg.Topic, Conns: cfg.Conns, RecordSize: cfg.RecordSize,
		BatchSize: cfg.BatchSize, Acks: cfg.Acks, Compression: clients[0].Compression().String(), Rate: cfg.Rate}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	var prod, cons *side
	var e2e *Histogram
	var wg sync.WaitGroup
	if cfg.Mode == ModeProduce || cfg.Mode == ModeE2E {
		prod = &side{}
	}
	if cfg.Mode == ModeConsume || cfg.Mode == ModeE2E {
		cons = &side{}
	}
	stopProgress := startProgress(ctx, cfg, prod, cons)
	defer stopProgress()
	if cons != nil {
		if cfg.Mode == ModeE2E {
			e2e = &Histogram{}
		}
		// e2e reads only what this run produces: start at the current end.
		starts := make([]uint64, cfg.Partitions)
		if cfg.Mode == ModeE2E {
			var los []client.PartitionOffsets
			err := retrySetup(ctx, func() (err error) {
				los, err = clients[0].ListOffsets(ctx, cfg.Topic, -1)
				return err
			})
			if err != nil {
				return nil, err
			}
			for _, lo := range los {
				if int(lo.Partition) < len(starts) {
					starts[lo.Partition] = lo.Latest
				}
			}
		}
		consumeCtx := runCtx
		var stopConsume context.CancelFunc
		if cfg.Mode == ModeE2E {
			// Consumers drain what producers sent, a little after they stop.
			consumeCtx, stopConsume = context.WithCancel(ctx)
		}
		cons.start = time.Now()
		var cwg sync.WaitGroup
		var consumed atomic.Int64
		want := int64(0)
		if cfg.Mode == ModeConsume {
			want = cfg.Count
		}
		for i := 0; i < min(cfg.Conns, cfg.Partitions); i++ {
			var parts []int32
			for p := i; p < cfg.Partitions; p += min(cfg.Conns, cfg.Partitions) {
				parts = append(parts, int32(p))
			}
			cwg.Add(1)
			go func(c *client.Client) {
				defer cwg.Done()
				consumeLoop(consumeCtx, c, cfg, parts, starts, cons, e2e, &consumed, want)
			}(clients[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cwg.Wait()
			cons.end = time.Now()
			if stopConsume != nil {
				stopConsume()
			}
		}()
		if cfg.Mode == ModeE2E {
			defer stopConsume()
			produceAll(runCtx, ctx, clients, cfg, prod)
			// Let the consumers catch up with what was produced (bounded).
			deadline := time.Now().Add(5 * time.Second)
			for consumed.Load() < prod.records.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			stopConsume()
		}
	} else {
		produceAll(runCtx, ctx, clients, cfg, prod)
	}
	wg.Wait()
	if prod != nil {
		res.Produce = prod.result()
	}
	if cons != nil {
		res.Consume = cons.result()
	}
	if e2e != nil {
		l := summarize(e2e)
		res.EndToEnd = &l
	}
	return res, nil
}

// ensureTopic returns the partitions of cfg.Topic, creating it with
// cfg.Partitions when it is missing (except for consume, which reads what
// exists).
func ensureTopic(ctx context.Context, c *client.Client, cfg Config) (int, error) {
	md, err := c.Metadata(ctx, cfg.Topic)
	if err != nil && errcode.CodeOf(err) != errcode.TopicNotFound.Name() {
		return 0, err
	}
	if err != nil {
		if cfg.Mode == ModeConsume {
			return 0, err
		}
		if _, err := c.CreateTopic(ctx, client.TopicConfig{Name: cfg.Topic, Partitions: cfg.Partitions}); err != nil {
			return 0, err
		}
		if err := retrySetup(ctx, func() (err error) {
			md, err = c.Metadata(ctx, cfg.Topic)
			return err
		}); err != nil {
			return 0, err
		}
	}
	return md.Partitions, nil
}

// retrySetup retries a setup call while it fails with a retryable error (a
// new topic's partitions are still opening: leader_not_found), for up to
// 15 s.
func retrySetup(ctx context.Context, fn func() error) error {
	return retryWhile(ctx, fn, errcode.IsRetryable)
}

// retryWhile retries fn while retry(err) holds, for up to 15 s.
func retryWhile(ctx context.Context, fn func() error, retry func(error) bool) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := fn()
		if err == nil || !retry(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// limiter spaces batches so the total record rate stays at rate.
type limiter struct {
	mu    sync.Mutex
	rate  float64
	start time.Time
	sent  float64
}

func (l *limiter) wait(ctx context.Context, n int) bool {
	if l == nil || l.rate <= 0 {
		return ctx.Err() == nil
	}
	l.mu.Lock()
	at := l.start.Add(time.Duration(l.sent / l.rate * float64(time.Second)))
	l.sent += float64(n)
	l.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// produceAll runs the producers until ctx ends; each request runs under
// callCtx, so a request in flight when the run ends completes and is counted
// (the records it carries are stored either way).
func produceAll(ctx, callCtx context.Context, clients []*client.Client, cfg Config, s *side) {
	var issued atomic.Int64
	lim := &limiter{rate: cfg.Rate, start: time.Now()}
	s.start = time.Now()
	var wg sync.WaitGroup
	for ci, c := range clients {
		for w := range cfg.Inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				produceLoop(ctx, callCtx, c, cfg, ci*cfg.Inflight+w, &issued, lim, s)
			}()
		}
	}
	wg.Wait()
	s.end = time.Now()
}

func produceLoop(ctx, callCtx context.Context, c *client.Client, cfg Config, worker int, issued *atomic.Int64, lim *limiter, s *side) {
	var h Histogram
	defer s.merge(&h)
	payload := make([]byte, cfg.RecordSize)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	var bb wire.BatchBuilder
	var buf []byte
	part := int32(worker % cfg.Partitions)
	for ctx.Err() == nil {
		n := cfg.BatchSize
		if cfg.Count > 0 {
			after := issued.Add(int64(n))
			if after-int64(n) >= cfg.Count {
				return
			}
			if after > cfg.Count {
				n = int(cfg.Count - (after - int64(n)))
			}
		}
		if !lim.wait(ctx, n) {
			return
		}
		// Every PUBLISH is encoded afresh by the client library, record by
		// record, as a producer does; the records differ only in what the
		// bench varies (the send time), so one Record value is reused
		// instead of a slice of them rebuilt per batch.
		now := time.Now()
		binary.BigEndian.PutUint64(payload, uint64(now.UnixNano()))
		rec := wire.Record{Payload: payload, Timestamp: now.UnixMilli()}
		err := bb.Reset(buf[:0], wire.BatchHeader{Topic: cfg.Topic, Partition: part, Acks: cfg.Acks})
		for i := 0; i < n && err == nil; i++ {
			err = bb.Add(&rec)
		}
		if err == nil {
			buf, err = bb.Bytes()
		}
		if err != nil {
			s.fail(err)
			return
		}
		start := time.Now()
		_, err = c.PublishEncoded(callCtx, buf, cfg.Acks)
		if err != nil {
			if s.stops(callCtx, err) {
				return
			}
			continue
		}
		d := time.Since(start)
		h.Record(d)
		s.observe(d)
		s.records.Add(int64(n))
		s.bytes.Add(int64(n * cfg.RecordSize))
		part = (part + 1) % int32(cfg.Partitions)
	}
}

// consumeLoop reads parts over one connection: up to cfg.Inflight CONSUMEs
// in flight, each worker owning some of the partitions (a partition's next
// offset is known only once its last read returned, so one partition never
// has two reads in flight).
func consumeLoop(ctx context.Context, c *client.Client, cfg Config, parts []int32, starts []uint64, s *side, e2e *Histogram,
	consumed *atomic.Int64, want int64) {
	n := max(1, min(cfg.Inflight, len(parts)))
	var wg sync.WaitGroup
	for w := range n {
		var mine []int32
		for i := w; i < len(parts); i += n {
			mine = append(mine, parts[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			consumeParts(ctx, c, cfg, mine, starts, s, e2e, consumed, want)
		}()
	}
	wg.Wait()
}

func consumeParts(ctx context.Context, c *client.Client, cfg Config, parts []int32, starts []uint64, s *side, e2e *Histogram,
	consumed *atomic.Int64, want int64) {
	var h, eh Histogram
	defer func() {
		s.merge(&h)
		if e2e != nil {
			s.mu.Lock()
			e2e.Merge(&eh)
			s.mu.Unlock()
		}
	}()
	pos := map[int32]uint64{}
	for _, p := range parts {
		pos[p] = starts[p]
	}
	idle := 0
	for i := 0; ctx.Err() == nil; i++ {
		// Another worker may have reached the count while this one's
		// partitions were drained: stop instead of long-polling empty
		// partitions until the duration ends (which made the consume
		// figures measure the idle polling, not the reads).
		if want > 0 && consumed.Load() >= want {
			return
		}
		p := parts[i%len(parts)]
		start := time.Now()
		v, err := c.ConsumeView(ctx, client.ConsumeRequest{Topic: cfg.Topic, Partition: p, Offset: pos[p], Group: cfg.Group,
			MaxRecords: max(cfg.BatchSize*10, 1000), WaitMS: 50})
		if err != nil {
			if s.stops(ctx, err) {
				return
			}
			continue
		}
		d := time.Since(start)
		now := time.Now().UnixNano()
		var nbytes int64
		var last uint64
		// Every record is validated as it is read (the view's iterator), as
		// a consumer of the zero-copy API does.
		it := v.Records()
		for r, ok := it.Next(); ok; r, ok = it.Next() {
			pl := r.Payload()
			nbytes += int64(len(pl))
			last = r.Offset()
			if e2e != nil && len(pl) >= 8 {
				eh.Record(time.Duration(now - int64(binary.BigEndian.Uint64(pl))))
			}
		}
		if err := it.Err(); err != nil {
			if s.stops(ctx, err) {
				return
			}
			continue
		}
		h.Record(d)
		s.observe(d)
		n := v.RecordCount()
		// Done with the reply: its buffer takes a later one (the load
		// generator shares the CPUs with the server it measures, and a
		// fresh buffer per CONSUME was most of its garbage collection).
		c.Recycle(v)
		if n > 0 {
			pos[p] = last + 1
			s.records.Add(int64(n))
			s.bytes.Add(nbytes)
			total := consumed.Add(int64(n))
			idle = 0
			if want > 0 && total >= want {
				return
			}
		} else {
			idle++
			// consume mode without a count ends when every partition came
			// back empty twice in a row (the topic is drained).
			if cfg.Mode == ModeConsume && want == 0 && idle >= 2*len(parts) {
				return
			}
		}
	}
}

// WriteText prints the report for people.
func WriteText(w io.Writer, r *Result) {
	if r.Groups != nil {
		writeGroupsText(w, r)
		return
	}
	if r.Txn != nil {
		writeTxnText(w, r)
		return
	}
	fmt.Fprintf(w, "strata bench %s: addr=%s topic=%s connections=%d record=%dB batch=%d acks=%s compression=%s",
		r.Mode, r.Addr, r.Topic, r.Conns, r.RecordSize, r.BatchSize, r.Acks, r.Compression)
	if r.Rate > 0 {
		fmt.Fprintf(w, " rate=%.0f/s", r.Rate)
	}
	fmt.Fprintln(w)
	side := func(name string, s *Side, what string) {
		fmt.Fprintf(w, "%-8s %d records in %.2fs: %.0f records/s, %.2f MB/s (payload), errors %d\n",
			name, s.Records, s.Seconds, s.RecordsPerSec, s.MBPerSec, s.Errors)
		fmt.Fprintf(w, "%-8s %s latency: p50 %.3f ms, p99 %.3f ms, p999 %.3f ms, max %.3f ms, mean %.3f ms (n=%d)\n",
			"", what, s.Latency.P50, s.Latency.P99, s.Latency.P999, s.Latency.Max, s.Latency.Mean, s.Latency.Count)
		if s.FirstError != "" {
			fmt.Fprintf(w, "%-8s first error: %s\n", "", s.FirstError)
		}
	}
	if r.Produce != nil {
		what := "PUBLISH request"
		if r.Acks == "0" || r.Acks == "none" {
			what = "PUBLISH write (acks=0)"
		}
		side("produce", r.Produce, what)
	}
	if r.Consume != nil {
		side("consume", r.Consume, "CONSUME request")
	}
	if l := r.EndToEnd; l != nil {
		fmt.Fprintf(w, "e2e      latency (send to receive): p50 %.3f ms, p99 %.3f ms, p999 %.3f ms, max %.3f ms (n=%d)\n",
			l.P50, l.P99, l.P999, l.Max, l.Count)
	}
}

// WriteJSON prints the report as one JSON document.
func WriteJSON(w io.Writer, r *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
