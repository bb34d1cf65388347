package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestScenarioExternal runs the scenario suite against an already running
// deployment whose gateway client addresses are listed in
// STRATA_E2E_GATEWAYS (comma separated), e.g. the docker-compose stack
// (deploy/compose/test.sh sets it). Skipped when unset.
func TestScenarioExternal(t *testing.T) {
	list := os.Getenv("STRATA_E2E_GATEWAYS")
	if list == "" {
		t.Skip("STRATA_E2E_GATEWAYS not set: no external deployment to test")
	}
	scenario(t, strings.Split(list, ","))
}
