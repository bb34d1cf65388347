package load

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/client"
)

// The txn mode: every connection is one transactional producer
// (client.TxnProducer, transactional_id strata-bench-txn-<n>) running
// transactions one after the other: Begin (INIT_PRODUCER_ID and BEGIN_TXN,
// a fresh epoch per transaction), TxnSize TXN_PUBLISH of keyless records
// routed by the server, END_TXN commit. Reported: committed transactions/s
// and records/s, the END_TXN commit latency and the whole transaction's.

// TxnReport is the txn mode's part of Result.
type TxnReport struct {
	TxnSize        int     `json:"txn_size"`
	Transactions   int64   `json:"transactions"`
	Records        int64   `json:"records"`
	Seconds        float64 `json:"seconds"`
	TxnPerSec      float64 `json:"transactions_per_sec"`
	RecordsPerSec  float64 `json:"records_per_sec"`
	Errors         int64   `json:"errors"`
	FirstError     string  `json:"first_error,omitempty"`
	CommitLatency  Latency `json:"commit_latency"`
	TxnLatency     Latency `json:"transaction_latency"`
	TransactionIDs string  `json:"transactional_ids"`
}

func runTxn(ctx context.Context, cfg Config, clients []*client.Client) (*Result, error) {
	if _, err := ensureTopic(ctx, clients[0], cfg); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	payload := strings.Repeat("x", cfg.RecordSize)
	var (
		issued, txns, recs, errs atomic.Int64
		mu                       sync.Mutex
		commitH, txnH            Histogram
		firstErr                 string
		wg                       sync.WaitGroup
	)
	fail := func(err error) {
		errs.Add(1)
		mu.Lock()
		if firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
	}
	var ids []string
	start := time.Now()
	for i, c := range clients {
		id := fmt.Sprintf("strata-bench-txn-%d", i)
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp := c.NewTxnProducer(id)
			var ch, th Histogram
			defer func() {
				mu.Lock()
				commitH.Merge(&ch)
				txnH.Merge(&th)
				mu.Unlock()
			}()
			for runCtx.Err() == nil {
				if cfg.Count > 0 && issued.Add(1) > cfg.Count {
					return
				}
				ts := time.Now()
				err := tp.Begin(ctx)
				for j := 0; err == nil && j < cfg.TxnSize; j++ {
					_, err = tp.Send(ctx, cfg.Topic, -1, "", payload)
				}
				if err != nil {
					fail(err)
					_ = tp.Abort(ctx)
					continue
				}
				cs := time.Now()
				if err := tp.Commit(ctx); err != nil {
					fail(err)
					continue
				}
				ch.Record(time.Since(cs))
				th.Record(time.Since(ts))
				txns.Add(1)
				recs.Add(int64(cfg.TxnSize))
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	rep := &TxnReport{TxnSize: cfg.TxnSize, Transactions: txns.Load(), Records: recs.Load(), Seconds: secs,
		Errors: errs.Load(), FirstError: firstErr, CommitLatency: summarize(&commitH), TxnLatency: summarize(&txnH),
		TransactionIDs: strings.Join(ids, ",")}
	if secs > 0 {
		rep.TxnPerSec = float64(rep.Transactions) / secs
		rep.RecordsPerSec = float64(rep.Records) / secs
	}
	return &Result{Mode: cfg.Mode, Addr: cfg.Addr, Topic: cfg.Topic, Conns: cfg.Conns, RecordSize: cfg.RecordSize,
		Compression: clients[0].Compression().String(), Txn: rep}, nil
}

func writeTxnText(w io.Writer, r *Result) {
	x := r.Txn
	fmt.Fprintf(w, "strata bench txn: addr=%s topic=%s connections=%d txn-size=%d record=%dB compression=%s\n",
		r.Addr, r.Topic, r.Conns, x.TxnSize, r.RecordSize, r.Compression)
	fmt.Fprintf(w, "%d transactions (%d records) committed in %.2fs: %.1f transactions/s, %.0f records/s, errors %d\n",
		x.Transactions, x.Records, x.Seconds, x.TxnPerSec, x.RecordsPerSec, x.Errors)
	for _, l := range []struct {
		name string
		l    Latency
	}{{"commit (END_TXN)", x.CommitLatency}, {"transaction", x.TxnLatency}} {
		fmt.Fprintf(w, "%-17s latency: p50 %.3f ms, p99 %.3f ms, p999 %.3f ms, max %.3f ms, mean %.3f ms (n=%d)\n",
			l.name, l.l.P50, l.l.P99, l.l.P999, l.l.Max, l.l.Mean, l.l.Count)
	}
	if x.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", x.FirstError)
	}
}
