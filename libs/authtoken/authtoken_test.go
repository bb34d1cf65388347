package authtoken

import (
	"strings"
	"testing"
)

func TestHashRoundTrip(t *testing.T) {
	h, err := New("s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	s := h.String()
	if strings.Contains(s, "s3cret") || strings.ContainsAny(s, ",: +/=") {
		t.Fatalf("hash text %q leaks the token or holds a separator", s)
	}
	p, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Verify("s3cret") {
		t.Fatal("the right token does not verify")
	}
	for _, bad := range []string{"", "s3cre", "s3cret ", "S3cret"} {
		if p.Verify(bad) {
			t.Fatalf("token %q verifies", bad)
		}
	}
	h2, _ := New("s3cret", MinIterations)
	if h2.String() == s {
		t.Fatal("two hashes of one token share a salt")
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := New("x", MinIterations)
	parts := strings.Split(good.String(), "$")
	for _, s := range []string{
		"", "plain-token", "sha256$1$a$b",
		"pbkdf2-sha256$9999$" + parts[2] + "$" + parts[3],
		"pbkdf2-sha256$99999999999$" + parts[2] + "$" + parts[3],
		"pbkdf2-sha256$x$" + parts[2] + "$" + parts[3],
		"pbkdf2-sha256$10000$short$" + parts[3],
		"pbkdf2-sha256$10000$" + parts[2] + "$" + parts[3][:10],
		"pbkdf2-sha256$10000$" + parts[2] + "$" + parts[3] + "$extra",
	} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
	if _, err := New("", 0); err == nil {
		t.Error("empty token hashed")
	}
	if _, err := New("x", 5); err == nil {
		t.Error("iterations below the minimum accepted")
	}
}
