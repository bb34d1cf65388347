package partition

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/seglog"
)

// A partition's log directory under logs/ is named
//
//	<topic part>-<partition>-<lifecycle epoch>-<creation time, hex ns>
//
// and is recorded in the partition's meta in the state store, which is what
// every later stage (live, truncated, being deleted) uses: the name is never
// derived again. The topic part is the topic name itself when it is at most
// maxTopicPart bytes (the layout of every directory written before long names
// were handled, so those keep their names); a longer name, up to the 249
// bytes spec 2.1 allows, would not fit the file systems' 255-byte limit once
// the suffix is added, so it becomes a readable prefix, '~' (never part of a
// legal topic name, so the two forms cannot meet) and the SHA-256 of the full
// name. The full name is in the directory's partition.json.
const (
	maxTopicPart   = 100
	hashedPrefix   = maxTopicPart - 1 - sha256.Size*2 // 35 bytes of the name
	hashSeparator  = "~"
	maxFileNameLen = 255

	// PartitionFile names a partition directory's metadata file.
	PartitionFile = "partition.json"
)

// dirTopicPart is the topic's part of its partitions' directory names.
func dirTopicPart(topic string) string {
	if len(topic) <= maxTopicPart {
		return topic
	}
	sum := sha256.Sum256([]byte(topic))
	return topic[:hashedPrefix] + hashSeparator + hex.EncodeToString(sum[:])
}

// dirName names a new log directory for partition p of topic. Its length is
// at most maxTopicPart + 49 bytes (three separators, 10 digits of partition,
// 20 of epoch, 16 hex digits of time).
func dirName(topic string, p int32, epoch uint64, now time.Time) string {
	return fmt.Sprintf("%s-%d-%d-%x", dirTopicPart(topic), p, epoch, now.UnixNano())
}

// dirNamesTopic reports whether dir is a log directory name of topic in
// either form: what an operator (or a test) uses to match a directory to
// its topic without the state store.
func dirNamesTopic(dir, topic string) bool {
	part := dirTopicPart(topic)
	if !strings.HasPrefix(dir, part+"-") {
		return false
	}
	// The rest is exactly three numbers: a shorter topic that is a prefix
	// of a longer one ("a" and "a-1") cannot match the longer one's dirs.
	rest := strings.Split(dir[len(part)+1:], "-")
	return len(rest) == 3 && rest[0] != "" && rest[1] != "" && rest[2] != ""
}

// partitionFile is the content of a log directory's partition.json: the
// full topic name (which the directory name may only hash), for operators
// and tools reading the data directory.
type partitionFile struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LifecycleEpoch uint64 `json:"lifecycle_epoch"`
}

func encodePartitionFile(topic string, p int32, epoch uint64) []byte {
	b, _ := json.Marshal(partitionFile{Topic: topic, Partition: p, LifecycleEpoch: epoch})
	return append(b, '\n')
}

// decodePartitionFile decodes a partition.json; a name that is not a legal
// topic is corrupt.
func decodePartitionFile(b []byte) (partitionFile, error) {
	var f partitionFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return partitionFile{}, errcode.StorageCorrupt.New(PartitionFile + " does not decode: " + err.Error())
	}
	if !validTopicName(f.Topic) || f.Partition < 0 {
		return partitionFile{}, errcode.StorageCorrupt.New(PartitionFile+" names no legal partition", "topic", f.Topic)
	}
	return f, nil
}

// writePartitionFile writes dir/partition.json atomically.
func writePartitionFile(fs fsys.FS, dir, topic string, p int32, epoch uint64) error {
	if err := seglog.WriteFileAtomic(fs, dir, PartitionFile, encodePartitionFile(topic, p, epoch)); err != nil {
		return errcode.StorageUnavailable.New("write " + fs.Join(dir, PartitionFile) + ": " + err.Error())
	}
	return nil
}
