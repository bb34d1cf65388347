package blackbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

// TestJSONLogsAreJSON runs the all-in-one binary with --log.format json at
// debug level through startup, traffic and a clean stop: every line it
// writes (stdout and stderr) must be one JSON object, and no object may
// repeat a key (log pipelines keep one of two equal keys, silently).
func TestJSONLogsAreJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	p := clustertest.StartAllInOne(t, "--log.format", "json", "--log.level", "debug")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cl := framework.Dial(t, ctx, p.ClientAddr)
	framework.OK(t, ctx, cl, "CREATE topic=json-logs partitions=2")
	framework.WaitTopic(t, ctx, cl, "json-logs")
	framework.PublishAcked(t, ctx, cl, "json-logs", 20)
	framework.ConsumeGroup(t, ctx, cl, "json-logs-group", "json-logs", 20)
	p.Stop()

	raw, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines++
		if err := checkJSONObject(line); err != nil {
			t.Errorf("log line %d: %v:\n%s", lines, err, line)
		}
	}
	if lines < 10 {
		t.Fatalf("only %d log lines: the process did not log at debug level", lines)
	}
	t.Logf("%d JSON log lines checked", lines)
}

// checkJSONObject reports whether line is exactly one JSON object in which
// no object (at any depth) repeats a key.
func checkJSONObject(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("not a JSON object")
	}
	if err := checkObject(dec); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}

// checkObject walks an object whose '{' was read.
func checkObject(dec *json.Decoder) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("key %q repeated", key)
		}
		seen[key] = true
		if err := checkValue(dec); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func checkValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return checkObject(dec)
	case json.Delim('['):
		for dec.More() {
			if err := checkValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}
