package gateway

import (
	"testing"
	"time"
)

// TestDeleteSaysCleanupPendingOnlyWhileOutstanding: DELETE waits briefly
// for node-local cleanup and adds cleanup_pending=true only when it is
// still outstanding afterwards (spec 3.1), not for the normal asynchronous
// cleanup of a healthy cluster.
func TestDeleteSaysCleanupPendingOnlyWhileOutstanding(t *testing.T) {
	c, cl := startDialed(t)
	cl.OK("CREATE topic=healthy partitions=1")
	if got := cl.OK("DELETE topic=healthy"); got != "OK topic=healthy deleted=true" {
		t.Fatalf("healthy DELETE = %q", got)
	}

	cl.OK("CREATE topic=stuck partitions=1")
	c.stopCleanup() // p1 is down: the topic stays DELETING
	start := time.Now()
	if got := cl.OK("DELETE topic=stuck"); got != "OK topic=stuck deleted=true cleanup_pending=true" {
		t.Fatalf("DELETE with a node that never cleans up = %q", got)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("DELETE waited %v for cleanup", d)
	}
	// A repeat with if_exists sees the deletion still in progress.
	if got := cl.OK("DELETE topic=stuck if_exists=true"); got != "OK topic=stuck deleted=false cleanup_pending=true" {
		t.Fatalf("repeated DELETE = %q", got)
	}
}
