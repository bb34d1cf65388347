package framework

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// TxnReplayProxy is a Wire v2 TCP proxy for transactional clients that
// injects delayed messages of old producer epochs (the KIP-890 threat: a
// produce, commit or abort of an earlier transaction arriving late). It
// forwards every byte both ways unchanged and keeps a copy of every
// sample-th TXN_PUBLISH and of every END_TXN a client sends (uncompressed
// frames, table A). Replay sends the held frames whose epoch has since
// been overtaken — the proxy saw a later epoch of the same transactional_id
// and producerId, which only a durable INIT_PRODUCER_ID can have issued —
// on a fresh connection, and tallies the answers: each must be refused with
// a fencing error (stale_producer_epoch, producer_fenced). A retryable
// answer (a coordinator being killed) puts the frame back for a later
// replay.
type TxnReplayProxy struct {
	ln     net.Listener
	target string
	sample int
	negot  []byte // the negotiation frame of a replay connection

	mu       sync.Mutex
	held     []heldFrame
	maxEpoch map[string]epochKey // transactional_id → highest session seen
	seenPubs int
	conns    map[net.Conn]struct{}
	stats    ReplayStats
	closed   bool
	wg       sync.WaitGroup
}

// ReplayStats counts what Replay did.
type ReplayStats struct {
	Held     int            // frames copied
	Replayed int            // frames sent again (each counted once per send)
	Refused  int            // answered with a fencing error
	Accepted []string       // answered OK: an old-epoch message got through
	Other    map[string]int // other answers by code (retried when retryable)
	Dropped  int            // frames given up: refused with a non-retryable error other than fencing
	Pending  int            // frames still held
}

type epochKey struct {
	producerID string
	epoch      int64
}

type heldFrame struct {
	cmd     wire.Command
	payload []byte
	tid     string
	session epochKey
}

// StartTxnReplayProxy listens on a loopback port and forwards to target;
// every sample-th TXN_PUBLISH is held (1: all). It stops at cleanup.
func StartTxnReplayProxy(t testing.TB, target string, sample int) *TxnReplayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TxnReplayProxy{negot: wiretest.NegotiationFrame(t, wire.CompressionNone), ln: ln, target: target, sample: max(sample, 1), maxEpoch: map[string]epochKey{},
		conns: map[net.Conn]struct{}{}, stats: ReplayStats{Other: map[string]int{}}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the address clients dial instead of the gateway's.
func (p *TxnReplayProxy) Addr() string { return p.ln.Addr().String() }

// Stats returns a copy of the tallies.
func (p *TxnReplayProxy) Stats() ReplayStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Pending = len(p.held)
	s.Accepted = append([]string(nil), s.Accepted...)
	s.Other = map[string]int{}
	for k, v := range p.stats.Other {
		s.Other[k] = v
	}
	return s
}

// Close stops accepting, closes every proxied connection and waits for the
// proxy's goroutines.
func (p *TxnReplayProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *TxnReplayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *TxnReplayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *TxnReplayProxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			cc.Close()
			continue
		}
		if !p.track(cc) || !p.track(sc) {
			cc.Close()
			sc.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(cc, sc)
			p.untrack(cc)
			p.untrack(sc)
		}()
		go func() {
			defer p.wg.Done()
			p.forward(cc, sc)
			p.untrack(cc)
			p.untrack(sc)
		}()
	}
}

// forward copies client frames to the server, frame by frame, looking at
// each one.
func (p *TxnReplayProxy) forward(cc, sc net.Conn) {
	r := bufio.NewReader(cc)
	hdr := make([]byte, wire.HeaderSize)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[20:24])
		if n > 64<<20 {
			return
		}
		frame := make([]byte, wire.HeaderSize+int(n))
		copy(frame, hdr)
		if _, err := io.ReadFull(r, frame[wire.HeaderSize:]); err != nil {
			return
		}
		if _, err := sc.Write(frame); err != nil {
			return
		}
		p.inspect(frame)
	}
}

