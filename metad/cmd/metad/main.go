// Command metad runs Strata's Raft metadata service: the MetadataService on
// the internal gRPC port (default 9190) and Raft over mTLS on its own port
// (default 9191).
package main

import (
	"os"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/metad"
)

// config is the metad binary's configuration file: the common process
// settings at the top level and metad's own under `metad:`.
type config struct {
	node.Common `yaml:",inline"`
	Metad       metad.Config `yaml:"metad"`
}

func main() {
	os.Exit(node.Main(node.RoleBinary[config](pki.RoleMetad,
		"metad is the Raft metadata service: topics, nodes, placement, leaders, ISR.\n"+
			"Distributed: give every metad the same --metad.voters id=host:port list (Raft addresses).\n"+
			"With no voters a new data directory bootstraps a single-voter cluster.",
		func() *config { return &config{Common: node.DefaultCommon(9190), Metad: metad.DefaultConfig()} },
		func(env *node.RoleEnv, c *config) (node.Service, error) { return metad.New(env, c.Metad) }),
		os.Args[1:], os.Stdout, os.Stderr))
}
