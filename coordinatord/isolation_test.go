package coordinatord

import (
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/groups"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// TestSlowWriteOfOneGroupDoesNotBlockAnother stalls the offsets partition
// under a commit of group A and checks that group B of the same partition
// still answers heartbeats; A's commit completes once writes resume.
func TestSlowWriteOfOneGroupDoesNotBlockAnother(t *testing.T) {
	c, co := startSingle(t, "t", 1)
	ctx := ctxT(t)
	a := "a0"
	b := ""
	for i := 1; b == ""; i++ {
		if n := fmt.Sprintf("b%d", i); groups.Partition(n, 16) == groups.Partition(a, 16) {
			b = n
		}
	}
	ja, err := co.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: a, Member: "m", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	jb, err := co.client.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: b, Member: "m", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	resume := c.part.On("Append", 0, fakerpc.Fail(errcode.ReplicationUnavailable.New("injected failure")))
	done := make(chan error, 1)
	go func() {
		_, err := co.client.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: a, Topic: "t", Partition: 0, Offset: 5,
			Member: ja.GetMember(), Generation: u64(ja.GetGeneration())})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the commit is now retrying under a's lock
	start := time.Now()
	if _, err := co.client.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: b, Member: jb.GetMember(), Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("heartbeat of another group waited %v behind a stalled write", d)
	}
	select {
	case err := <-done:
		t.Fatalf("commit finished while writes fail: %v", err)
	default:
	}
	resume()
	if err := <-done; err != nil {
		t.Fatalf("commit after writes resumed: %v", err)
	}
	fo, err := co.client.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: a, Topic: "t", Partition: 0})
	if err != nil || fo.GetOffset() != 5 {
		t.Fatalf("offset %v %v", fo, err)
	}
}