// inspect notes the session of a transactional request and holds a copy
// of the frames to replay.
func (p *TxnReplayProxy) inspect(frame []byte) {
	h, err := wire.ParseHeader(frame[:wire.HeaderSize])
	if err != nil || h.Kind != wire.KindRequest || h.Compression() != wire.CompressionNone {
		return
	}
	cmd, ok := wire.TableA.ByID(h.Command)
	if !ok || (cmd != wire.CmdTxnPublish && cmd != wire.CmdEndTxn && cmd != wire.CmdBeginTxn && cmd != wire.CmdSendOffsetsToTxn) {
		return
	}
	payload := frame[wire.HeaderSize:]
	req, err := wire.DecodeRequest(payload)
	if err != nil {
		return
	}
	epoch, err := strconv.ParseInt(req.Value("epoch"), 10, 64)
	if err != nil {
		return
	}
	tid, s := req.Value("transactional_id"), epochKey{producerID: req.Value("producerId"), epoch: epoch}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur, ok := p.maxEpoch[tid]; !ok || cur.producerID != s.producerID || cur.epoch < s.epoch {
		p.maxEpoch[tid] = s
	}
	hold := cmd == wire.CmdEndTxn
	if cmd == wire.CmdTxnPublish {
		p.seenPubs++
		hold = p.seenPubs%p.sample == 0
	}
	if hold {
		p.held = append(p.held, heldFrame{cmd: cmd, payload: append([]byte(nil), payload...), tid: tid, session: s})
		p.stats.Held++
	}
}

// Replay sends every held frame whose epoch is overtaken on one fresh
// connection and tallies the answers; it returns how many it sent.
func (p *TxnReplayProxy) Replay() (int, error) {
	p.mu.Lock()
	var due, keep []heldFrame
	for _, f := range p.held {
		cur := p.maxEpoch[f.tid]
		if cur.producerID == f.session.producerID && cur.epoch > f.session.epoch {
			due = append(due, f)
		} else {
			keep = append(keep, f)
		}
	}
	p.held = keep
	p.mu.Unlock()
	if len(due) == 0 {
		return 0, nil
	}
	back := func(fs []heldFrame) {
		p.mu.Lock()
		p.held = append(p.held, fs...)
		p.mu.Unlock()
	}
	nc, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		back(due)
		return 0, err
	}
	defer nc.Close()
	if _, err := nc.Write(p.negot); err != nil {
		back(due)
		return 0, err
	}
	fr := wire.NewFrameReader(bufio.NewReader(nc))
	nf, err := ReadNegotiationResponse(nc, fr, wire.TableA, 10*time.Second)
	if err != nil || nf.Header.Status == wire.StatusError {
		back(due)
		return 0, fmt.Errorf("negotiation: %v (status %v)", err, nf.Header.Status)
	}
	codec := wire.Codec{Table: wire.TableA, Compression: wire.CompressionNone, Limits: wire.PublicLimits}
	sent := 0
	for i, f := range due {
		id, _ := wire.TableA.ID(f.cmd)
		buf, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: uint64(i + 1)}, f.payload)
		if err != nil {
			return sent, err
		}
		if _, err := nc.Write(buf); err != nil {
			back(due[i:])
			return sent, err
		}
		sent++
		ans, err := readAnswer(nc, fr, &codec, uint64(i+1))
		p.mu.Lock()
		p.stats.Replayed++
		switch {
		case err != nil:
			p.stats.Other["transport"]++
			p.mu.Unlock()
			back(due[i:])
			return sent, err
		case ans == nil:
			p.stats.Accepted = append(p.stats.Accepted, fmt.Sprintf("%s %s epoch %d", f.cmd, f.tid, f.session.epoch))
		case ans.Class == errcode.ClassFencing:
			p.stats.Refused++
		default:
			p.stats.Other[ans.Code]++
			if ans.Retryable { // a coordinator or leader moving: later
				p.held = append(p.held, f)
			} else {
				p.stats.Dropped++
			}
		}
		p.mu.Unlock()
	}
	return sent, nil
}

// readAnswer reads frames until the final answer to request id: nil for
// OK, the typed error of an ERROR frame.
func readAnswer(nc net.Conn, fr *wire.FrameReader, codec *wire.Codec, id uint64) (*errcode.Error, error) {
	for {
		_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := fr.ReadFrame(codec)
		if err != nil {
			return nil, err
		}
		if f.Header.RequestID != id {
			continue
		}
		if f.Header.Status == wire.StatusError {
			e, err := wire.DecodeError(f.Payload)
			if err != nil {
				return nil, err
			}
			return e, nil
		}
		if f.Header.Kind == wire.KindResponse {
			return nil, nil
		}
		return nil, errors.New("unexpected frame kind " + f.Header.Kind.String())
	}
}
