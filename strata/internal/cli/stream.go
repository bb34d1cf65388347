package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

const streamUsage = `usage:
  strata stream append TOPIC KEY --version N [--type T] [--schema-version N] [--metadata JSON]
      [--event-id ID] (--message TEXT | payload from stdin)
  strata stream read TOPIC KEY [--from N] [--limit N]
  strata stream version TOPIC KEY
  strata stream snapshot save TOPIC KEY --version N (--message TEXT | payload from stdin)
  strata stream snapshot get TOPIC KEY
  strata stream proof TOPIC MATCH_ID [--partition N] [--expected-last N]
  strata stream range TOPIC MATCH_ID --from N --to N [--max-records N]

Event-sourcing streams (topics created with event_sourcing=true). Every
subcommand prints one JSON document. append needs the stream's current
version + 1 (version_conflict names the current version). read prints the
snapshot the server used (at or after --from) and the events after it.
proof and range work on aggregate replay topics: proof prints the replay
proof of sequences 1..last; a failed proof exits 1 with the error on stderr
and the diagnostic proof JSON on stdout. range prints the proof of the
returned events and the events (raw envelopes); it moves no group offset.
`

// eventJSON is an event as the stream commands print it.
type eventJSON struct {
	Version       uint64          `json:"version"`
	Offset        uint64          `json:"offset"`
	EventType     string          `json:"event_type,omitempty"`
	SchemaVersion uint32          `json:"schema_version,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	EventID       string          `json:"event_id,omitempty"`
	PayloadDigest string          `json:"payload_digest,omitempty"`
	Timestamp     int64           `json:"timestamp,omitempty"`
	Payload       string          `json:"payload"`
	Encoding      string          `json:"payload_encoding"` // utf8 or base64
}

func toEventJSON(r wire.Record) eventJSON {
	e := eventJSON{Version: r.AggregateVersion, Offset: r.Offset, EventType: r.EventType, SchemaVersion: r.SchemaVersion,
		EventID: r.EventID, PayloadDigest: r.PayloadDigest, Timestamp: r.Timestamp}
	e.Payload, e.Encoding = encodeBytes(r.Payload)
	if r.Metadata != "" && json.Valid([]byte(r.Metadata)) {
		e.Metadata = json.RawMessage(r.Metadata)
	}
	return e
}

// writeJSON prints a document in the --output format (JSON unless yaml).
func writeJSON(w io.Writer, v any) { emit(w, v, nil) }

// payloadArg is --message, else stdin.
func payloadArg(msg string, set bool) ([]byte, error) {
	if set {
		return []byte(msg), nil
	}
	return io.ReadAll(os.Stdin)
}

func runStream(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, code, ok := subcommand(args, streamUsage, stdout, stderr)
	if !ok {
		return code
	}
	rest := args[1:]
	if sub == "snapshot" {
		if len(rest) == 0 {
			fmt.Fprint(stderr, streamUsage)
			return exitUsage
		}
		if _, code, ok := subcommand(rest, streamUsage, stdout, stderr); !ok {
			return code
		}
		sub, rest = "snapshot "+rest[0], rest[1:]
	}
	fs := newFlagSet("strata stream "+sub, streamUsage, stderr)
	cf := addConnFlags(fs)
	var version, from, to, expectedLast uint64
	var limit, part int
	var evType, metadata, eventID, message string
	var schema uint
	switch sub {
	case "append":
		fs.Uint64Var(&version, "version", 0, "the event's version: the stream's current version + 1")
		fs.StringVar(&evType, "type", "", "event type")
		fs.UintVar(&schema, "schema-version", 1, "schema version (at least 1)")
		fs.StringVar(&metadata, "metadata", "", "metadata JSON")
		fs.StringVar(&eventID, "event-id", "", "event id (required on aggregate replay topics)")
		fs.StringVar(&message, "message", "", "payload (default: stdin)")
	case "read":
		fs.Uint64Var(&from, "from", 1, "first version")
		fs.IntVar(&limit, "limit", 0, "page size (1..1024; default: everything)")
	case "version", "snapshot get":
	case "proof":
		fs.IntVar(&part, "partition", -1, "the match's partition (checked; default: FNV-1a of the match id)")
		fs.Uint64Var(&expectedLast, "expected-last", 0, "the match's expected last sequence")
	case "range":
		fs.Uint64Var(&from, "from", 0, "first sequence")
		fs.Uint64Var(&to, "to", 0, "last sequence")
		fs.IntVar(&limit, "max-records", 0, "events at most (server default 256, at most 1024)")
	case "snapshot save":
		fs.Uint64Var(&version, "version", 0, "the version the snapshot stands for (not above the stream's)")
		fs.StringVar(&message, "message", "", "snapshot payload (default: stdin)")
	default:
		return unknownSubcommand(stderr, "stream", sub, streamUsage)
	}
	pos, err := parseCount(fs, rest, 2)
	if err != nil {
		return parseExit(err)
	}
	msgSet := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "message" {
			msgSet = true
		}
	})
	if (sub == "append" || sub == "snapshot save") && version == 0 {
		return usageError(stderr, fs, "--version is required")
	}
	if sub == "range" && (from == 0 || to == 0) {
		return usageError(stderr, fs, "--from and --to are required")
	}
	topic, key := pos[0], pos[1]
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "stream "+sub, err)
	}
	defer c.Close()
	switch sub {
	case "append":
		payload, err := payloadArg(message, msgSet)
		if err != nil {
			return fail(stderr, "stream append", err)
		}
		res, err := c.AppendStream(ctx, client.Event{Topic: topic, Key: key, Version: version, EventType: evType,
			SchemaVersion: uint32(schema), Metadata: metadata, EventID: eventID, Payload: payload})
		if err != nil {
			return fail(stderr, "stream append", err)
		}
		writeJSON(stdout, map[string]any{"topic": topic, "key": key, "version": res.Version, "offset": res.Offset,
			"partition": res.Partition, "duplicate": res.Duplicate})
	case "read":
		r, err := c.ReadStream(ctx, topic, key, from, limit)
		if err != nil {
			return fail(stderr, "stream read", err)
		}
		events := make([]eventJSON, 0, len(r.Events))
		for _, ev := range r.Events {
			events = append(events, toEventJSON(ev))
		}
		out := map[string]any{"topic": topic, "key": key, "partition": r.Partition, "count": r.Count, "events": events}
		if r.Snapshot != nil {
			out["snapshot"] = r.Snapshot
		}
		if limit > 0 {
			out["has_more"], out["next_version"], out["stream_version"] = r.HasMore, r.NextVersion, r.StreamVersion
		}
		writeJSON(stdout, out)
	case "version":
		v, err := c.StreamVersion(ctx, topic, key)
		if err != nil {
			return fail(stderr, "stream version", err)
		}
		writeJSON(stdout, map[string]any{"topic": topic, "key": key, "version": v})
	case "snapshot save":
		payload, err := payloadArg(message, msgSet)
		if err != nil {
			return fail(stderr, "stream snapshot save", err)
		}
		if err := c.SaveSnapshot(ctx, topic, key, version, payload); err != nil {
			return fail(stderr, "stream snapshot save", err)
		}
		writeJSON(stdout, map[string]any{"topic": topic, "key": key, "version": version, "saved": true})
	case "snapshot get":
		s, err := c.ReadSnapshot(ctx, topic, key)
		if err != nil {
			return fail(stderr, "stream snapshot get", err)
		}
		writeJSON(stdout, map[string]any{"topic": topic, "key": key, "snapshot": s})
	case "proof":
		o := client.ProofOptions{ExpectedLastSequence: expectedLast}
		if part >= 0 {
			p := int32(part)
			o.Partition = &p
		}
		pr, err := c.AggregateReplayProof(ctx, topic, key, o)
		if err != nil {
			if diag, ok := client.ProofOf(err); ok {
				writeJSON(stdout, diag)
			}
			return fail(stderr, "stream proof", err)
		}
		writeJSON(stdout, pr)
	case "range":
		r, err := c.AggregateEventRangeRead(ctx, topic, key, from, to, limit)
		if err != nil {
			if diag, ok := client.ProofOf(err); ok {
				writeJSON(stdout, diag)
			}
			return fail(stderr, "stream range", err)
		}
		events := make([]eventJSON, 0, len(r.Events))
		for _, ev := range r.Events {
			events = append(events, toEventJSON(ev))
		}
		writeJSON(stdout, map[string]any{"topic": r.Topic, "match_id": r.MatchID, "partition": r.Partition, "count": r.Count,
			"next_sequence": r.NextSequence, "has_more": r.HasMore, "proof": r.Proof, "events": events})
	}
	return exitOK
}

const browseUsage = `usage:
  strata browse TOPIC [--partition N] [--offset N] [--max-records N] [--max-bytes N]

Prints committed records of one partition from an offset (default: the
earliest retained) as one JSON document, with where to continue. It reads
outside any consumer group: no committed offset is read or moved.
`

func runBrowse(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("strata browse", browseUsage, stderr)
	cf := addConnFlags(fs)
	var topic string
	part := fs.Int("partition", 0, "partition")
	offset := fs.String("offset", "", "first offset (default: the earliest retained)")
	maxRecords := fs.Int("max-records", 0, "records at most (server default 100, at most 1000)")
	maxBytes := fs.Int("max-bytes", 0, "bytes at most (server default 1 MiB, at most 4 MiB)")
	if err := parseTopic(fs, args, &topic); err != nil {
		return parseExit(err)
	}
	o := client.BrowseOptions{MaxRecords: *maxRecords, MaxBytes: *maxBytes}
	if *offset != "" {
		n, err := strconv.ParseUint(*offset, 10, 64)
		if err != nil {
			return usageError(stderr, fs, "--offset must be a non-negative integer")
		}
		o.Offset = &n
	}
	c, err := cf.dial(ctx)
	if err != nil {
		return fail(stderr, "browse", err)
	}
	defer c.Close()
	r, err := c.Browse(ctx, topic, int32(*part), o)
	if err != nil {
		return fail(stderr, "browse", err)
	}
	type recJSON struct {
		Offset    uint64 `json:"offset"`
		Timestamp int64  `json:"timestamp,omitempty"`
		Key       string `json:"key,omitempty"`
		Payload   string `json:"payload"`
		Encoding  string `json:"payload_encoding"` // utf8 or base64
	}
	recs := make([]recJSON, 0, len(r.Records))
	for _, rec := range r.Records {
		j := recJSON{Offset: rec.Offset, Timestamp: rec.Timestamp, Key: rec.Key}
		j.Payload, j.Encoding = encodeBytes(rec.Payload)
		recs = append(recs, j)
	}
	writeJSON(stdout, map[string]any{"topic": r.Topic, "partition": r.Partition, "next_offset": r.NextOffset,
		"earliest_offset": r.EarliestOffset, "readable_end_offset": r.ReadableEndOffset, "has_more": r.HasMore, "records": recs})
	return exitOK
}
