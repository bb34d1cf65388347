// Command coordinatord is Strata's group coordinator: it owns the consumer
// groups of the __consumer_offsets partitions the consistent-hash ring gives
// it and serves CoordinatorService over mTLS gRPC.
package main

import (
	"os"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"

	"github.com/strataio/strata/coordinatord"
)

// config is the binary's configuration file: the common process settings at
// the top level and the role settings under "coordinatord".
type config struct {
	node.Common  `yaml:",inline"`
	Coordinatord coordinatord.Config `yaml:"coordinatord"`
}

func coordinatordBinary() node.Binary[config] {
	return node.RoleBinary[config](pki.RoleCoordinatord,
		"coordinatord coordinates consumer groups and stores committed offsets in __consumer_offsets (internal gRPC, mTLS).",
		func() *config {
			return &config{Common: node.DefaultCommon(9193), Coordinatord: coordinatord.DefaultConfig()}
		},
		func(env *node.RoleEnv, c *config) (node.Service, error) {
			cfg := c.Coordinatord
			cfg.MetadAddrs = c.MetadAddrsOr(cfg.MetadAddrs)
			return coordinatord.New(env, cfg)
		})
}

func main() { os.Exit(node.Main(coordinatordBinary(), os.Args[1:], os.Stdout, os.Stderr)) }
