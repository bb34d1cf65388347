package pki

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseIdentityIsExact(t *testing.T) {
	good := Identity{Role: RolePartitiond, NodeID: "p-1"}
	if got, err := ParseIdentity(good.URI()); err != nil || got != good {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for _, raw := range []string{
		"spiffe://other/partitiond/p1",
		"spiffe://strata/wizard/p1",
		"spiffe://strata/partitiond/",
		"spiffe://strata/partitiond/p1/extra",
		"spiffe://strata/partitiond/p%201",
		"https://strata/partitiond/p1",
		"spiffe://user@strata/partitiond/p1",
	} {
		u, _ := url.Parse(raw)
		if _, err := ParseIdentity(u); err == nil {
			t.Errorf("%s: want rejection", raw)
		}
	}
}

func TestEnsureLocalCreatesOnceAndRenews(t *testing.T) {
	dir := t.TempDir()
	ids := []Identity{{RoleMetad, "local"}, {RoleGateway, "local"}}
	files, err := EnsureLocal(dir, ids)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(files[ids[1]])
	if err != nil || src.Identity() != ids[1] {
		t.Fatalf("source: %v %v", src, err)
	}
	st1, _ := os.Stat(files[ids[0]].Cert)
	if _, err := EnsureLocal(dir, ids); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(files[ids[0]].Cert)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Fatal("valid certificate must not be reissued")
	}
	// An expiring certificate is renewed.
	ca, _ := LoadCA(dir)
	if _, err := ca.IssueToDir(dir, "metad-local", NodeSpec{Identity: ids[0], Validity: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureLocal(dir, ids); err != nil {
		t.Fatal(err)
	}
	if validFor(files[ids[0]], ids[0], ca, 300*24*time.Hour) == false {
		t.Fatal("expiring certificate was not renewed")
	}
	if _, err := os.Stat(filepath.Join(dir, CAKeyFile)); err != nil {
		t.Fatal(err)
	}
}

func TestSourceReloadsRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA("ca", time.Hour*24)
	ca.Save(dir)
	f, err := ca.IssueToDir(dir, "g", NodeSpec{Identity: Identity{RoleGateway, "g1"}})
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource(f)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	src.now = func() time.Time { return now }
	before, _ := src.current()
	if _, err := ca.IssueToDir(dir, "g", NodeSpec{Identity: Identity{RoleGateway, "g1"}}); err != nil {
		t.Fatal(err)
	}
	// Same size files can keep mtime granularity; force a distinct mtime.
	future := time.Now().Add(time.Minute)
	os.Chtimes(f.Cert, future, future)
	now = now.Add(time.Second)
	after, _ := src.current()
	if before.Leaf.SerialNumber.Cmp(after.Leaf.SerialNumber) == 0 {
		t.Fatal("rotated certificate was not picked up")
	}
}
