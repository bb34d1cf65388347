package wire

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/strataio/strata/libs/errcode"
)

func TestStreamControlBuildAndParse(t *testing.T) {
	cases := []struct {
		sc   StreamControl
		text string
	}{
		{StreamControl{Reason: CloseStopped, Offset: 42, HasOffset: true}, "STREAM_CONTROL type=CLOSE reason=stopped offset=42"},
		{StreamControl{Type: "close", Reason: CloseTimeout}, "STREAM_CONTROL type=CLOSE reason=timeout"},
		{StreamControl{Reason: CloseOffsetOutOfRange, Offset: 3, HasOffset: true, Requested: 3, Earliest: 10, Latest: 12, HasRange: true},
			"STREAM_CONTROL type=CLOSE reason=offset_out_of_range offset=3 requested=3 earliest=10 latest=12"},
	}
	for _, tc := range cases {
		got, err := tc.sc.AppendTo(nil)
		if err != nil || string(got) != tc.text {
			t.Fatalf("AppendTo = %q, %v", got, err)
		}
		if !IsStreamControl(got) {
			t.Fatal("IsStreamControl")
		}
		back, err := ParseStreamControl(got)
		if err != nil {
			t.Fatal(err)
		}
		want := tc.sc
		want.Type = StreamControlClose
		if diff := cmp.Diff(want, back); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	}
	// Order-independent, case-insensitive type, unknown keys kept.
	sc, err := ParseStreamControl([]byte("  STREAM_CONTROL offset=7 reason=removed type=close extra=x\n"))
	if err != nil || sc.Type != "CLOSE" || sc.Reason != "removed" || sc.Offset != 7 || len(sc.Extra) != 1 {
		t.Fatalf("%+v, %v", sc, err)
	}
	if IsStreamControl([]byte("CBV2....")) || !IsStreamControl([]byte("\n STREAM_CONTROL type=CLOSE")) {
		t.Fatal("IsStreamControl detection")
	}
}

func TestStreamControlRejectsMalformedText(t *testing.T) {
	for _, text := range []string{
		"", "STREAM_CONTROLX type=CLOSE reason=stopped", "CONTROL type=CLOSE",
		"STREAM_CONTROL reason=stopped", "STREAM_CONTROL type=CLOSE", "STREAM_CONTROL type=CLOSE reason=stopped offset=-1",
		"STREAM_CONTROL type=CLOSE reason=stopped offset=+1", "STREAM_CONTROL type=CLOSE reason=stopped offset=x",
		"STREAM_CONTROL type=CLOSE reason=stopped offset=18446744073709551616", "STREAM_CONTROL type=CLOSE reason=stopped bare",
		"STREAM_CONTROL type=CLOSE reason=a reason=b", "STREAM_CONTROL type=CLOSE reason=offset_out_of_range requested=1",
		"STREAM_CONTROL type= reason=stopped", "STREAM_CONTROL type=CLOSE reason=stopped x=1 x=2",
	} {
		_, err := ParseStreamControl([]byte(text))
		wantCode(t, err, errcode.DecodeFailed, "")
	}
	for name, sc := range map[string]StreamControl{
		"UnknownReason": {Reason: "bored"},
		"RangeWrongWhy": {Reason: CloseStopped, HasRange: true},
		"SpaceInType":   {Type: "A B", Reason: "x"},
	} {
		if _, err := sc.AppendTo(nil); err == nil {
			t.Errorf("%s: built invalid control text", name)
		}
	}
}

// ackJSON mirrors the Go broker's AckResponse struct tags, so the hand-written
// encoder and parser can be compared with encoding/json.
type ackJSON struct {
	Status        string `json:"status"`
	LastOffset    uint64 `json:"last_offset"`
	ProducerEpoch int64  `json:"producer_epoch"`
	ProducerID    string `json:"producer_id"`
	SeqStart      uint64 `json:"seq_start"`
	SeqEnd        uint64 `json:"seq_end"`
	Leader        string `json:"leader,omitempty"`
	Error         string `json:"error,omitempty"`
}

