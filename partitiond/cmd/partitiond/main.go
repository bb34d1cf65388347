// Command partitiond is Strata's partition server: it hosts the partition
// logs metad assigns to it and serves PartitionService over mTLS gRPC.
package main

import (
	"os"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"

	"github.com/strataio/strata/partitiond/server"
)

// config is the binary's configuration file: the common process settings at
// the top level and the role settings under "partitiond".
type config struct {
	node.Common `yaml:",inline"`
	Partitiond  server.Config `yaml:"partitiond"`
}

func partitiondBinary() node.Binary[config] {
	return node.Binary[config]{
		Name:  "partitiond",
		Role:  pki.RolePartitiond,
		Usage: "partitiond hosts partition logs assigned by metad and serves appends and fetches (internal gRPC, mTLS).",
		Config: func() *config {
			return &config{Common: node.DefaultCommon(9192), Partitiond: server.DefaultConfig()}
		},
		Common: func(c *config) *node.Common { return &c.Common },
		Build: func(env *node.RoleEnv, c *config) (node.Role, error) {
			cfg := c.Partitiond
			if len(cfg.MetadAddrs) == 0 {
				cfg.MetadAddrs = c.MetadAddrs
			}
			return server.New(env, cfg)
		},
	}
}

func main() { os.Exit(node.Main(partitiondBinary(), os.Args[1:], os.Stdout, os.Stderr)) }
