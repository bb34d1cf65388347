package raftstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/proctest"
)

// childDirEnv switches the test binary into the appender child of
// TestKill9KeepsAcknowledgedEntries.
const childDirEnv = "STRATA_RAFTSTORE_KILL_CHILD_DIR"

// TestKill9Child is the child process: it opens the store in the directory
// named by childDirEnv, appends synced batches forever and prints
// "ack <last index>" after each StoreLogs returns. It does nothing in a
// normal test run.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("child process of TestKill9KeepsAcknowledgedEntries")
	}
	s, err := Open(dir)
	if err != nil {
		fmt.Printf("error open: %v\n", err)
		os.Exit(2)
	}
	last, _ := s.LastIndex()
	fmt.Printf("ready %d\n", last)
	next := last + 1
	for {
		n := 1 + int(next%9)
		if err := s.StoreLogs(testLogs(next, n, 1+next/1000)); err != nil {
			fmt.Printf("error append: %v\n", err)
			os.Exit(2)
		}
		next += uint64(n)
		// Written with one write(2) on an unbuffered stdout: a line the
		// parent reads is an acknowledgement the child really received.
		fmt.Printf("ack %d\n", next-1)
	}
}

// TestKill9KeepsAcknowledgedEntries runs the appender child, kill -9s it at a
// random moment, reopens the store and checks that every acknowledged index
// reads back identical and the log is a dense prefix starting at 1; then
// starts the child again on the same directory. STRATA_LONG=1 runs more
// rounds.
func TestKill9KeepsAcknowledgedEntries(t *testing.T) {
	if os.Getenv(childDirEnv) != "" {
		t.Skip("in the child")
	}
	rounds := 20
	if os.Getenv("STRATA_LONG") == "1" {
		rounds = 200
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var acked uint64 // highest index any child acknowledged
	var totalAcks, lostUnacked, keptUnacked int
	start := time.Now()
	for round := range rounds {
		ack, n := runAndKill(t, dir, time.Duration(rng.IntN(80_000))*time.Microsecond)
		totalAcks += n
		if ack > acked {
			acked = ack
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9: %v", round, err)
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if acked > 0 && first != 1 {
			t.Fatalf("round %d: first index %d, want 1", round, first)
		}
		if last < acked {
			t.Fatalf("round %d: last index %d after kill -9, but %d was acknowledged", round, last, acked)
		}
		for idx := first; idx <= last && idx > 0; idx++ {
			var got raft.Log
			if err := s.GetLog(idx, &got); err != nil {
				t.Fatalf("round %d: GetLog(%d) in %d..%d: %v", round, idx, first, last, err)
			}
			if want := testLog(idx, got.Term); !sameLog(&got, want) {
				t.Fatalf("round %d: GetLog(%d) = %+v, want %+v", round, idx, got, *want)
			}
		}
		if last > acked {
			keptUnacked++ // written and synced, killed before the ack line
		} else {
			lostUnacked++
		}
		acked = last // the next child continues from what survived
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("kill -9 rounds=%d acknowledged batches=%d final last index=%d rounds with synced-but-unacked tail=%d (others=%d) in %v",
		rounds, totalAcks, acked, keptUnacked, lostUnacked, time.Since(start).Round(time.Millisecond))
}

// runAndKill starts the child on dir, lets it append for about d after it is
// ready, kill -9s it and reaps it. It returns the last acknowledged index and
// the number of acknowledgements read.
func runAndKill(t *testing.T, dir string, d time.Duration) (uint64, int) {
	t.Helper()
	child := proctest.Start(t, proctest.Spec{Name: "raftstore-appender", Path: os.Args[0], Lines: true,
		Args: []string{"-test.run=^TestKill9Child$", "-test.count=1"}, Env: []string{childDirEnv + "=" + dir}})
	lines := child.Lines()
	var acked uint64
	var n int
	readLine := func(l string) {
		switch {
		case strings.HasPrefix(l, "ack "):
			v, err := strconv.ParseUint(l[4:], 10, 64)
			if err != nil {
				t.Errorf("bad child line %q", l)
				return
			}
			acked, n = v, n+1
		case strings.HasPrefix(l, "error"):
			t.Errorf("child: %s", l)
		}
	}
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "ready ") {
			t.Fatalf("child did not start: %q", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child did not report ready")
	}
	deadline := time.After(d)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("child exited before the kill")
			}
			readLine(l)
		case <-deadline:
			break wait
		}
	}
	child.Kill()
	// Lines the child wrote before dying are acknowledgements too.
	for l := range lines {
		readLine(l)
	}
	if st := child.ExitState(); st.Success() {
		t.Fatalf("child exit: %v, want killed", st)
	}
	return acked, n
}
