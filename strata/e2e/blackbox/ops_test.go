package blackbox

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// healthAndMetrics checks the operations listeners of spec 4.1/4.2 of a
// gateway (the all-in-one's are the process's): /live and /ready JSON bodies
// and codes (503 with failing checks before readiness), GET/HEAD only (405
// otherwise), only /live and /ready registered (404 for /health and /), and
// /metrics exposing the strata_ catalogue.
func healthAndMetrics(t *testing.T, c framework.Cluster) {
	gw := c.Gateways()[0]
	health := "http://" + gw.HealthAddr

	// Until every check passes /ready is 503 with status not_ready and the
	// failing checks; then 200. Commands sent before readiness answer, if
	// they fail, with retryable availability errors.
	var early *framework.RawConn
	deadline := time.Now().Add(60 * time.Second)
	for {
		if early == nil {
			early = framework.Negotiate(t, gw.ClientAddr, wire.CompressionNone)
		}
		id := early.SendText("LIST")
		if f := early.MustRead(); f.Header.RequestID != id {
			t.Fatalf("early LIST answered %d", f.Header.RequestID)
		} else if f.Header.Status == wire.StatusError {
			if e := framework.FrameErr(t, f); e.Class != errcode.ClassAvailability || !e.Retryable {
				t.Fatalf("LIST before readiness: %v (want a retryable availability error)", e)
			}
		}
		code, body := framework.HTTP(t, http.MethodGet, health+"/ready")
		m := framework.JSON(t, "/ready", []byte(body))
		if code == http.StatusOK {
			if m["status"] != "ready" {
				t.Fatalf("/ready 200 with %s", body)
			}
			break
		}
		if code != http.StatusServiceUnavailable || m["status"] != "not_ready" {
			t.Fatalf("/ready before readiness: %d %s", code, body)
		}
		checks, _ := m["checks"].(map[string]any)
		failing := 0
		for _, v := range checks {
			if v != "ok" {
				failing++
			}
		}
		if failing == 0 {
			t.Fatalf("/ready 503 without a failing check: %s", body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready never 200: %s", body)
		}
		time.Sleep(30 * time.Millisecond)
	}

	t.Run("health listener", func(t *testing.T) {
		code, body := framework.HTTP(t, http.MethodGet, health+"/live")
		if code != http.StatusOK || framework.JSON(t, "/live", []byte(body))["status"] != "live" {
			t.Fatalf("/live: %d %s", code, body)
		}
		code, body = framework.HTTP(t, http.MethodGet, health+"/ready")
		m := framework.JSON(t, "/ready", []byte(body))
		checks, _ := m["checks"].(map[string]any)
		for _, c := range []string{"consumer_metadata", "storage", "topic_metadata", "cluster_leader"} {
			if checks[c] != "ok" {
				t.Fatalf("/ready check %s = %v (%s)", c, checks[c], body)
			}
		}
		for _, path := range []string{"/live", "/ready"} {
			if code, body := framework.HTTP(t, http.MethodHead, health+path); code != http.StatusOK || body != "" {
				_, now := framework.HTTP(t, http.MethodGet, health+path)
				t.Fatalf("HEAD %s: %d %q (GET right after: %s)", path, code, body, now)
			}
			for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
				if code, _ := framework.HTTP(t, method, health+path); code != http.StatusMethodNotAllowed {
					t.Fatalf("%s %s: %d, want 405", method, path, code)
				}
			}
		}
		for _, path := range []string{"/health", "/", "/metrics", "/live/x", "/readyz"} {
			if code, _ := framework.HTTP(t, http.MethodGet, health+path); code != http.StatusNotFound {
				t.Fatalf("GET %s: %d, want 404", path, code)
			}
		}
	})

	t.Run("metrics listener", func(t *testing.T) {
		ctx, cl := framework.Connect(t, c, 30*time.Second)
		framework.OK(t, ctx, cl, "CREATE topic=met partitions=2")
		_, err := cl.Do(ctx, "DESCRIBE topic=nope")
		framework.CheckErr(t, "DESCRIBE nope", err, framework.ExpectedError{Code: "topic_not_found", Class: cNotFound})

		// One bad connection: raw text instead of a negotiation frame.
		before := framework.Metric(t, gw.MetricsAddr, `strata_wire_protocol_failures_total{reason="bad_magic"}`)
		nc := framework.DialRaw(t, gw.ClientAddr)
		nc.Write([]byte("HELLO this is not a Wire v2 frame at all, just text\n"))
		framework.ExpectClosed(t, nc)

		framework.Eventually(t, 5*time.Second, "metrics", func() (bool, string) {
			m := framework.Metrics(t, gw.MetricsAddr)
			want := map[string]func(float64) bool{
				`strata_broker_ready`:                                        func(v float64) bool { return v == 1 },
				`strata_broker_topics`:                                       func(v float64) bool { return v >= 1 },
				`strata_broker_partitions`:                                   func(v float64) bool { return v >= 2 },
				`strata_broker_client_connections_total`:                     func(v float64) bool { return v >= 2 },
				`strata_broker_client_connections_active`:                    func(v float64) bool { return v >= 1 },
				`strata_streams_active`:                                      func(v float64) bool { return v == 0 },
				`strata_broker_commands_total{command="CREATE",result="ok"}`: func(v float64) bool { return v >= 1 },
				`strata_broker_command_errors_total{code="topic_not_found",command="DESCRIBE"}`: func(v float64) bool { return v >= 1 },
				`strata_broker_command_duration_seconds_count{command="CREATE"}`:                func(v float64) bool { return v >= 1 },
				`strata_wire_protocol_failures_total{reason="bad_magic"}`:                       func(v float64) bool { return v == before+1 },
			}
			for k, ok := range want {
				if v, has := m[k]; !has || !ok(v) {
					return false, fmt.Sprintf("%s = %v (present %v)", k, v, has)
				}
			}
			return true, ""
		})
		// The exposition is Prometheus text with HELP/TYPE lines and every
		// family carries the strata_ prefix of the catalogue.
		code, body := framework.HTTP(t, http.MethodGet, "http://"+gw.MetricsAddr+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, "# TYPE strata_broker_command_duration_seconds histogram") {
			t.Fatalf("/metrics exposition: %d", code)
		}
		if code, _ := framework.HTTP(t, http.MethodGet, "http://"+gw.MetricsAddr+"/"); code != http.StatusNotFound {
			t.Fatalf("GET / on the metrics listener: %d, want 404", code)
		}
	})
}

