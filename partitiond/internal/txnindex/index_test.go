package txnindex

import (
	"errors"
	"testing"

	"github.com/strataio/strata/libs/errcode"
)

func wantCode(t *testing.T, what string, err error, c *errcode.Code) {
	t.Helper()
	if c == nil {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, *c) {
		t.Fatalf("%s: got %v, want %s", what, err, c.Name())
	}
}

func code(c errcode.Code) *errcode.Code { return &c }

// TestAddAndAppendRules walks the KIP-890 rules: a write needs the epoch
// added (or already open); stale epochs and older coordinators are refused.
func TestAddAndAppendRules(t *testing.T) {
	type step struct {
		op         string // add, append, marker-commit, marker-abort, check-append, check-marker
		epoch      int64
		coordEpoch int64
		off        uint64
		want       *errcode.Code
		dup        bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"write without add", []step{{op: "check-append", epoch: 1, want: code(errcode.TransactionPartitionNotAdded)}}},
		{"add then write", []step{{op: "add", epoch: 1}, {op: "check-append", epoch: 1}}},
		{"add is idempotent", []step{{op: "add", epoch: 1}, {op: "add", epoch: 1}, {op: "check-append", epoch: 1}}},
		{"write of another epoch", []step{{op: "add", epoch: 2}, {op: "check-append", epoch: 3, want: code(errcode.TransactionPartitionNotAdded)}}},
		{"write of an older epoch than added", []step{{op: "add", epoch: 2}, {op: "check-append", epoch: 1, want: code(errcode.StaleProducerEpoch)}}},
		{"open epoch writes without add after failover", []step{{op: "append", epoch: 4, off: 10}, {op: "check-append", epoch: 4}}},
		{"delayed write after the marker", []step{
			{op: "add", epoch: 1}, {op: "append", epoch: 1, off: 0}, {op: "marker-commit", epoch: 1, off: 5},
			{op: "check-append", epoch: 1, want: code(errcode.StaleProducerEpoch)},
		}},
		{"add of an ended epoch", []step{{op: "marker-abort", epoch: 3, off: 1}, {op: "add", epoch: 3, want: code(errcode.StaleProducerEpoch)}}},
		{"add of the next epoch", []step{{op: "marker-abort", epoch: 3, off: 1}, {op: "add", epoch: 4}, {op: "check-append", epoch: 4}}},
		{"add while an older epoch is open", []step{
			{op: "add", epoch: 1}, {op: "append", epoch: 1, off: 0},
			{op: "add", epoch: 2, want: code(errcode.TransactionStillOpen)},
		}},
		{"add older than the open epoch", []step{
			{op: "add", epoch: 5}, {op: "append", epoch: 5, off: 0},
			{op: "add", epoch: 4, want: code(errcode.StaleProducerEpoch)},
		}},
		{"add from an older coordinator", []step{{op: "add", epoch: 1, coordEpoch: 3}, {op: "add", epoch: 2, coordEpoch: 2, want: code(errcode.ProducerFenced)}}},
		{"marker repeat is a duplicate", []step{
			{op: "add", epoch: 1}, {op: "append", epoch: 1, off: 0}, {op: "marker-commit", epoch: 1, off: 1},
			{op: "check-marker", epoch: 1, dup: true},
		}},
		{"marker of an older epoch", []step{{op: "marker-commit", epoch: 2, off: 1}, {op: "check-marker", epoch: 1, want: code(errcode.StaleProducerEpoch)}}},
		{"marker older than the open epoch", []step{{op: "append", epoch: 3, off: 0}, {op: "check-marker", epoch: 2, want: code(errcode.StaleProducerEpoch)}}},
		{"marker from an older coordinator", []step{{op: "add", epoch: 1, coordEpoch: 5}, {op: "check-marker", epoch: 1, coordEpoch: 4, want: code(errcode.ProducerFenced)}}},
		{"marker for an unknown producer", []step{{op: "check-marker", epoch: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := New()
			for i, s := range c.steps {
				what := c.name + " step " + s.op
				_ = i
				switch s.op {
				case "add":
					wantCode(t, what, x.Add("p", s.epoch, s.coordEpoch), s.want)
				case "append":
					x.Appended("p", s.epoch, s.off)
				case "marker-commit", "marker-abort":
					x.Marker("p", s.epoch, s.coordEpoch, s.op == "marker-commit", s.off)
				case "check-append":
					wantCode(t, what, x.CheckAppend("p", s.epoch), s.want)
				case "check-marker":
					dup, err := x.CheckMarker("p", s.epoch, s.coordEpoch)
					wantCode(t, what, err, s.want)
					if dup != s.dup {
						t.Fatalf("%s: duplicate %v, want %v", what, dup, s.dup)
					}
				}
			}
		})
	}
}

