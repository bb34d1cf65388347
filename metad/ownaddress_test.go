package metad

import (
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki/pkitest"
)

// TestLoneVoterKeepsItsRaftAddressCurrent restarts a single voter (the
// all-in-one's metad) on a new port: the Raft configuration must name the
// address it listens on now, not the first boot's.
func TestLoneVoterKeepsItsRaftAddressCurrent(t *testing.T) {
	ca := pkitest.New(t)
	dir := t.TempDir()
	first := startSingle(t, ca, dir)
	firstAddr := first.srv.RaftAddr()
	waitLeaderConfig(t, first, firstAddr)
	first.stop()

	second := startSingle(t, ca, dir) // raft_listen 127.0.0.1:0 again
	if second.srv.RaftAddr() == firstAddr {
		t.Skip("the restart happened to bind the same port")
	}
	waitLeaderConfig(t, second, second.srv.RaftAddr())
}

// waitLeaderConfig waits until in leads and its Raft configuration is one
// voter at addr.
func waitLeaderConfig(t *testing.T, in *instance, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		if n := in.srv.node.Load(); n != nil && n.IsLeader() {
			if f := n.Raft().GetConfiguration(); f.Error() == nil {
				servers := f.Configuration().Servers
				if len(servers) == 1 {
					got = string(servers[0].Address)
					if got == addr {
						return
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("raft configuration names %q, want this voter's address %q", got, addr)
}
