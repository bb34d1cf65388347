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
	return node.RoleBinary[config](pki.RolePartitiond,
		"partitiond hosts partition logs assigned by metad and serves appends and fetches (internal gRPC, mTLS).",
		func() *config {
			return &config{Common: node.DefaultCommon(9192), Partitiond: partitiond.DefaultConfig()}
		},
		func(env *node.RoleEnv, c *config) (node.Service, error) {
			cfg := c.Partitiond
			cfg.MetadAddrs = c.MetadAddrsOr(cfg.MetadAddrs)
			return partitiond.New(env, cfg)
		})
}

func main() { os.Exit(node.Main(partitiondBinary(), os.Args[1:], os.Stdout, os.Stderr)) }
