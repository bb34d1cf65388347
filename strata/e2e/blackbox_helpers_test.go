package e2e

// Helpers of the black-box suite (blackbox_*_test.go): they talk to the
// all-in-one only through its public listeners (Wire v2 client port, health
// and metrics HTTP), never through in-process state.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/internal/allinone"
)

// bbStart starts the in-process all-in-one and waits until /ready answers
// 200: the started callback fires once /ready *may* pass, and a client that
// follows the spec waits for readiness before sending traffic.
func bbStart(t *testing.T) *allinone.Server {
	t.Helper()
	srv := startAllInOne(t)
	bbWaitReady(t, srv.HealthAddr(), 60*time.Second)
	return srv
}

func bbWaitReady(t *testing.T, healthAddr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		code, body := bbHTTP(t, http.MethodGet, "http://"+healthAddr+"/ready")
		if code == http.StatusOK {
			return
		}
		last = fmt.Sprintf("%d %s", code, body)
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("/ready not 200 after %v: %s", timeout, last)
}

// bbHTTP performs one request and returns the status code and body; a
// transport failure is reported as code 0.
func bbHTTP(t *testing.T, method, url string) (int, string) {
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

// bbMetrics scrapes /metrics and returns every sample keyed by its series
// exactly as exposed (name{label="value",...}); labels are sorted by the
// Prometheus encoder, so keys are stable.
func bbMetrics(t *testing.T, metricsAddr string) map[string]float64 {
	t.Helper()
	code, body := bbHTTP(t, http.MethodGet, "http://"+metricsAddr+"/metrics")
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

// bbMetric returns one series' value (0 when absent: counters with labels
// appear only after their first increment).
func bbMetric(t *testing.T, metricsAddr, series string) float64 {
	t.Helper()
	return bbMetrics(t, metricsAddr)[series]
}

// bbEventually polls cond until it holds or timeout passes.
func bbEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// bbWant describes an expected typed error: code, class and retryable flag,
// plus fields that must be present with the given value ("*" = any value).
type bbWant struct {
	code      string
	class     errcode.Class
	retryable bool
	fields    map[string]string
}

func bbCheckErr(t *testing.T, what string, err error, w bbWant) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %s", what, w.code)
	}
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("%s: untyped error %v, want %s", what, err, w.code)
	}
	if e.Code != w.code || e.Class != w.class || e.Retryable != w.retryable {
		t.Fatalf("%s: got %s class=%s retryable=%v (%v), want %s class=%s retryable=%v",
			what, e.Code, e.Class, e.Retryable, e, w.code, w.class, w.retryable)
	}
	for k, v := range w.fields {
		got := e.Field(k)
		if got == "" || (v != "*" && got != v) {
			t.Fatalf("%s: field %s=%q, want %q (%v)", what, k, got, v, e)
		}
	}
	return e
}

// bbCase is one row of a command table: the SDK text form and either an
// expected typed error or the expected reply (prefix, and OK fields).
type bbCase struct {
	cmd    string
	err    *bbWant
	prefix string
	fields map[string]string
}

func bbRun(t *testing.T, ctx context.Context, cl *client.Client, cases []bbCase) {
	t.Helper()
	for _, c := range cases {
		resp, err := cl.Do(ctx, c.cmd)
		// A retryable answer the row does not expect (a partition being
		// opened, an offsets partition being replayed right after startup)
		// is retried with backoff, as the spec tells clients to.
		for tries := 0; err != nil && errcodeRetryable(err) && (c.err == nil || c.err.code != errcode.CodeOf(err)) && tries < 50; tries++ {
			time.Sleep(100 * time.Millisecond)
			resp, err = cl.Do(ctx, c.cmd)
		}
		if c.err != nil {
			bbCheckErr(t, c.cmd, err, *c.err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.cmd, err)
		}
		txt := resp.Text()
		if !strings.HasPrefix(txt, c.prefix) {
			t.Fatalf("%s: reply %q, want prefix %q", c.cmd, txt, c.prefix)
		}
		if len(c.fields) > 0 {
			ok, perr := wire.ParseOK(txt)
			if perr != nil {
				t.Fatalf("%s: reply %q: %v", c.cmd, txt, perr)
			}
			for k, v := range c.fields {
				if got, has := bbOKField(ok, k); !has || (v != "*" && got != v) {
					t.Fatalf("%s: %s=%q, want %q (reply %q)", c.cmd, k, got, v, txt)
				}
			}
		}
	}
}

func bbOKField(r wire.OKReply, key string) (string, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return "", false
}

// bbOK runs a command that must succeed and returns its parsed fields.
func bbOK(t *testing.T, ctx context.Context, cl *client.Client, cmd string) map[string]string {
	t.Helper()
	resp, err := cl.Do(ctx, cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	ok, err := wire.ParseOK(resp.Text())
	if err != nil {
		t.Fatalf("%s: reply %q: %v", cmd, resp.Text(), err)
	}
	m := map[string]string{}
	for _, f := range ok.Fields {
		m[f.Key] = f.Value
	}
	return m
}

func verr(code string, class errcode.Class, retryable bool, kv ...string) *bbWant {
	w := &bbWant{code: code, class: class, retryable: retryable, fields: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		w.fields[kv[i]] = kv[i+1]
	}
	return w
}

// Shorthands for the catalogue's classes, to keep the tables readable.
const (
	cValidation = errcode.ClassValidation
	cAuthz      = errcode.ClassAuthorization
	cAvail      = errcode.ClassAvailability
	cConflict   = errcode.ClassConflict
	cFencing    = errcode.ClassFencing
	cNotFound   = errcode.ClassNotFound
)

// bbFNVPartition is the spec's hash_key partitioner: FNV-1a 64 of the key
// modulo the partition count, computed independently of the server code.
func bbFNVPartition(key string, partitions int) int32 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int32(h.Sum64() % uint64(partitions))
}

