package replica

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// A fetch's replica id is the caller's certificate identity, never its
// word (CVE-2018-1288): a follower's reported offset moves the HWM, so a
// fetch claiming another replica's id could commit records that replica
// does not hold. The cases send the same request, which claims the whole
// log is held; only the last one, from p3's own certificate, is accepted,
// and it moves the HWM.
func TestReplicaFetchIdentityIsTheCertificate(t *testing.T) {
	// p3, a replica in the ISR, is not running: the HWM waits for it.
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2, stopped: []string{"p3"}})
	leader := c.part("p1")
	c.appendOne("p1", "secret-0", "secret-1")
	waitFor(t, "p2 to replicate", func() bool { return c.part("p2").DurableEnd() == 2 })
	if h := leader.HighWatermark(); h != 0 {
		t.Fatalf("HWM %d before p3 reported", h)
	}
	addr := c.member("p1").addr
	metrics := c.member("p1").metrics

	fetch := func(t *testing.T, role pki.Role, certID, replicaID string) (*partitionv1.ReplicaFetchResponse, error) {
		t.Helper()
		cc, err := rpc.Dial(addr, rpc.ClientOptions{Source: c.ca.Source(t, role, certID)})
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		stream, err := partitionv1.NewPartitionServiceClient(cc).ReplicaFetch(ctx)
		if err != nil {
			return nil, err
		}
		// One request, one answer; a stream the server ended fails Send
		// with io.EOF, and Recv then returns its status.
		roundTrip := func(offset uint64, last *uint64) (*partitionv1.ReplicaFetchResponse, error) {
			err := stream.Send(&partitionv1.ReplicaFetchRequest{ReplicaId: replicaID, Partitions: []*partitionv1.ReplicaFetchPartition{{
				Topic: topic, Partition: partID, LifecycleEpoch: lifecycle, LeaderEpoch: 1, FetchOffset: offset, LastFetchedEpoch: last,
			}}})
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return stream.Recv()
		}
		resp, err := roundTrip(0, nil)
		if err != nil {
			return nil, err
		}
		// The second request claims the log is held (offset 2, epoch 1).
		last := uint64(1)
		if _, err := roundTrip(2, &last); err != nil {
			return resp, err
		}
		return resp, stream.CloseSend()
	}

	refusals := []struct {
		name         string
		role         pki.Role
		cert, claims string
		countedByMgr bool // refused by Serve (the policy refuses the gateway first)
	}{
		{"PartitiondCertificateClaimsAnotherReplica", pki.RolePartitiond, "p2", "p3", true},
		{"GatewayCertificate", pki.RoleGateway, "g1", "p3", false},
		{"GatewayCertificateNamedLikeTheReplica", pki.RoleGateway, "p3", "p3", false},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			before := metrics.RefusedReplicaIDs.Load()
			resp, err := fetch(t, tc.role, tc.cert, tc.claims)
			wantCode(t, err, errcode.PeerRoleForbidden)
			if resp != nil {
				t.Fatalf("refused caller got an answer: %v", resp)
			}
			counted := metrics.RefusedReplicaIDs.Load() - before
			if (counted == 1) != tc.countedByMgr {
				t.Fatalf("refused replica ids counted %d", counted)
			}
			if h := leader.HighWatermark(); h != 0 {
				t.Fatalf("a refused fetch moved the HWM to %d", h)
			}
		})
	}

	t.Run("NotAReplica", func(t *testing.T) {
		resp, err := fetch(t, pki.RolePartitiond, "p4", "p4")
		if err != nil {
			t.Fatal(err)
		}
		d := resp.GetPartitions()[0]
		if d.GetError() == nil {
			t.Fatalf("a non-replica's fetch was served: %d bytes of batches", len(d.GetBatches()))
		}
		wantCode(t, errcode.FromProto(d.GetError()), errcode.NotAuthorizedForPartition)
		if len(d.GetBatches()) != 0 || d.GetDiverging() != nil {
			t.Fatalf("a non-replica got %d bytes of batches", len(d.GetBatches()))
		}
		if h := leader.HighWatermark(); h != 0 {
			t.Fatalf("a non-replica's fetch moved the HWM to %d", h)
		}
		for _, ps := range c.mgr("p1").Stats() {
			for _, f := range ps.Followers {
				if f.ID == "p4" {
					t.Fatal("progress recorded for a non-replica")
				}
			}
		}
	})

	// The control: p3's own certificate fetches as p3, gets the batches,
	// and its claim commits them.
	t.Run("TheReplicaItself", func(t *testing.T) {
		resp, err := fetch(t, pki.RolePartitiond, "p3", "p3")
		if err != nil {
			t.Fatal(err)
		}
		d := resp.GetPartitions()[0]
		if d.GetError() != nil || len(d.GetBatches()) == 0 {
			t.Fatalf("p3's fetch: error %v, %d bytes", d.GetError(), len(d.GetBatches()))
		}
		waitFor(t, "p3's report to commit the log", func() bool { return leader.HighWatermark() == 2 })
	})
}
