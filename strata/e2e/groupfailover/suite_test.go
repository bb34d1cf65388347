package groupfailover

import (
	"testing"

	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
)

func TestMain(m *testing.M) { framework.Main(m) }

// TestGroupFailoverAllInOne runs the three-consumer failover on the
// in-process all-in-one server with a short session timeout.
func TestGroupFailoverAllInOne(t *testing.T) {
	c := framework.StartAllInOne(t, func(c *allinone.Config) {
		c.Coordinatord.SessionTimeout = failoverSession
		c.Coordinatord.ExpiryCheckInterval = failoverExpiry
	})
	failover(t, c)
}

// TestGroupsProcessCluster runs issue 6's group tests on one process cluster
// (3 metad, 3 partitiond, 2 coordinatord, 2 gateways). The processes inherit
// the test's environment, which shortens the coordinators' session timeout
// and metad's node lease so that failures are noticed in seconds.
func TestGroupsProcessCluster(t *testing.T) {
	t.Setenv("STRATA_COORDINATORD_SESSION_TIMEOUT", failoverSession.String())
	t.Setenv("STRATA_COORDINATORD_EXPIRY_CHECK_INTERVAL", failoverExpiry.String())
	t.Setenv("STRATA_METAD_NODE_LEASE_TIMEOUT", nodeLease.String())
	c := framework.StartProcessCluster(t, clustertest.FullSpec)

	t.Run("three consumers fail over", func(t *testing.T) {
		failover(t, c)
	})
	t.Run("coordinator kill -9 during commits", func(t *testing.T) {
		coordinatorKill(t, c)
	})
}
