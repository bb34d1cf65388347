package command

import (
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// InternalTokenField is the request field that carries a broker-to-broker
// token in the reference protocol (spec 4.9).
const InternalTokenField = "internal_token"

// internalGuard answers an internal broker command (spec 4.9: LIST_SNAPSHOTS,
// FETCH_SNAPSHOT, CATCHUP_SNAPSHOTS, REPLICATE_SNAPSHOT, REPLICATE_MESSAGE,
// and the other cluster-listener commands) sent to the client listener. It
// never lets one through. The spec's two answers, in its order: a request
// without an internal_token is internal_command_unauthorized; one that
// carries a token meets a node with no internal_auth_token configured, so
// internal_auth_not_configured. Strata has no such setting on purpose: its
// broker-to-broker hops are gRPC over mutual TLS (docs/security.md), so a
// shared token could only be a secret that grants nothing. The token is
// never compared with anything, so its value leaks nothing through timing.
func internalGuard(cmd wire.Command, req *wire.Request) error {
	if req == nil || req.Value(InternalTokenField) == "" {
		return errcode.InternalCommandUnauthorized.New("internal broker command on the client listener (no internal_token)", "command", cmd.String())
	}
	return errcode.InternalAuthNotConfigured.New("no internal_auth_token is configured: broker-to-broker hops are gRPC over mutual TLS, no token makes an internal command valid on the client listener", "command", cmd.String())
}
