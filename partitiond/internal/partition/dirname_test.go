package partition

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/partitiond/internal/statestore"
)

// longestTopic is a legal topic name of the greatest length spec 2.1 allows.
var longestTopic = strings.Repeat("t", 200) + strings.Repeat("=._-", 12) + "z"

// diskEnv is a node environment on the real file system: the 255-byte
// limit on names is the file system's, which the in-memory one lacks.
func diskEnv(t *testing.T) *nodeEnv {
	t.Helper()
	e := newNodeEnv(t)
	e.cfg.FS = vfs.Default
	e.cfg.Dir = t.TempDir()
	return e
}

func openDisk(t *testing.T, e *nodeEnv) *Node {
	t.Helper()
	n, err := Open(context.Background(), e.cfg)
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	return n
}

// checkLogDirs fails when a log directory name is over the file-system limit
// and returns the directory names.
func checkLogDirs(t *testing.T, e *nodeEnv) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.cfg.Dir, LogsDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		if len(d.Name()) > maxFileNameLen {
			t.Fatalf("log directory name of %d bytes", len(d.Name()))
		}
		names = append(names, d.Name())
	}
	return names
}

// TestLongestTopicNameLifecycleOnDisk takes a 249-byte topic through create,
// write, read, truncate, restart, delete and recreate on a real file system.
// Before, the directory name (topic + suffix) was over 255 bytes: the create
// answered storage_unavailable ("file name too long") and the delete cleanup
// never finished, so a recreate answered topic_cleanup_pending forever.
func TestLongestTopicNameLifecycleOnDisk(t *testing.T) {
	if len(longestTopic) != 249 || !validTopicName(longestTopic) {
		t.Fatalf("test name is %d bytes, legal %v", len(longestTopic), validTopicName(longestTopic))
	}
	ctx := context.Background()
	e := diskEnv(t)
	n := openDisk(t, e)
	p := mustCreate(t, n, longestTopic, 7, TopicConfig{})
	appendPayloads(t, p, "a", "b")
	if got := fetchAll(t, p, 0); len(got) != 2 || got[1].payload != "b" {
		t.Fatalf("read back %+v", got)
	}
	dirs := checkLogDirs(t, e)
	if len(dirs) != 1 || !dirNamesTopic(dirs[0], longestTopic) {
		t.Fatalf("log directories %q", dirs)
	}
	b, err := os.ReadFile(filepath.Join(e.cfg.Dir, LogsDir, dirs[0], PartitionFile))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := decodePartitionFile(b); err != nil || f.Topic != longestTopic || f.Partition != 7 {
		t.Fatalf("partition.json %+v %v", f, err)
	}

	// Truncate: a new directory under the new epoch, the old one removed.
	if done, err := n.TruncatePartition(ctx, longestTopic, 7, 1); err != nil || !done {
		t.Fatalf("truncate: done %v err %v", done, err)
	}
	p, _ = n.Partition(longestTopic, 7)
	appendPayloads(t, p, "c")
	if d := checkLogDirs(t, e); len(d) != 1 || d[0] == dirs[0] {
		t.Fatalf("after truncate %q", d)
	}

	// Restart: the partition reopens from its recorded directory.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openDisk(t, e)
	defer n.Close()
	p, err = n.Partition(longestTopic, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchAll(t, p, 0); len(got) != 1 || got[0].payload != "c" {
		t.Fatalf("after restart %+v", got)
	}

	// Delete completes; recreate is fresh.
	if done, err := n.DeletePartition(ctx, longestTopic, 7); err != nil || !done {
		t.Fatalf("delete: done %v err %v", done, err)
	}
	if d := checkLogDirs(t, e); len(d) != 0 {
		t.Fatalf("after delete %q", d)
	}
	p, err = n.CreatePartition(ctx, PartitionSpec{Topic: longestTopic, Partition: 7})
	if err != nil {
		t.Fatalf("recreate: %v", err)
	}
	if o, _ := p.ListOffsets(); o.LEO != 0 {
		t.Fatalf("recreated partition is not empty: %+v", o)
	}
	appendPayloads(t, p, "d")
}

// TestLegacyLayoutDirectoryKeepsWorking opens a data directory in the layout
// before partition.json: the partition reads as before and gains the file.
func TestLegacyLayoutDirectoryKeepsWorking(t *testing.T) {
	e := diskEnv(t)
	n := openDisk(t, e)
	p := mustCreate(t, n, "orders", 0, TopicConfig{})
	appendPayloads(t, p, "a", "b", "c")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The old layout: <topic>-<partition>-<epoch>-<hex time>, no partition.json.
	dirs := checkLogDirs(t, e)
	if len(dirs) != 1 || !strings.HasPrefix(dirs[0], "orders-0-0-") {
		t.Fatalf("log directories %q", dirs)
	}
	pf := filepath.Join(e.cfg.Dir, LogsDir, dirs[0], PartitionFile)
	if err := os.Remove(pf); err != nil {
		t.Fatal(err)
	}

	n = openDisk(t, e)
	defer n.Close()
	p, err := n.Partition("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchAll(t, p, 0); len(got) != 3 || got[2].payload != "c" {
		t.Fatalf("read back %+v", got)
	}
	appendPayloads(t, p, "d")
	if _, err := os.Stat(pf); err != nil {
		t.Fatalf("partition.json not backfilled: %v", err)
	}
	if d := checkLogDirs(t, e); len(d) != 1 || d[0] != dirs[0] {
		t.Fatalf("directory renamed: %q", d)
	}
}

// TestDeletingStateFinishesForLongName: a delete of a long-named partition
// that crashed after its state change is finished at the next open.
func TestDeletingStateFinishesForLongName(t *testing.T) {
	e := diskEnv(t)
	n := openDisk(t, e)
	p := mustCreate(t, n, longestTopic, 0, TopicConfig{})
	appendPayloads(t, p, "a")
	m := *p.meta.Load()
	m.State = statestore.StateDeleting
	if err := n.state.PutMeta(m, true); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = openDisk(t, e)
	defer n.Close()
	if d := checkLogDirs(t, e); len(d) != 0 {
		t.Fatalf("cleanup not finished: %q", d)
	}
	if _, ok, _ := n.state.Meta(longestTopic, 0); ok {
		t.Fatal("meta of the deleted partition left")
	}
}

// FuzzDirName: every legal topic name gets log directory names within the
// file-system limit, naming no other topic, and its partition.json
// round-trips the full name.
func FuzzDirName(f *testing.F) {
	f.Add("orders", "orders-1")
	f.Add(longestTopic, longestTopic[:248]+"y")
	f.Add(strings.Repeat("a", 100), strings.Repeat("a", 101))
	f.Add("a", "a-1")
	f.Add("__consumer_offsets", "..")
	f.Fuzz(func(t *testing.T, topic, other string) {
		if !validTopicName(topic) {
			return
		}
		for _, p := range []int32{0, math.MaxInt32} {
			name := dirName(topic, p, math.MaxUint64, time.Unix(0, math.MaxInt64))
			if len(name) > maxFileNameLen || len(name) > maxTopicPart+49 || strings.ContainsAny(name, "/\x00") {
				t.Fatalf("%q: directory name %q (%d bytes)", topic, name, len(name))
			}
			if !dirNamesTopic(name, topic) {
				t.Fatalf("%q: %q does not name its topic", topic, name)
			}
			if validTopicName(other) && other != topic && dirNamesTopic(name, other) {
				t.Fatalf("%q: %q also names %q", topic, name, other)
			}
		}
		got, err := decodePartitionFile(encodePartitionFile(topic, 3, 9))
		if err != nil || got != (partitionFile{Topic: topic, Partition: 3, LifecycleEpoch: 9}) {
			t.Fatalf("%q: partition.json round trip %+v %v", topic, got, err)
		}
	})
}
