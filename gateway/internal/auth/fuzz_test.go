package auth

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FuzzPreAuth drives what an unauthenticated client can reach on a
// connection with enable_sasl on: arbitrary bytes after negotiation, read
// as frames under the pre-auth limits, decoded as requests and passed to
// the guard. Properties: nothing panics; no accepted frame exceeds
// wire.PreAuthMaxPayload (checked on the header, before the payload is
// read); every refusal is a typed error; and a protected command never
// runs on an unauthenticated connection.
func FuzzPreAuth(f *testing.F) {
	a := newTestAuth(f, true, nil)
	a.limiter = newLimiter(1, time.Hour) // after one failure, no more PBKDF2 runs: fuzzing stays fast
	for _, seed := range preAuthSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, stream []byte) {
		g := NewGuard(a, fakeTopics{"t": {AuthPolicy: "acl", ReadACL: "all", WriteACL: "all"}})
		s := NewSession("127.0.0.1:7")
		codec := wire.Codec{Table: wire.TableA, Limits: wire.PreAuthLimits}
		fr := wire.NewFrameReader(bytes.NewReader(stream))
		for range 16 {
			h, err := fr.ReadHeader(&codec)
			if err != nil {
				return // the connection closes
			}
			if h.EncodedLength > wire.PreAuthMaxPayload || h.DecodedLength > wire.PreAuthMaxPayload {
				t.Fatalf("pre-auth header accepted %d/%d bytes", h.EncodedLength, h.DecodedLength)
			}
			fr, err := fr.ReadPayload(&codec, h)
			if err != nil {
				if _, typed := errcode.As(err); !typed {
					return // truncated: the connection closes
				}
				continue // CRC or decompression: answered, the connection goes on
			}
			cmd, ok := codec.Table.ByID(h.Command)
			if !ok || cmd.IsInternal() {
				continue // refused by the table before the guard
			}
			var req wire.Request
			var batch []byte
			if wire.IsBatch(fr.Payload) {
				batch = fr.Payload
			} else if err := req.Decode(fr.Payload); err != nil {
				continue
			}
			wasAuthed := s.Authenticated()
			ru, _ := RuleFor(cmd, &req)
			inline := req.Has("principal") || req.Has("auth_token")
			ran := false
			_, err = g.Check(context.Background(), s, cmd, &req, batch, func(context.Context) ([]byte, error) {
				ran = true
				return nil, nil
			})
			if err != nil {
				if _, typed := errcode.As(err); !typed {
					t.Fatalf("%s: untyped error %v", cmd, err)
				}
			}
			if ran && !ru.Open && !wasAuthed && !(inline && s.Authenticated()) {
				t.Fatalf("%s ran on an unauthenticated connection", cmd)
			}
		}
	})
}

// preAuthSeeds are frame streams an unauthenticated client might send:
// AUTH (right and wrong), protected commands bare and with inline
// credentials, a batch, and headers declaring oversized payloads.
func preAuthSeeds(t testing.TB) [][]byte {
	codec := wire.Codec{Table: wire.TableA}
	frame := func(text string) []byte {
		cmd, req, err := wire.ParseText(text)
		if err != nil {
			t.Fatal(err)
		}
		p, err := req.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := wire.TableA.ID(cmd)
		b, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: id, RequestID: 1}, p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	join := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	batch := wire.Batch{BatchHeader: wire.BatchHeader{Topic: "t", Acks: "1"}, Records: []wire.Record{{Topic: "t", Payload: []byte("x")}}}
	bp, err := batch.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := wire.TableA.ID(wire.CmdPublish)
	bf, err := codec.AppendFrame(nil, wire.Header{Kind: wire.KindRequest, Command: pub, RequestID: 2}, bp)
	if err != nil {
		t.Fatal(err)
	}
	huge := wire.Header{Kind: wire.KindRequest, Flags: wire.FlagCompressionExplicit, Command: pub, RequestID: 3,
		EncodedLength: 2 << 30, DecodedLength: 2 << 30}.AppendTo(nil)
	justOver := wire.Header{Kind: wire.KindRequest, Flags: wire.FlagCompressionExplicit, Command: pub, RequestID: 4,
		EncodedLength: wire.PreAuthMaxPayload + 1, DecodedLength: wire.PreAuthMaxPayload + 1}.AppendTo(nil)
	return [][]byte{
		frame("HELP"),
		join(frame("CREATE topic=t"), frame("LIST")),
		join(frame("AUTH principal=all token=wrong"), frame("DELETE topic=t")),
		join(frame("AUTH principal=all token="+testToken+"all"), frame("DELETE topic=t"), bf),
		frame("PUBLISH topic=t producerId=p principal=p-topic.write auth_token=" + testToken + "p-topic.write message=x"),
		frame("CONSUME topic=t* partition=0 offset=0 member=m principal=all auth_token=nope"),
		join(bf, frame("EXIT")),
		huge,
		justOver,
	}
}

// TestPreAuthSeedCorpus keeps testdata/fuzz/FuzzPreAuth holding the seeds
// (go test replays them; -update rewrites them).
func TestPreAuthSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzPreAuth")
	for i, seed := range preAuthSeeds(t) {
		path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", seed)
		got, err := os.ReadFile(path)
		if err == nil && string(got) == want {
			continue
		}
		if !*update {
			t.Fatalf("%s is missing or stale; rewrite with go test -run TestPreAuthSeedCorpus -update", path)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
