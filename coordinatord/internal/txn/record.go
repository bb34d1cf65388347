package txn

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
)

// The transaction log record (docs/transactions.md): one record per accepted
// transition, key txn/"<transactional_id>" (Go-quoted, so any id maps to one
// key), value the whole state as JSON with "v":1 and "type":"txn". The
// latest record per key is the state, as under compaction.

// FormatVersion is the "v" of every record this build writes and reads.
const FormatVersion = 1

const recordType = "txn"

type value struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	Txn
}

// Key is the record key of a transactional_id.
func Key(id string) string { return "txn/" + strconv.Quote(id) }

// Encode returns the record key and value of t.
func Encode(t *Txn) (key string, val []byte, err error) {
	val, err = json.Marshal(value{V: FormatVersion, Type: recordType, Txn: *t})
	if err != nil {
		return "", nil, errcode.Internal.New("encode transaction state: " + err.Error())
	}
	return Key(t.ID), val, nil
}

func corrupt(msg string, kv ...string) error {
	return errcode.MalformedInput.New("transaction log record: "+msg, kv...)
}

// Decode parses and validates one record: the key names the value's
// transactional_id, the version is 1, no unknown fields or trailing data,
// a known state, epochs within 1..2^31-1 with the transaction epoch not
// above the session's, participants and offsets sorted without repeats.
// Anything else is malformed_input: replay stops there and the shard is not
// served from a partial state.
func Decode(key, val []byte) (*Txn, error) {
	k := string(key)
	if !strings.HasPrefix(k, "txn/") {
		return nil, corrupt("unknown key", "key", k)
	}
	id, err := strconv.Unquote(k[len("txn/"):])
	if err != nil {
		return nil, corrupt("key is not a quoted transactional_id", "key", k)
	}
	d := json.NewDecoder(bytes.NewReader(val))
	d.DisallowUnknownFields()
	var v value
	if err := d.Decode(&v); err != nil {
		return nil, corrupt("value does not decode: "+err.Error(), "key", k)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, corrupt("trailing data after the value", "key", k)
	}
	if v.V != FormatVersion || v.Type != recordType {
		return nil, corrupt("unknown version or type", "key", k, "v", strconv.Itoa(v.V), "type", v.Type)
	}
	t := v.Txn
	switch {
	case t.ID != id:
		return nil, corrupt("value names another transactional_id", "key", k, "id", t.ID)
	case t.ProducerID == "":
		return nil, corrupt("no producer id", "key", k)
	case t.Epoch < 1 || t.Epoch > epochMax || t.TxnEpoch < 0 || t.TxnEpoch > t.Epoch:
		return nil, corrupt("epochs out of range", "key", k, "epoch", i64(t.Epoch), "txn_epoch", i64(t.TxnEpoch))
	}
	switch t.State {
	case Empty, Open, PrepareCommit, PrepareAbort, Committed, Aborted:
	default:
		return nil, corrupt("unknown state", "key", k, "state", string(t.State))
	}
	if !slices.IsSortedFunc(t.Participants, TP.less) || hasRepeat(len(t.Participants), func(i int) bool { return t.Participants[i] == t.Participants[i-1] }) {
		return nil, corrupt("participants not sorted or repeated", "key", k)
	}
	if !slices.IsSortedFunc(t.Offsets, func(a, b StagedOffset) int { return a.TP.less(b.TP) }) ||
		hasRepeat(len(t.Offsets), func(i int) bool { return t.Offsets[i].TP == t.Offsets[i-1].TP }) {
		return nil, corrupt("offsets not sorted or repeated", "key", k)
	}
	if len(t.Offsets) > 0 && t.Session == nil {
		return nil, corrupt("offsets without a group session", "key", k)
	}
	return &t, nil
}

func hasRepeat(n int, same func(i int) bool) bool {
	for i := 1; i < n; i++ {
		if same(i) {
			return true
		}
	}
	return false
}
