package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

func TestExtractOutput(t *testing.T) {
	for _, c := range []struct {
		in     []string
		format string
		rest   []string
	}{
		{[]string{"topic", "list"}, "table", []string{"topic", "list"}},
		{[]string{"--output", "json", "topic", "list"}, "json", []string{"topic", "list"}},
		{[]string{"topic", "list", "--output=yaml"}, "yaml", []string{"topic", "list"}},
		{[]string{"topic", "list", "--output=text"}, "table", []string{"topic", "list"}},
		{[]string{"topic", "-output", "json", "list", "--output", "table"}, "table", []string{"topic", "list"}},
		// After "--" everything is a positional.
		{[]string{"consume", "t", "--", "--output", "json"}, "table", []string{"consume", "t", "--", "--output", "json"}},
	} {
		f, rest, err := extractOutput(c.in)
		if err != nil || f != c.format || !slices.Equal(rest, c.rest) {
			t.Errorf("%v: %q %v %v", c.in, f, rest, err)
		}
	}
	for _, bad := range [][]string{{"--output"}, {"--output", "xml", "topic"}, {"--output="}} {
		if _, _, err := extractOutput(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if code, _, errs := run(t, "topic", "list", "--output", "csv"); code != 2 || !strings.Contains(errs, "table, json, yaml") {
		t.Fatalf("bad --output: %d %s", code, errs)
	}
}

// decodeAll reads out as JSON, or as YAML when yamlOut; both must work.
func decodeAll(t *testing.T, args []string, out string, yamlOut bool) any {
	t.Helper()
	var v any
	var err error
	if yamlOut {
		err = yaml.Unmarshal([]byte(out), &v)
	} else {
		err = json.Unmarshal([]byte(out), &v)
	}
	if err != nil || v == nil {
		t.Fatalf("%v: not a document (%v):\n%s", args, err, out)
	}
	return v
}

// TestEveryCommandHonoursOutput: each command prints one JSON document with
// --output json and one YAML document with --output yaml, given before the
// command or after it.
func TestEveryCommandHonoursOutput(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	dir := t.TempDir()
	mustRun(t, "topic", "create", "o", "--addr", a, "--partitions", "1")
	mustRun(t, "produce", "o", "--addr", a, "--count", "3", "--size", "4")
	mustRun(t, "consume", "o", "--addr", a, "--group", "og", "--wait", "10ms")
	for _, f := range []string{"json", "yaml"} {
		for _, args := range [][]string{
			{"topic", "create", "o-" + f, "--addr", a},
			{"topic", "list", "--addr", a},
			{"topic", "describe", "o", "--addr", a},
			{"topic", "delete", "o-" + f, "--addr", a},
			{"produce", "o", "--addr", a, "--count", "1"},
			{"group", "list", "--addr", a},
			{"group", "status", "og", "--addr", a},
			{"group", "describe", "og", "--addr", a},
			{"group", "reset-offsets", "og", "--addr", a, "--topic", "o", "--to-earliest"},
			{"cluster", "status", "--addr", a},
			{"certs", "init", "--dir", dir + "/" + f},
			{"bench", "produce", "--addr", a, "--count", "100", "--conns", "1"},
		} {
			out := mustRun(t, append([]string{"--output", f}, args...)...)
			decodeAll(t, args, out, f == "yaml")
			if f == "json" && strings.HasPrefix(strings.TrimSpace(out), "{") == strings.HasPrefix(strings.TrimSpace(out), "[") {
				t.Fatalf("%v: not one JSON object or array:\n%s", args, out)
			}
		}
	}
	// group describe in json has the offsets and lag (it used to print
	// only GROUP_STATUS).
	mustRun(t, "produce", "o", "--addr", a, "--count", "2")
	out := mustRun(t, "group", "describe", "og", "--addr", a, "--json")
	var d struct {
		GroupName string `json:"group_name"`
		Offsets   []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Current   uint64 `json:"current_offset"`
			LogEnd    uint64 `json:"log_end_offset"`
			Lag       uint64 `json:"lag"`
		} `json:"offsets"`
		TotalLag uint64 `json:"total_lag"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.GroupName != "og" || len(d.Offsets) != 1 {
		t.Fatalf("describe json: %v\n%s", err, out)
	}
	// 3 consumed and committed; 1 (json) + 1 (yaml) + 2 produced since.
	if o := d.Offsets[0]; o.Topic != "o" || o.Current != 3 || o.LogEnd != 7 || o.Lag != 4 || d.TotalLag != 4 {
		t.Fatalf("describe json offsets: %+v total %d", d.Offsets, d.TotalLag)
	}
	if y := mustRun(t, "group", "describe", "og", "--addr", a, "--output", "yaml"); !strings.Contains(y, "total_lag: 4") {
		t.Fatalf("describe yaml:\n%s", y)
	}
}

// TestBinaryPayloadsSurviveJSON: a value that is not UTF-8 prints as base64
// with value_encoding base64, and decodes to the bytes produced.
func TestBinaryPayloadsSurviveJSON(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "bin", "--addr", a, "--partitions", "1")
	c := dialFake(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bin := []byte{0xff, 0x00, 0xfe, 'a', 0x80}
	p := client.NewProducer(c, client.ProducerOptions{Acks: "1"})
	for _, m := range []client.Message{{Topic: "bin", Partition: 0, Value: bin, Key: "\xc3\x28"}, {Topic: "bin", Partition: 0, Value: []byte("héllo")}} {
		if _, err := p.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "consume", "bin", "--addr", a, "--output", "json", "--wait", "10ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed:\n%s", out)
	}
	var r0, r1 recordJSON
	if err := json.Unmarshal([]byte(lines[0]), &r0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &r1); err != nil {
		t.Fatal(err)
	}
	got, err := base64.StdEncoding.DecodeString(r0.Value)
	if r0.ValueEncoding != "base64" || err != nil || !bytes.Equal(got, bin) {
		t.Fatalf("binary record %+v: decoded %x (%v), want %x", r0, got, err, bin)
	}
	if k, _ := base64.StdEncoding.DecodeString(r0.Key); r0.KeyEncoding != "base64" || string(k) != "\xc3\x28" {
		t.Fatalf("binary key %+v", r0)
	}
	if r1.ValueEncoding != "utf8" || r1.Value != "héllo" || r1.KeyEncoding != "" || r1.Topic != "bin" {
		t.Fatalf("text record %+v", r1)
	}
	// stream read and browse print payloads the same way (the fake broker
	// has neither command: the conversion is checked directly).
	if e := toEventJSON(wire.Record{Payload: bin}); e.Encoding != "base64" || e.Payload != base64.StdEncoding.EncodeToString(bin) {
		t.Fatalf("event json %+v", e)
	}
	y := mustRun(t, "consume", "bin", "--addr", a, "--output", "yaml", "--wait", "10ms")
	dec := yaml.NewDecoder(strings.NewReader(y))
	var docs []recordJSON
	for {
		var r struct {
			Value         string `yaml:"value"`
			ValueEncoding string `yaml:"value_encoding"`
		}
		if err := dec.Decode(&r); err != nil {
			break
		}
		docs = append(docs, recordJSON{Value: r.Value, ValueEncoding: r.ValueEncoding})
	}
	if len(docs) != 2 || docs[0].ValueEncoding != "base64" || docs[1].Value != "héllo" {
		t.Fatalf("yaml records %+v:\n%s", docs, y)
	}
}

// TestProduceFilesAndHeaders: --value-file sends the file's exact bytes (binary
// included), --key-file the key; --header is refused with a reason.
func TestProduceFilesAndHeaders(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "files", "--addr", a, "--partitions", "1")
	dir := t.TempDir()
	val := []byte{0, 1, 2, 0xff, '\n', 'x', '\n'}
	if err := os.WriteFile(filepath.Join(dir, "v.bin"), val, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "k.txt"), []byte("key one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "produce", "files", "--addr", a, "--value-file", filepath.Join(dir, "v.bin"), "--key-file", filepath.Join(dir, "k.txt"))
	stdin = bytes.NewReader([]byte("whole\nstdin\x00"))
	defer func() { stdin = os.Stdin }()
	mustRun(t, "produce", "files", "--addr", a, "--value-file", "-")
	out := mustRun(t, "consume", "files", "--addr", a, "--output", "json", "--wait", "10ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed:\n%s", out)
	}
	var r0, r1 recordJSON
	_ = json.Unmarshal([]byte(lines[0]), &r0)
	_ = json.Unmarshal([]byte(lines[1]), &r1)
	got, _ := base64.StdEncoding.DecodeString(r0.Value)
	if !bytes.Equal(got, val) || r0.Key != "key one\n" {
		t.Fatalf("--value-file record %+v (value %x)", r0, got)
	}
	if r1.Value != "whole\nstdin\x00" || r1.ValueEncoding != "utf8" {
		t.Fatalf("--value-file - record %+v", r1)
	}
	code, _, errs := run(t, "produce", "files", "--addr", a, "--header", "trace=1", "--count", "1")
	if code != 1 || !strings.Contains(errs, "UNSUPPORTED_FEATURE") || !strings.Contains(errs, "no headers") {
		t.Fatalf("--header: exit %d %s", code, errs)
	}
	for _, args := range [][]string{
		{"--key-file", "x", "--key", "k"},
		{"--value-file", "x", "--count", "2"},
	} {
		if code, _, _ := run(t, append([]string{"produce", "files", "--addr", a}, args...)...); code != 2 {
			t.Fatalf("%v: want usage error, got %d", args, code)
		}
	}
	if code, _, errs := run(t, "produce", "files", "--addr", a, "--value-file", filepath.Join(dir, "missing")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Fatalf("missing file: %d %s", code, errs)
	}
}
