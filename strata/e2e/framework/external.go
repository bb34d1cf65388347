package framework

import (
	"os"
	"strings"
	"testing"
)

// GatewaysEnv names the environment variable listing the client addresses
// of an external deployment's gateways, comma separated (deploy/compose/test.sh
// sets it to the compose stack's published ports).
const GatewaysEnv = "STRATA_E2E_GATEWAYS"

// External is an already running deployment whose gateways GatewaysEnv
// lists; the test is skipped when it is unset. Only the client addresses
// are known: scenarios that read health or metrics do not run here.
func External(t testing.TB) Cluster {
	t.Helper()
	list := os.Getenv(GatewaysEnv)
	if list == "" {
		t.Skip(GatewaysEnv + " not set: no external deployment to test")
	}
	var e external
	for _, addr := range strings.Split(list, ",") {
		e = append(e, Gateway{ClientAddr: strings.TrimSpace(addr)})
	}
	return e
}

type external []Gateway

func (e external) Name() string        { return "the external deployment" }
func (e external) Gateways() []Gateway { return e }
