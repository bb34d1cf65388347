package param

import (
	"strings"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// The missing codes are the reference broker's missing_<snake_case param>
// (producerId → missing_producer_id), validation class, not retryable.
func TestMissingCodesFollowTheReferenceNames(t *testing.T) {
	for _, n := range Names {
		var want strings.Builder
		want.WriteString("missing_")
		for i, c := range n.Key {
			if c >= 'A' && c <= 'Z' {
				if i > 0 {
					want.WriteByte('_')
				}
				c += 'a' - 'A'
			}
			want.WriteRune(c)
		}
		if n.Missing.Name() != want.String() || n.Missing.Class() != errcode.ClassValidation || n.Missing.Retryable() {
			t.Errorf("%s: code %s class %v retryable %v, want %s validation", n.Key, n.Missing.Name(), n.Missing.Class(), n.Missing.Retryable(), want.String())
		}
	}
}

func request(t *testing.T, text string) (wire.Command, *wire.Request) {
	t.Helper()
	cmd, r, err := wire.ParseText(text)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, &r
}

// The first failure wins and later reads change nothing, so the order of
// the reads is the order of the checks.
func TestReaderKeepsTheFirstFailure(t *testing.T) {
	for _, tc := range []struct {
		text string
		code string
		kv   []string
	}{
		{"COMMIT_OFFSET partition=x", "missing_topic", []string{"param", "topic"}},
		{"COMMIT_OFFSET topic=t partition=-1", "invalid_partition", []string{"command", "COMMIT_OFFSET", "partition", "-1"}},
		{"COMMIT_OFFSET topic=t partition=1 group=g offset=x", "invalid_parameter", []string{"param", "offset", "value", "x"}},
		{"COMMIT_OFFSET topic=t partition=1 group=g offset=1 member=m", "missing_generation", []string{"command", "COMMIT_OFFSET"}},
		{"COMMIT_OFFSET topic=t partition=1 group=g offset=1 member=m generation=3", "", nil},
	} {
		cmd, r := request(t, tc.text)
		p := Read(r, cmd)
		topic, part, group := p.Required(Topic), p.Partition(), p.Required(Group)
		offset, member, gen := p.RequiredUint(Offset), p.Required(Member), p.Generation()
		p.Check(errcode.Internal.New("a later check"))
		if tc.code == "" {
			if p.Err() == nil || errcode.CodeOf(p.Err()) != "internal_error" ||
				topic != "t" || part != 1 || group != "g" || offset != 1 || member != "m" || gen != 3 {
				t.Errorf("%s: %q %d %q %d %q %d, %v", tc.text, topic, part, group, offset, member, gen, p.Err())
			}
			continue
		}
		e, ok := errcode.As(p.Err())
		if !ok || e.Code != tc.code {
			t.Errorf("%s: %v, want %s", tc.text, p.Err(), tc.code)
			continue
		}
		for i := 0; i+1 < len(tc.kv); i += 2 {
			if e.Field(tc.kv[i]) != tc.kv[i+1] {
				t.Errorf("%s: field %s = %q (%v)", tc.text, tc.kv[i], e.Field(tc.kv[i]), e)
			}
		}
	}
}

func TestRequiredShapes(t *testing.T) {
	cmd, r := request(t, "PUBLISH acks=1 message=")
	p := Read(r, cmd)
	if msg := p.Present(Message); msg != "" || p.Err() != nil {
		t.Fatalf("an empty message is present: %q %v", msg, p.Err())
	}
	p.RequiredNamingCommand(Topic)
	if e, _ := errcode.As(p.Err()); e == nil || e.Code != "missing_topic" || e.Field("command") != "PUBLISH" || e.Field("param") != "" {
		t.Fatalf("topic naming the command: %v", p.Err())
	}
	p = Read(r, cmd)
	p.Required(ProducerID)
	if e, _ := errcode.As(p.Err()); e == nil || e.Code != "missing_producer_id" || e.Field("param") != "producerId" || e.Message != "producerId is required" {
		t.Fatalf("producerId: %v", p.Err())
	}
	p = Read(r, cmd)
	if n := p.OptInt("batch", 7, 1, 10); n != 7 || p.Err() != nil {
		t.Fatalf("absent OptInt = %d, %v", n, p.Err())
	}
	_, r = request(t, "CONSUME batch=11 flag=maybe")
	p = Read(r, cmd)
	if _, ok := p.OptBool("flag", false); ok || errcode.CodeOf(p.Err()) != "invalid_parameter" {
		t.Fatalf("bad bool: %v", p.Err())
	}
	p = Read(r, cmd)
	if p.OptInt("batch", 7, 1, 10); !strings.Contains(p.Err().Error(), "must be an integer in [1, 10]") {
		t.Fatalf("out of range: %v", p.Err())
	}
}