// bbConsumeAll reads [from, ...) of one partition until an empty poll and
// returns the records.
func bbConsumeAll(t *testing.T, ctx context.Context, cl *client.Client, topic string, part int32, from uint64) []wire.Record {
	t.Helper()
	var out []wire.Record
	next := from
	for {
		b, err := cl.Consume(ctx, client.ConsumeRequest{Topic: topic, Partition: part, Offset: next, Member: "bb", Group: "bb-reader-" + topic, MaxRecords: 1000})
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

// bbOffsets returns LIST_OFFSETS of every partition keyed by partition.
func bbOffsets(t *testing.T, ctx context.Context, cl *client.Client, topic string) map[int32]client.PartitionOffsets {
	t.Helper()
	var offs []client.PartitionOffsets
	retry(t, ctx, func() (err error) {
		offs, err = cl.ListOffsets(ctx, topic, -1)
		return err
	})
	m := map[int32]client.PartitionOffsets{}
	for _, o := range offs {
		m[o.Partition] = o
	}
	return m
}

// bbJSON decodes a JSON reply into a generic map.
func bbJSON(t *testing.T, what string, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: not JSON: %v: %q", what, err, b)
	}
	return m
}

// bbRaw is a Wire v2 connection driven frame by frame (libs/wire only), for
// malformed input and for behaviour the client library hides (acks=0 sends
// no frame, STREAM_CONTROL on a new request, internal command ids).
type bbRaw struct {
	t     *testing.T
	nc    net.Conn
	fr    *wire.FrameReader
	codec wire.Codec
	id    uint64
}

func bbDialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}

func bbNegotiationFrame(t *testing.T, comps ...wire.Compression) []byte {
	t.Helper()
	p, err := wire.NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: comps}.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	neg := wire.Codec{Table: wire.TableA, Limits: wire.NegotiationLimits}
	frame, err := neg.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: wire.TableA.NegotiateID()}, p)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// bbNegotiate dials and negotiates comp; it fails the test unless the server
// accepts.
func bbNegotiate(t *testing.T, addr string, comp wire.Compression) *bbRaw {
	t.Helper()
	nc := bbDialRaw(t, addr)
	fr := wire.NewFrameReader(nc)
	if _, err := nc.Write(bbNegotiationFrame(t, comp)); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := fr.ReadFrame(&wire.Codec{Table: wire.TableA, Limits: wire.PublicLimits})
	if err != nil {
		t.Fatal("negotiation response:", err)
	}
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusOK {
		e, _ := wire.DecodeError(f.Payload)
		t.Fatalf("negotiation refused: %+v %v", f.Header, e)
	}
	resp, err := wire.DecodeNegotiationResponse(f.Payload)
	if err != nil || resp.Version != 2 || resp.Compression != comp {
		t.Fatalf("negotiation response %+v %v", resp, err)
	}
	return &bbRaw{t: t, nc: nc, fr: fr, codec: wire.Codec{Table: wire.TableA, Compression: comp, Limits: wire.PublicLimits}}
}

func (c *bbRaw) sendFrame(cmdID uint16, payload []byte) uint64 {
	c.t.Helper()
	c.id++
	frame, err := c.codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: cmdID, RequestID: c.id}, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatal(err)
	}
	return c.id
}

func (c *bbRaw) sendText(text string) uint64 {
	c.t.Helper()
	cmd, req, err := wire.ParseText(text)
	if err != nil {
		c.t.Fatal(err)
	}
	p, err := req.AppendTo(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	id, ok := c.codec.Table.ID(cmd)
	if !ok {
		c.t.Fatalf("%s has no id in the table", cmd)
	}
	return c.sendFrame(id, p)
}

func (c *bbRaw) read(timeout time.Duration) (wire.Frame, error) {
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	f, err := c.fr.ReadFrame(&c.codec)
	if err != nil {
		return f, err
	}
	f.Payload = append([]byte(nil), f.Payload...)
	return f, nil
}

func (c *bbRaw) mustRead() wire.Frame {
	c.t.Helper()
	f, err := c.read(10 * time.Second)
	if err != nil {
		c.t.Fatal("read frame:", err)
	}
	return f
}

// bbFrameErr decodes the typed error of an ERROR frame.
func bbFrameErr(t *testing.T, f wire.Frame) *errcode.Error {
	t.Helper()
	if f.Header.Status != wire.StatusError {
		t.Fatalf("expected an ERROR frame, got status %v payload %q", f.Header.Status, f.Payload)
	}
	e, err := wire.DecodeError(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// bbExpectClosed asserts the server closes nc within 5 s (reading anything
// it still sends first).
func bbExpectClosed(t *testing.T, nc net.Conn) {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	for {
		_, err := nc.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection not closed by the server")
		}
		return
	}
}

func errcodeRetryable(err error) bool {
	e, ok := errcode.As(err)
	return ok && e.Retryable
}

func jsonUnmarshalString(b []byte, s *string) error { return json.Unmarshal(b, s) }

// bbSkipBug skips a test that reproduces a known role bug (reported to the
// lead, not fixed here); STRATA_RUN_BUG_TESTS=1 runs it to see it fail.
func bbSkipBug(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("STRATA_RUN_BUG_TESTS") == "" {
		t.Skip("BUG: " + what)
	}
}