func TestAckJSONMatchesEncodingJSON(t *testing.T) {
	cases := []AckResponse{
		{Status: "OK", LastOffset: 18446744073709551615, ProducerEpoch: -9223372036854775808, ProducerID: "p-1", SeqStart: 1, SeqEnd: 2},
		{Status: "OK", ProducerID: "<script>&\"quote\"\\ \n\t\r\b\f\x01\x7f é 💡 \u2028\u2029"},
		{Status: "ERROR", Leader: "127.0.0.1:9000", Error: "NOT_LEADER leader=127.0.0.1:9000"},
		{Status: "OK", ProducerID: "bad utf8 \xff\xfe end"},
	}
	for _, a := range cases {
		got := a.AppendJSON(nil)
		want, err := json.Marshal(ackJSON(a))
		if err != nil || string(got) != string(want) {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
		back, err := ParseAck(got)
		if err != nil {
			t.Fatal(err)
		}
		var std ackJSON
		json.Unmarshal(got, &std)
		if back != AckResponse(std) {
			t.Fatalf("ParseAck %+v, encoding/json %+v", back, std)
		}
	}
	if testing.AllocsPerRun(100, func() {
		buf := make([]byte, 0, 256)
		_ = cases[0].AppendJSON(buf)
	}) > 1 {
		t.Fatal("AppendJSON allocates")
	}
}

func TestParseAckAcceptsSDKShapes(t *testing.T) {
	a, err := ParseAck([]byte(` {"status":"OK","extra":{"nested":[1,{"a":"}"}]},"last_offset":5,"producer_epoch":null,"seq_end":9} `))
	if err != nil || a.Status != "OK" || a.LastOffset != 5 || a.SeqEnd != 9 || a.Failure() != nil {
		t.Fatalf("%+v, %v", a, err)
	}
	a, err = ParseAck([]byte(`{"status":"OK","producer_id":"\u00e9\ud83d\udca1\ud800x"}`))
	if err != nil || a.ProducerID != "é💡\uFFFDx" {
		t.Fatalf("escapes: %q, %v", a.ProducerID, err)
	}
	a, err = ParseAck([]byte("ERROR: NOT_LEADER class=routing retryable=true leader=h:9000"))
	if err != nil || a.Status != "ERROR" {
		t.Fatalf("%+v, %v", a, err)
	}
	if f := a.Failure(); f == nil || f.Code != "NOT_LEADER" || f.Field("leader") != "h:9000" || !f.Retryable {
		t.Fatalf("failure %v", f)
	}
	a, _ = ParseAck([]byte(`{"status":"ERROR","error":"stale_producer_epoch producer=p current=3 got=2"}`))
	if f := a.Failure(); f == nil || f.Code != "stale_producer_epoch" || f.Class != errcode.ClassFencing {
		t.Fatalf("failure %v", f)
	}
	for _, bad := range []string{
		"", "OK", "[1]", `{"status":1}`, `{"last_offset":-1}`, `{"last_offset":1.5}`, `{"last_offset":"1"}`,
		`{"producer_epoch":9223372036854775808}`, `{"status":"OK"`, `{"status":"OK"} x`,
	} {
		_, err := ParseAck([]byte(bad))
		wantCode(t, err, errcode.DecodeFailed, "")
	}
}

func TestOffsetListParsing(t *testing.T) {
	got, err := ParseOffsetList(" P0:10,P7:0,P2147483647:18446744073709551615 ")
	want := []PartitionOffset{{0, 10}, {7, 0}, {2147483647, 18446744073709551615}}
	if err != nil || !cmp.Equal(got, want) {
		t.Fatalf("%v, %v", got, err)
	}
	out, err := AppendOffsetList(nil, want)
	if err != nil || string(out) != "P0:10,P7:0,P2147483647:18446744073709551615" {
		t.Fatalf("%s, %v", out, err)
	}
	if p, dup := DuplicatePartition([]PartitionOffset{{1, 1}, {2, 1}, {1, 5}}); !dup || p != 1 {
		t.Fatal("duplicate not found")
	}
	if _, dup := DuplicatePartition(want); dup {
		t.Fatal("false duplicate")
	}
	_, err = ParseOffsetList("  ")
	wantCode(t, err, errcode.NoValidOffsets, "")
	cases := map[string]string{
		"P0:1,":                   "bad_entry",
		"p0:1":                    "bad_entry",
		"P:1":                     "bad_entry",
		"0:1":                     "bad_entry",
		"P0":                      "bad_entry",
		"P0:1 ,P1:2":              "bad_number",
		"P-1:1":                   "bad_number",
		"P+1:1":                   "bad_number",
		"P1:-1":                   "bad_number",
		"P1:":                     "bad_number",
		"P1:2:3":                  "bad_number",
		"P2147483648:1":           "bad_partition",
		"P1:18446744073709551616": "bad_offset",
	}
	for in, reason := range cases {
		_, err := ParseOffsetList(in)
		wantCode(t, err, errcode.InvalidBatchCommitEntry, reason)
	}
	many := make([]PartitionOffset, MaxOffsetEntries+1)
	for i := range many {
		many[i].Partition = int32(i)
	}
	long, err := AppendOffsetList(nil, many)
	wantCode(t, err, errcode.InvalidBatchCommitEntry, "too_many_entries")
	long, _ = AppendOffsetList(nil, many[:MaxOffsetEntries])
	if _, err := ParseOffsetList(string(long) + ",P9999:1"); err == nil {
		t.Fatal("1,025 entries accepted")
	}
	if _, err := ParseOffsetList(string(long)); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendOffsetList(nil, []PartitionOffset{{-1, 0}}); err == nil {
		t.Fatal("negative partition written")
	}
}

func TestOKTextBuildAndParse(t *testing.T) {
	b := AppendOK(nil)
	b = AppendOKInt(b, "generation", 3)
	b = AppendOKField(b, "member", "m-1")
	b = AppendOKList(b, "assignments", []int32{0, 1, 2})
	b = AppendOKBool(b, "resumed", true)
	b = AppendOKUint(b, "offset", 18446744073709551615)
	if string(b) != "OK generation=3 member=m-1 assignments=[0 1 2] resumed=true offset=18446744073709551615" {
		t.Fatalf("%s", b)
	}
	r, err := ParseOK(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if r.Value("assignments") != "[0 1 2]" || r.Value("member") != "m-1" || r.Value("offset") != "18446744073709551615" {
		t.Fatalf("%+v", r)
	}
	list, err := ParseIntList(r.Value("assignments"))
	if err != nil || !cmp.Equal(list, []int32{0, 1, 2}) {
		t.Fatalf("%v, %v", list, err)
	}
	if l, err := ParseIntList("[]"); err != nil || len(l) != 0 {
		t.Fatal("empty list")
	}
	if string(AppendOKList(nil, "a", nil)) != " a=[]" {
		t.Fatal("empty list text")
	}
	r, err = ParseOK(`OK cluster={"nodes": [{"id": "a b"}], "s": "}"} topics= snapshot=null`)
	if err != nil || r.Value("cluster") != `{"nodes": [{"id": "a b"}], "s": "}"}` || r.Value("topics") != "" || r.Value("snapshot") != "null" {
		t.Fatalf("%+v, %v", r, err)
	}
	if r, err := ParseOK("OK"); err != nil || len(r.Fields) != 0 {
		t.Fatal("bare OK")
	}
	for _, bad := range []string{"", "OKAY", "ERROR: x", "OK word", "OK a=1 a=2", "OK A=1", "OK x=[1 2", "OK x=[1]y", "OK =1"} {
		_, err := ParseOK(bad)
		wantCode(t, err, errcode.DecodeFailed, "")
	}
	for _, bad := range []string{"0 1", "[0,1]", "[a]", "[+1]", "[2147483648]"} {
		if _, err := ParseIntList(bad); err == nil {
			t.Errorf("ParseIntList(%q) accepted", bad)
		}
	}
}
