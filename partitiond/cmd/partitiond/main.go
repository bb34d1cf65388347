// Command partitiond is Strata's partition server: it hosts the partition
// logs metad assigns to it and serves PartitionService over mTLS gRPC.
package main

import (
	"os"

	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"

	"github.com/strataio/strata/partitiond"
)

// config is the binary's configuration file: the common process settings at
// the top level and the role settings under "partitiond".
type config struct {
	node.Common `yaml:",inline"`
	Partitiond  partitiond.Config `yaml:"partitiond"`
}

func partitiondBinary() node.Binary[config] {
	return node.Binary[config]{
		Name:  "partitiond",
		Usage: "partitiond hosts partition logs assigned by metad and serves appends and fetches (internal gRPC, mTLS).",
		Config: func() *config {
			return &config{Common: node.DefaultCommon(9192), Partitiond: partitiond.DefaultConfig()}
		},
		Process: func(c *config) *node.ProcessConfig { return &c.ProcessConfig },
		Modules: func(p *node.Process, c *config) ([]node.Module, error) {
			return []node.Module{c.RoleModule(p, pki.RolePartitiond, func(env *node.RoleEnv) (node.Service, error) {
				cfg := c.Partitiond
				if len(cfg.MetadAddrs) == 0 {
					cfg.MetadAddrs = c.MetadAddrs
				}
				return partitiond.New(env, cfg)
			})}, nil
		},
	}
}

func main() { os.Exit(node.Main(partitiondBinary(), os.Args[1:], os.Stdout, os.Stderr)) }
