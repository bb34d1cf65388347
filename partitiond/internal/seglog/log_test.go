package seglog

import (
	"testing"
)

func TestAppendReadAcrossRollsAndReopen(t *testing.T) {
	e := newEnv(t)
	l := e.open(t)
	appendN(t, l, 200, 100)
	if got := len(l.Segments()); got < 3 {
		t.Fatalf("segments = %d, want several rolls", got)
	}
	if end := readAll(t, l, 0, 100); end != 200 {
		t.Fatalf("read end %d", end)
	}
	l = e.reopen(t, l)
	defer l.Close()
	if l.EndOffset() != 200 || l.DurableEnd() != 200 {
		t.Fatalf("reopened end %d durable %d", l.EndOffset(), l.DurableEnd())
	}
	if end := readAll(t, l, 37, 100); end != 200 {
		t.Fatalf("read end %d", end)
	}
	appendN(t, l, 10, 100)
	if end := readAll(t, l, 195, 100); end != 210 {
		t.Fatalf("read end %d", end)
	}
}