// connectionLimit holds 1,000 negotiated idle connections (the
// spec 8 limit, max_connections default), checks the 1,001st is refused
// cleanly (a negotiation response with status ERROR carrying
// connection_limit_reached, then close) and that the connection gauge comes
// back to its baseline once the clients leave.
func connectionLimit(t *testing.T, c framework.Cluster) {
	addr, maddr := c.Gateways()[0].ClientAddr, c.Gateways()[0].MetricsAddr
	const limit = 1000
	// The deployment is shared with the scenarios before this one: their
	// clients closed at their end and the gateway counts them down within
	// moments (the gauge must reach 0, not merely stay below the limit).
	var baseline float64
	framework.Eventually(t, 10*time.Second, "no client connections before the flood", func() (bool, string) {
		baseline = framework.Metric(t, maddr, "strata_broker_client_connections_active")
		return baseline == 0, fmt.Sprintf("baseline connections %v, want 0", baseline)
	})
	// On the in-process all-in-one the gateway's process is the test
	// process: its open descriptors include the client side of every test
	// connection.
	fdBase := framework.Metric(t, maddr, "process_open_fds")
	refusedBefore := framework.Metric(t, maddr, "strata_broker_client_connections_refused_total")
	neg := framework.NegotiationFrame(t, wire.CompressionNone)

	start := time.Now()
	conns := make([]net.Conn, limit)
	var wg sync.WaitGroup
	errs := make(chan error, limit)
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for i := range work {
				nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					continue
				}
				conns[i] = nc
				nc.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := nc.Write(neg); err != nil {
					errs <- err
					continue
				}
				// A negotiation response: 32-byte header + 3-byte payload.
				if _, err := io.ReadFull(nc, buf[:35]); err != nil {
					errs <- fmt.Errorf("conn %d: %w", i, err)
					continue
				}
				h, err := wire.ParseHeader(buf[:32])
				if err != nil || h.Kind != wire.KindNegotiationResponse || h.Status != wire.StatusOK {
					errs <- fmt.Errorf("conn %d refused: %+v %v", i, h, err)
				}
				nc.SetDeadline(time.Time{})
			}
		}()
	}
	for i := 0; i < limit; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	defer func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	idleFrom := time.Now()
	t.Logf("%d connections negotiated in %v", limit, time.Since(start))
	framework.Eventually(t, 5*time.Second, "1,000 active connections", func() (bool, string) {
		v := framework.Metric(t, maddr, "strata_broker_client_connections_active")
		return v == limit, fmt.Sprint(v)
	})

	// The 1,001st is refused cleanly.
	nc := framework.DialRaw(t, addr)
	fr := wire.NewFrameReader(nc)
	nc.Write(neg)
	f, err := framework.ReadNegotiationResponse(nc, fr, wire.TableA, 10*time.Second)
	if err != nil {
		t.Fatalf("refusal: %v", err)
	}
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Status != wire.StatusError {
		t.Fatalf("refusal frame %+v", f.Header)
	}
	e, err := wire.DecodeError(f.Payload)
	if err != nil || e.Code != "connection_limit_reached" || e.Class != errcode.ClassAvailability || !e.Retryable || e.Field("limit") != "1000" {
		t.Fatalf("refusal %v %v", e, err)
	}
	framework.ExpectClosed(t, nc)
	if v := framework.Metric(t, maddr, "strata_broker_client_connections_refused_total"); v != refusedBefore+1 {
		t.Fatalf("refused counter %v, want %v", v, refusedBefore+1)
	}

	// Idle held connections outlive the 5 s idle timeout and still serve
	// commands (the server reads again, it does not disconnect; spec 8).
	time.Sleep(time.Until(idleFrom.Add(5500 * time.Millisecond)))
	if v := framework.Metric(t, maddr, "strata_broker_client_connections_active"); v != limit {
		t.Fatalf("after the idle timeout %v connections are active, want %d", v, limit)
	}
	codec := wire.Codec{Table: wire.TableA, Limits: wire.PublicLimits}
	for _, i := range []int{0, 499, 999} {
		r := framework.NewRawConn(t, conns[i], wire.NewFrameReader(conns[i]), codec)
		id := r.SendText("HELP")
		if f := r.MustRead(); f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
			t.Fatalf("held connection %d: %+v", i, f.Header)
		}
	}

	// Leaving frees every slot.
	for i, nc := range conns {
		nc.Close()
		conns[i] = nil
	}
	framework.Eventually(t, 10*time.Second, "connection gauge back to baseline", func() (bool, string) {
		v := framework.Metric(t, maddr, "strata_broker_client_connections_active")
		return v == baseline, fmt.Sprint(v)
	})
	framework.Eventually(t, 10*time.Second, "descriptors back to baseline", func() (bool, string) {
		// Slack for the process's own background sockets (gRPC, HTTP);
		// a leak of the held connections would be hundreds.
		v := framework.Metric(t, maddr, "process_open_fds")
		return v <= fdBase+50, fmt.Sprintf("%v, baseline %v", v, fdBase)
	})
	ctx, cl := framework.Connect(t, c, 10*time.Second)
	if _, err := cl.ListTopics(ctx); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
	t.Logf("connection test took %v", time.Since(start))
}

