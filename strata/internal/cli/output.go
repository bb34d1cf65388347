package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/strataio/strata/libs/wire"
)

// Output formats of the global --output flag.
const (
	fmtTable = "table"
	fmtJSON  = "json"
	fmtYAML  = "yaml"
)

var outputFormats = []string{fmtTable, fmtJSON, fmtYAML}

const outputHelp = "output format: table, json or yaml (global: any command, before or after it)"

// outWriter is the stdout a command receives, carrying the format the
// global --output flag chose. The flag is global (it may stand before the
// command or anywhere among its flags), so MainContext takes it out of the
// command line once and every command asks its stdout: one place, and no
// command's flag set has to know about it.
type outWriter struct {
	io.Writer
	format string
}

// outputFormat is the --output format for stdout w (table by default).
func outputFormat(w io.Writer) string {
	if o, ok := w.(*outWriter); ok {
		return o.format
	}
	return fmtTable
}

// withFormat returns stdout with format f (for the legacy --json and
// --format json flags, which mean --output json).
func withFormat(w io.Writer, f string) io.Writer {
	if o, ok := w.(*outWriter); ok {
		return &outWriter{Writer: o.Writer, format: f}
	}
	return &outWriter{Writer: w, format: f}
}

// extractOutput removes every --output F / --output=F (also -output) from
// args before a "--" and returns the last F given (default table).
func extractOutput(args []string) (format string, rest []string, err error) {
	format = fmtTable
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "output" {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("--output needs a value: %s", strings.Join(outputFormats, ", "))
			}
			i++
			val = args[i]
		}
		if val == "text" {
			val = fmtTable // consume --format text's word, and earlier cluster --output text
		}
		if !slices.Contains(outputFormats, val) {
			return "", nil, fmt.Errorf("--output %q: want %s", val, strings.Join(outputFormats, ", "))
		}
		format = val
	}
	return format, rest, nil
}

// emit prints v in the --output format of w; table prints the table form
// (nil: commands whose natural form is a document print JSON).
func emit(w io.Writer, v any, table func()) {
	switch f := outputFormat(w); {
	case f == fmtTable && table != nil:
		table()
	case f == fmtYAML:
		writeYAML(w, v)
	default:
		out, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(w, string(out))
	}
}

// emitRaw is emit for a JSON document received from the server.
func emitRaw(w io.Writer, raw []byte, table func()) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		v = string(raw)
	}
	emit(w, v, table)
}

// writeYAML prints v as YAML, with the keys and names its JSON form has
// (struct tags, json.RawMessage, key order), by reading that JSON as YAML.
func writeYAML(w io.Writer, v any) {
	js, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, "# %v\n", err)
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal(js, &n); err != nil {
		fmt.Fprintf(w, "# %v\n", err)
		return
	}
	blockStyle(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	_ = enc.Encode(&n)
	_ = enc.Close()
	_, _ = w.Write(b.Bytes())
}

// blockStyle clears the flow and quoting styles JSON input gives every node,
// so the encoder writes block YAML and quotes only where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	// YAML 1.1 readers (PyYAML, older tools) take these as booleans.
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		switch strings.ToLower(n.Value) {
		case "y", "yes", "n", "no", "on", "off":
			n.Style = yaml.DoubleQuotedStyle
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// encodeBytes returns b as text and its encoding: utf8 when b is valid
// UTF-8, else base64 (standard, padded), so binary survives JSON and YAML.
func encodeBytes(b []byte) (text, encoding string) {
	if utf8.Valid(b) {
		return string(b), "utf8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// recordJSON is a consumed record in json and yaml output. Value and key
// carry their encoding: binary is base64, never lossy UTF-8.
type recordJSON struct {
	Topic         string `json:"topic,omitempty"`
	Partition     int32  `json:"partition"`
	Offset        uint64 `json:"offset"`
	Timestamp     int64  `json:"timestamp,omitempty"`
	Key           string `json:"key,omitempty"`
	KeyEncoding   string `json:"key_encoding,omitempty"`
	Value         string `json:"value"`
	ValueEncoding string `json:"value_encoding"`
}

func toRecordJSON(r wire.Record) recordJSON {
	v := recordJSON{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	v.Value, v.ValueEncoding = encodeBytes(r.Payload)
	if r.Key != "" {
		v.Key, v.KeyEncoding = encodeBytes([]byte(r.Key))
	}
	return v
}
