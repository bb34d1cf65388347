package wire

import (
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
)

// MaxOffsetEntries bounds an offset list (the offsets= value of BATCH_COMMIT
// and SEND_OFFSETS_TO_TXN).
const MaxOffsetEntries = 1024

// PartitionOffset is one P<partition>:<offset> entry.
type PartitionOffset struct {
	Partition int32
	Offset    uint64
}

func offsetListError(reason, msg, entry string) *errcode.Error {
	return errcode.InvalidBatchCommitEntry.New(msg, "reason", reason, "entry", entry)
}

// ParseOffsetList parses "P<partition>:<offset>,..." strictly: surrounding
// whitespace is trimmed, nothing else is tolerated (no spaces inside, no signs,
// no empty entries), partitions are non-negative int32, offsets uint64, at
// most 1,024 entries (counted before anything is allocated). Entries keep
// their order; duplicates are not rejected here (see DuplicatePartition), so
// each command applies its own rule. An empty list is errcode.NoValidOffsets;
// any other failure errcode.InvalidBatchCommitEntry with fields reason and
// entry.
func ParseOffsetList(s string) ([]PartitionOffset, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errcode.NoValidOffsets.New("offset list is empty")
	}
	n := strings.Count(s, ",") + 1
	if n > MaxOffsetEntries {
		return nil, errcode.InvalidBatchCommitEntry.New("more than 1,024 offset entries", "reason", "too_many_entries",
			"count", itoa(n))
	}
	out := make([]PartitionOffset, 0, n)
	for entry := range strings.SplitSeq(s, ",") {
		p, o, ok := strings.Cut(entry, ":")
		if !ok || len(p) < 2 || p[0] != 'P' {
			return nil, offsetListError("bad_entry", "entry is not P<partition>:<offset>", entry)
		}
		if !allDigits(p[1:]) || !allDigits(o) {
			return nil, offsetListError("bad_number", "partition and offset are unsigned decimals", entry)
		}
		part, err := strconv.ParseInt(p[1:], 10, 32)
		if err != nil {
			return nil, offsetListError("bad_partition", "partition out of range", entry)
		}
		off, err := strconv.ParseUint(o, 10, 64)
		if err != nil {
			return nil, offsetListError("bad_offset", "offset out of range", entry)
		}
		out = append(out, PartitionOffset{Partition: int32(part), Offset: off})
	}
	return out, nil
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// DuplicatePartition returns a partition that occurs more than once in l.
func DuplicatePartition(l []PartitionOffset) (int32, bool) {
	seen := make(map[int32]struct{}, len(l))
	for _, e := range l {
		if _, dup := seen[e.Partition]; dup {
			return e.Partition, true
		}
		seen[e.Partition] = struct{}{}
	}
	return 0, false
}

// AppendOffsetList appends l as "P<p>:<o>,..." in the given order. It refuses
// an empty list, more than 1,024 entries and negative partitions, so what it
// writes always parses.
func AppendOffsetList(dst []byte, l []PartitionOffset) ([]byte, error) {
	if len(l) == 0 {
		return dst, errcode.NoValidOffsets.New("offset list is empty")
	}
	if len(l) > MaxOffsetEntries {
		return dst, errcode.InvalidBatchCommitEntry.New("more than 1,024 offset entries", "reason", "too_many_entries")
	}
	for i, e := range l {
		if e.Partition < 0 {
			return dst, offsetListError("bad_partition", "negative partition", "P"+itoa(int(e.Partition)))
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, 'P')
		dst = strconv.AppendInt(dst, int64(e.Partition), 10)
		dst = append(dst, ':')
		dst = strconv.AppendUint(dst, e.Offset, 10)
	}
	return dst, nil
}