// malformedFrames sends malformed input on fresh connections:
// each is answered or closed as docs/gateway.md specifies, counted by reason,
// and the connection gauge returns to baseline.
func malformedFrames(t *testing.T, c framework.Cluster) {
	addr, maddr := c.Gateways()[0].ClientAddr, c.Gateways()[0].MetricsAddr
	failures := func(reason string) float64 {
		return framework.Metric(t, maddr, `strata_wire_protocol_failures_total{reason="`+reason+`"}`)
	}
	// Decompression rejections are labelled with the codec's own reason
	// (corrupt, ...); the test counts them over every reason.
	decomp := func() float64 {
		sum := 0.0
		for k, v := range framework.Metrics(t, maddr) {
			if strings.HasPrefix(k, "strata_wire_decompression_rejections_total{") {
				sum += v
			}
		}
		return sum
	}
	expectCount := func(what string, get func() float64, want float64) {
		t.Helper()
		framework.Eventually(t, 5*time.Second, what, func() (bool, string) {
			v := get()
			return v == want, fmt.Sprintf("%v, want %v; wire series: %v", v, want, wireSeries(t, maddr))
		})
	}
	listID, _ := wire.TableA.ID(wire.CmdList)
	listPayload, _ := (&wire.Request{}).AppendTo(nil)
	plain := wire.Codec{Table: wire.TableA, Compression: wire.CompressionNone}
	validList := func(id uint64) []byte {
		f, err := plain.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: listID, RequestID: id}, listPayload)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	baseline := framework.Metric(t, maddr, "strata_broker_client_connections_active")
	runtime.GC()
	heapBase := framework.Metric(t, maddr, "go_memstats_heap_inuse_bytes")

	// Input the gateway answers by closing the connection, counted by
	// reason; negotiated input follows a successful negotiation.
	closing := []struct {
		name, reason string
		negotiated   bool
		input        func(t *testing.T) []byte
	}{
		{"raw text first", "bad_magic", false, func(*testing.T) []byte {
			return []byte("CREATE topic=x partitions=1\r\nPUBLISH topic=x message=hello\r\n")
		}},
		{"request frame before negotiation", "not_negotiation", false, func(*testing.T) []byte { return validList(1) }},
		{"failed negotiation", "negotiation_failed", false, func(t *testing.T) []byte {
			return framework.NegotiationRequestFrame(t, wire.TableA, wire.NegotiationRequest{MinVersion: 3, MaxVersion: 4, Compressions: []wire.Compression{wire.CompressionNone}})
		}},
		{"oversized negotiation frame", "too_large", false, func(t *testing.T) []byte {
			frame := framework.NegotiationFrame(t, wire.CompressionNone)
			binary.BigEndian.PutUint32(frame[20:], 1<<20)
			binary.BigEndian.PutUint32(frame[24:], 1<<20)
			return frame[:32]
		}},
		{"wrong magic after negotiation", "bad_magic", true, func(*testing.T) []byte {
			f := validList(1)
			f[0] ^= 0xff
			return f
		}},
		{"oversized length after negotiation", "too_large", true, func(*testing.T) []byte {
			f := validList(1)
			binary.BigEndian.PutUint32(f[20:], wire.ServerMaxPayload+1)
			binary.BigEndian.PutUint32(f[24:], wire.ServerMaxPayload+1)
			// Only the header: the gateway must refuse on it, not wait for
			// 256 MiB or allocate them.
			return f[:32]
		}},
		{"unknown command id", "unknown_command", true, func(*testing.T) []byte {
			f := validList(1)
			binary.BigEndian.PutUint16(f[8:], 999)
			return f
		}},
	}
	for _, tc := range closing {
		t.Run(tc.name, func(t *testing.T) {
			b := failures(tc.reason)
			var nc net.Conn
			if tc.negotiated {
				nc = framework.Negotiate(t, addr, wire.CompressionNone).Conn
			} else {
				nc = framework.DialRaw(t, addr)
			}
			nc.Write(tc.input(t))
			framework.ExpectClosed(t, nc)
			expectCount(tc.reason, func() float64 { return failures(tc.reason) }, b+1)
		})
	}

	t.Run("bad CRC is answered and the connection goes on", func(t *testing.T) {
		b := failures("checksum_mismatch")
		r := framework.Negotiate(t, addr, wire.CompressionNone)
		f := validList(7)
		f[len(f)-1] ^= 0xff // the last payload byte: CRC32C no longer matches
		r.Conn.Write(f)
		got := r.MustRead()
		e := framework.FrameErr(t, got)
		if got.Header.RequestID != 7 || e.Code != "invalid_frame" || e.Field("reason") != "checksum_mismatch" || e.Class != errcode.ClassValidation || e.Retryable {
			t.Fatalf("bad CRC answer: %v (request id %d)", e, got.Header.RequestID)
		}
		r.LastID = 7
		id := r.SendText("LIST")
		if f := r.MustRead(); f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
			t.Fatalf("after bad CRC: %+v %q", f.Header, f.Payload)
		}
		expectCount("checksum_mismatch", func() float64 { return failures("checksum_mismatch") }, b+1)
	})

	t.Run("bad compressed payloads are answered and counted", func(t *testing.T) {
		fBefore := failures("invalid_compressed_payload") + failures("decompressed_size_exceeded")
		for _, comp := range []wire.Compression{wire.CompressionGzip, wire.CompressionSnappy, wire.CompressionLZ4} {
			bInv := decomp()
			r := framework.Negotiate(t, addr, comp)
			garbage := []byte("this is certainly not a compressed CRQ2 payload..")
			h, err := r.Codec.AppendHeader(nil, wire.Header{Kind: wire.KindRequest, Command: listID, RequestID: 3}, garbage, 40)
			if err != nil {
				t.Fatal(err)
			}
			r.Conn.Write(append(h, garbage...))
			got := r.MustRead()
			e := framework.FrameErr(t, got)
			// Garbage is corrupt input, or (snappy: its first byte reads as a
			// varint length) a declaration beyond decoded_length.
			if got.Header.RequestID != 3 || (e.Code != "invalid_compressed_payload" && e.Code != "decompressed_size_exceeded") || e.Class != errcode.ClassValidation || e.Retryable {
				t.Fatalf("%v garbage: %v (id %d)", comp, e, got.Header.RequestID)
			}
			expectCount(fmt.Sprintf("%v decompression rejection", comp), decomp, bInv+1)

			// A bomb: the payload decompresses to more than its declared
			// decoded length.
			bBomb := decomp()
			big, err := wire.Compress(nil, comp, []byte(strings.Repeat("A", 64<<10)))
			if err != nil {
				t.Fatal(err)
			}
			h, err = r.Codec.AppendHeader(nil, wire.Header{Kind: wire.KindRequest, Command: listID, RequestID: 4}, big, 100)
			if err != nil {
				t.Fatal(err)
			}
			r.Conn.Write(append(h, big...))
			got = r.MustRead()
			if e := framework.FrameErr(t, got); got.Header.RequestID != 4 || e.Code != "decompressed_size_exceeded" {
				t.Fatalf("%v bomb: %v (id %d)", comp, e, got.Header.RequestID)
			}
			expectCount(fmt.Sprintf("%v bomb rejection", comp), decomp, bBomb+1)
			// The stream stayed aligned: a valid request still works.
			r.LastID = 4
			id := r.SendText("LIST")
			if f := r.MustRead(); f.Header.RequestID != id || f.Header.Status != wire.StatusOK {
				t.Fatalf("%v after bad payloads: %+v %q", comp, f.Header, f.Payload)
			}
		}
		// Every rejection is also a protocol failure, by the error's code.
		expectCount("compressed payload protocol failures", func() float64 {
			return failures("invalid_compressed_payload") + failures("decompressed_size_exceeded")
		}, fBefore+6)
	})

	t.Run("declared 200 MB frames cost bounded memory", func(t *testing.T) {
		// Each header declares 200 MB (inside the 267,108,864 bound, so it
		// passes the header check); the gateway must grow its buffer with the
		// bytes that arrive, not with the declaration.
		runtime.GC()
		heap0 := framework.Metric(t, maddr, "go_memstats_heap_inuse_bytes")
		const n = 20
		for i := 0; i < n; i++ {
			r := framework.Negotiate(t, addr, wire.CompressionNone)
			f := validList(1)
			binary.BigEndian.PutUint32(f[20:], 200<<20)
			binary.BigEndian.PutUint32(f[24:], 200<<20)
			r.Conn.Write(append(f[:32], make([]byte, 4096)...))
		}
		time.Sleep(300 * time.Millisecond)
		heap1 := framework.Metric(t, maddr, "go_memstats_heap_inuse_bytes")
		if grown := heap1 - heap0; grown > 96<<20 {
			t.Fatalf("heap grew by %.0f MiB for %d connections declaring 200 MB each", grown/(1<<20), n)
		}
		t.Logf("heap in use %.1f MiB -> %.1f MiB with %d pending 200 MB declarations", heap0/(1<<20), heap1/(1<<20), n)
	})

	t.Run("table-B (Python SDK) negotiation gets its own command ids", func(t *testing.T) {
		nc := framework.DialRaw(t, addr)
		fr := wire.NewFrameReader(nc)
		nc.Write(framework.NegotiationRequestFrame(t, wire.TableB, wire.NegotiationRequest{MinVersion: 1, MaxVersion: 3,
			Compressions: []wire.Compression{wire.CompressionGzip, wire.CompressionNone}}))
		f, err := framework.ReadNegotiationResponse(nc, fr, wire.TableB, 5*time.Second)
		if err != nil || f.Header.Command != wire.TableB.NegotiateID() || f.Header.Status != wire.StatusOK {
			t.Fatalf("table-B negotiation %+v %v", f.Header, err)
		}
		resp, err := wire.DecodeNegotiationResponse(f.Payload)
		if err != nil || resp.Version != 2 || resp.Compression != wire.CompressionGzip {
			t.Fatalf("negotiated %+v %v (want version 2 inside 1..3, gzip first preference)", resp, err)
		}
		r := framework.NewRawConn(t, nc, fr, wire.Codec{Table: wire.TableB, Compression: wire.CompressionGzip, Limits: wire.PublicLimits})
		id := r.SendText("FIND_COORDINATOR group=g")
		got := r.MustRead()
		if want, _ := wire.TableB.ID(wire.CmdFindCoordinator); got.Header.Command != want || got.Header.RequestID != id || got.Header.Status != wire.StatusOK {
			t.Fatalf("table-B reply %+v %q (want command id %d)", got.Header, got.Payload, want)
		}
	})

	t.Run("truncated header then hang up", func(t *testing.T) {
		r := framework.Negotiate(t, addr, wire.CompressionNone)
		r.Conn.Write(validList(1)[:10])
		r.Conn.Close()
	})

	// Every malformed connection is gone (closed by the server, or by the
	// subtest's cleanup): the gauge is back to baseline.
	framework.Eventually(t, 10*time.Second, "connections back to baseline", func() (bool, string) {
		v := framework.Metric(t, maddr, "strata_broker_client_connections_active")
		return v == baseline, fmt.Sprintf("%v, baseline %v", v, baseline)
	})
	// And memory: once the connections are gone their buffers are garbage.
	framework.Eventually(t, 10*time.Second, "heap back to baseline", func() (bool, string) {
		runtime.GC()
		v := framework.Metric(t, maddr, "go_memstats_heap_inuse_bytes")
		return v <= heapBase+32<<20, fmt.Sprintf("%.1f MiB, baseline %.1f MiB", v/(1<<20), heapBase/(1<<20))
	})
}

// wireSeries lists the strata_wire_* series for a failure message.
func wireSeries(t *testing.T, maddr string) []string {
	var out []string
	for k, v := range framework.Metrics(t, maddr) {
		if strings.HasPrefix(k, "strata_wire_") {
			out = append(out, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return out
}
