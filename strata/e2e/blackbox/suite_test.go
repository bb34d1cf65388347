package blackbox

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

// suite is every black-box scenario, in the order a runner plays them on its
// one deployment. A scenario added here runs on every runner below.
var suite = []framework.Scenario[framework.Cluster]{
	{Name: "ProduceReadGroupCommit", Run: produceReadGroupCommit},
	{Name: "TopicAdmin", Run: topicAdmin},
	{Name: "BugTruncateThenListOffsetsStale", Run: bugTruncateThenListOffsetsStale},
	{Name: "BugRecreateAfterTruncateSeesOldIncarnation", Run: bugRecreateAfterTruncateSeesOldIncarnation},
	{Name: "HealthyDeleteAndTruncateSayNoCleanupPending", Run: healthyDeleteAndTruncateSayNoCleanupPending},
	{Name: "BugMaxLengthTopicNeverOpens", Run: bugMaxLengthTopicNeverOpens},
	{Name: "Publish", Run: publish},
	{Name: "ConsumeAndStream", Run: consumeAndStream},
	{Name: "BugAcksZeroFailureAnswered", Run: bugAcksZeroFailureAnswered},
	{Name: "Groups", Run: groups},
	{Name: "GroupAdmin", Run: groupAdmin},
	{Name: "PollingConsumerExactlyOnce", Run: pollingConsumerExactlyOnce},
	{Name: "CLI", Run: cliCommands},
	{Name: "ClusterStatus", Run: clusterStatusAndList},
	{Name: "HealthAndMetrics", Run: healthAndMetrics},
	{Name: "ConnectionLimit", Run: connectionLimit},
	{Name: "MalformedFrames", Run: malformedFrames},
	{Name: "EventSourcing", Run: eventSourcing},
	{Name: "Transactions", Run: transactions},
	{Name: "TxnProcessorExactlyOnce", Run: txnProcessorExactlyOnce},
}

// TestBlackboxAllInOne runs the suite against the all-in-one server in this
// test process.
func TestBlackboxAllInOne(t *testing.T) {
	framework.RunSuite(t, framework.Cluster(framework.StartAllInOne(t)), suite)
}

// TestBlackboxProcessCluster runs the suite against one process cluster of
// role binaries (3 metad, 3 partitiond, 2 coordinatord, 2 gateways); the
// scenarios talk to its first gateway unless they say otherwise.
func TestBlackboxProcessCluster(t *testing.T) {
	framework.RunSuite(t, framework.Cluster(framework.StartProcessCluster(t, clustertest.FullSpec)), suite)
}

// Shorthands for the catalogue's classes, to keep the tables readable.
const (
	cValidation = errcode.ClassValidation
	cAuthz      = errcode.ClassAuthorization
	cAvail      = errcode.ClassAvailability
	cConflict   = errcode.ClassConflict
	cFencing    = errcode.ClassFencing
	cNotFound   = errcode.ClassNotFound
)
