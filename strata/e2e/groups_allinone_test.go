package e2e

import (
	"testing"

	"github.com/strataio/strata/strata/internal/allinone"
)

// TestGroupFailoverAllInOne runs the three-consumer failover on the
// in-process all-in-one server with a short session timeout.
func TestGroupFailoverAllInOne(t *testing.T) {
	srv := grpStartAllInOne(t, func(c *allinone.Config) {
		c.Coordinatord.SessionTimeout = failoverSession
		c.Coordinatord.ExpiryCheckInterval = failoverExpiry
	})
	grpFailover(t, []string{srv.ClientAddr()})
}
