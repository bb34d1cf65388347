package faults

import (
	"testing"

	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// kill9Suite is every scenario that stops a whole deployment of real
// processes (SIGKILL, or SIGTERM for a graceful stop) and starts it again on
// the same data.
var kill9Suite = []framework.Scenario[framework.Killable]{
	{Name: "AcknowledgedAndCommittedSurviveKill9", Run: acknowledgedAndCommittedSurviveKill9},
	{Name: "Kill9UnderLoadLosesNoAck", Run: kill9UnderLoadLosesNoAck},
	{Name: "GracefulStopUnderLoadFailsOnlyRetryably", Run: gracefulStopUnderLoadFailsOnlyRetryably},
	{Name: "StreamsSurviveKill9", Run: streamsSurviveKill9},
	{Name: "TransactionsSurviveKill9", Run: transactionsSurviveKill9},
	{Name: "TxnStreamsSurviveKill9", Run: txnStreamsSurviveKill9},
}

// TestKill9AllInOneBinary runs kill9Suite against the `strata run` binary.
func TestKill9AllInOneBinary(t *testing.T) {
	framework.RunSuite(t, framework.Killable(framework.StartAllInOneBinary(t)), kill9Suite)
}

// TestKill9ProcessCluster runs kill9Suite against a process cluster of role
// binaries, every process killed at once.
func TestKill9ProcessCluster(t *testing.T) {
	framework.RunSuite(t, framework.Killable(framework.StartProcessCluster(t, clustertest.FullSpec)), kill9Suite)
}