func TestLSOAndAbortedIndex(t *testing.T) {
	x := New()
	if got := x.LSO(10); got != 10 {
		t.Fatalf("empty LSO %d", got)
	}
	x.Appended("a", 1, 3)
	x.Appended("a", 1, 4) // a second batch does not move the first offset
	x.Appended("b", 7, 6)
	if got := x.LSO(10); got != 3 {
		t.Fatalf("LSO %d, want 3", got)
	}
	if got := x.LSO(2); got != 2 {
		t.Fatalf("LSO above the HWM: %d", got)
	}
	x.Marker("a", 1, 0, false, 8) // abort a at 8
	// The marker is not below the HWM yet: a still bounds the LSO.
	if got := x.LSO(8); got != 3 {
		t.Fatalf("LSO with the marker at the HWM: %d, want 3", got)
	}
	if got := x.LSO(9); got != 6 {
		t.Fatalf("LSO once the marker is below the HWM: %d, want 6", got)
	}
	x.Marker("b", 7, 0, true, 9)
	if got := x.LSO(20); got != 20 {
		t.Fatalf("LSO with everything decided: %d", got)
	}
	for off, want := range map[uint64]bool{2: false, 3: true, 5: true, 8: true, 9: false} {
		if got := x.Aborted([]byte("a"), off); got != want {
			t.Errorf("Aborted(a, %d) = %v", off, got)
		}
	}
	if x.Aborted([]byte("b"), 6) {
		t.Error("committed b reported aborted")
	}
	// A second aborted transaction of a.
	x.Appended("a", 2, 12)
	x.Marker("a", 2, 0, false, 14)
	if !x.Aborted([]byte("a"), 13) || x.Aborted([]byte("a"), 10) {
		t.Error("second aborted range")
	}
	x.TrimBelow(9)
	if rs := x.AbortedRanges("a"); len(rs) != 1 || rs[0].First != 12 {
		t.Fatalf("after trim: %+v", rs)
	}
	x.TrimBelow(100)
	if rs := x.AbortedRanges("a"); len(rs) != 0 {
		t.Fatalf("after full trim: %+v", rs)
	}
	if o := x.OpenTxns(); len(o) != 0 {
		t.Fatalf("open %+v", o)
	}
}

// TestCheckpointRoundTrip: an index decoded from its checkpoint answers as
// the original (LSO, aborted ranges, open transactions, the write rules),
// except for registrations, which are memory only.
func TestCheckpointRoundTrip(t *testing.T) {
	x := New()
	x.Appended("p1", 1, 10)
	x.Marker("p1", 1, 3, false, 14) // aborted [10,14]
	x.Appended("p1", 2, 20)
	x.Marker("p1", 2, 3, true, 22)
	x.Appended("p2", 5, 30) // open
	if err := x.Add("p3", 1, 0); err != nil {
		t.Fatal(err)
	}
	b := x.Encode()
	y, err := Decode(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if got := y.Encode(); string(got) != string(b) {
		t.Fatalf("re-encoded %s, want %s", got, b)
	}
	for _, hwm := range []uint64{15, 23, 40} {
		if x.LSO(hwm) != y.LSO(hwm) {
			t.Fatalf("LSO(%d) %d vs %d", hwm, x.LSO(hwm), y.LSO(hwm))
		}
	}
	for off := uint64(0); off < 40; off++ {
		if x.Aborted([]byte("p1"), off) != y.Aborted([]byte("p1"), off) {
			t.Fatalf("aborted at %d differs", off)
		}
	}
	if err := y.CheckAppend("p1", 2); err == nil {
		t.Fatal("ended epoch accepted after decode")
	}
	if err := y.CheckAppend("p2", 5); err != nil {
		t.Fatalf("open epoch refused after decode: %v", err)
	}
	if err := y.CheckAppend("p3", 1); err == nil {
		t.Fatal("a registration survived the checkpoint")
	}
	if o := y.OpenTxns(); len(o) != 1 || o[0].ProducerID != "p2" || o[0].First != 30 {
		t.Fatalf("open %+v", o)
	}
}

func TestCheckpointDecodeRefuses(t *testing.T) {
	for _, bad := range []string{
		``, `{}`, `{"v":2,"producers":[],"aborted":[],"done":[]}`,
		`{"v":1,"producers":[],"aborted":[],"done":[]} x`,
		`{"v":1,"producers":[],"aborted":[],"done":[],"extra":1}`,
		`{"v":1,"producers":[{"id":"b"},{"id":"a"}],"aborted":[],"done":[]}`,
		`{"v":1,"producers":[{"id":"a","open_epoch":3}],"aborted":[],"done":[]}`,
		`{"v":1,"producers":[],"aborted":[{"producer":"a","epoch":1,"first":5,"last":4}],"done":[]}`,
		`{"v":1,"producers":[],"aborted":[{"producer":"a","epoch":1,"first":1,"last":4},{"producer":"a","epoch":2,"first":4,"last":6}],"done":[]}`,
		`{"v":1,"producers":[],"aborted":[],"done":[{"first":5,"marker":4}]}`,
	} {
		if _, err := Decode([]byte(bad)); errcode.CodeOf(err) != errcode.MalformedInput.Name() {
			t.Errorf("%s: %v, want malformed_input", bad, err)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to an
// index that decodes again to the same encoding.
func FuzzDecode(f *testing.F) {
	x := New()
	x.Appended("p1", 1, 10)
	x.Marker("p1", 1, 3, false, 14)
	x.Appended("p2", 5, 30)
	f.Add(x.Encode())
	f.Add([]byte(`{"v":1,"producers":[],"aborted":[],"done":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		y, err := Decode(b)
		if err != nil {
			return
		}
		e := y.Encode()
		z, err := Decode(e)
		if err != nil {
			t.Fatalf("re-encoded checkpoint refused: %v\n%s", err, e)
		}
		if string(z.Encode()) != string(e) {
			t.Fatal("encoding not stable")
		}
	})
}
