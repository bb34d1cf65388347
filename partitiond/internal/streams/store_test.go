package streams

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestStoreMonotonicDurableAndTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range []Snapshot{{"a", 1, []byte("one")}, {"b", 4, []byte("bee")}, {"a", 3, []byte("three")}} {
		if ok, err := s.Put(sn); err != nil || !ok {
			t.Fatalf("put %v: %v %v", sn, ok, err)
		}
	}
	if ok, err := s.Put(Snapshot{"a", 2, []byte("older")}); err != nil || ok {
		t.Fatalf("older snapshot stored: %v %v", ok, err)
	}
	if ok, err := s.Put(Snapshot{"a", 3, []byte("three again")}); err != nil || !ok {
		t.Fatalf("same version not replaced: %v %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of a write leaves a torn entry at the end.
	path := filepath.Join(dir, SnapshotFile)
	full := appendEntry(nil, Snapshot{"c", 9, []byte("torn")})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(full[:len(full)-2])
	f.Close()

	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sn, ok := s.Get("a"); !ok || sn.Version != 3 || string(sn.Payload) != "three again" {
		t.Fatalf("a after reopen: %+v %v", sn, ok)
	}
	if _, ok := s.Get("c"); ok {
		t.Fatal("torn entry survived")
	}
	if l := s.List(); len(l) != 2 || l[0].Key != "a" || l[1].Key != "b" {
		t.Fatalf("list %+v", l)
	}
	if ok, err := s.Put(Snapshot{"c", 1, []byte("after")}); err != nil || !ok {
		t.Fatalf("put after torn tail: %v %v", ok, err)
	}
}

func TestStoreRewrite(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 64<<10)
	for v := uint64(1); v <= 200; v++ {
		if _, err := s.Put(Snapshot{"k", v, payload}); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := os.Stat(filepath.Join(dir, SnapshotFile))
	if st.Size() > 2*rewriteMin {
		t.Fatalf("store not rewritten: %d bytes", st.Size())
	}
	s.Close()
	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sn, ok := s.Get("k"); !ok || sn.Version != 200 {
		t.Fatalf("after rewrite %v %v", sn.Version, ok)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(appendEntry(nil, Snapshot{"agg-1", 3, []byte(`{"n":3}`)}))
	f.Add(appendEntry(nil, Snapshot{"", 0, nil}))
	f.Add([]byte{0, 0, 0, 14, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		sn, n, err := DecodeEntry(b)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("took %d of %d bytes", n, len(b))
		}
		again := appendEntry(nil, sn)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestStoreChanges: the change sequence lists what was stored after a
// sequence number, each key once at its latest version, across the
// compaction of superseded entries; a new opening is a new incarnation.
func TestStoreChanges(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, seq := s.Changes(0); len(got) != 0 || seq != 0 {
		t.Fatalf("empty store %v %d", got, seq)
	}
	for _, sn := range []Snapshot{{"a", 1, nil}, {"b", 1, nil}, {"a", 2, nil}} {
		if _, err := s.Put(sn); err != nil {
			t.Fatal(err)
		}
	}
	got, seq := s.Changes(0)
	if len(got) != 2 || got[0].Key != "b" || got[1].Key != "a" || got[1].Version != 2 || seq != 3 {
		t.Fatalf("all changes %+v %d", got, seq)
	}
	if got, _ := s.Changes(2); len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("changes after 2 %+v", got)
	}
	if got, now := s.Changes(seq); len(got) != 0 || now != seq {
		t.Fatalf("no change %+v %d", got, now)
	}
	// Many saves of one key: the superseded entries are dropped.
	for v := uint64(3); v < 3000; v++ {
		if _, err := s.Put(Snapshot{"a", v, nil}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.changes) > 1100 {
		t.Fatalf("change list not compacted: %d entries", len(s.changes))
	}
	if got, _ := s.Changes(seq); len(got) != 1 || got[0].Key != "a" || got[0].Version != 2999 {
		t.Fatalf("changes after the saves %+v", got)
	}
	id := s.ID()
	s.Close()
	s, err = OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Changes(0); s.ID() == id || len(got) != 2 {
		t.Fatalf("reopened: id %d (was %d), changes %+v", s.ID(), id, got)
	}
}
