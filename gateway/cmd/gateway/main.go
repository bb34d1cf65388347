// Command gateway runs the Strata gateway role: the Wire v2 client listener
// (default :9000) in front of metad, partitiond and coordinatord.
package main

import (
	"io"
	"os"

	"github.com/strataio/strata/gateway"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
)

// config is the gateway binary's configuration file: the process settings at
// the top level and the role settings under `gateway:`.
type config struct {
	node.Common `yaml:",inline"`
	Gateway     gateway.Config `yaml:"gateway"`
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	return node.Main(node.RoleBinary[config](pki.RoleGateway,
		"Strata gateway: serves Wire v2 clients and routes commands to metad, partitiond and coordinatord over mTLS gRPC.",
		func() *config { return &config{Common: node.DefaultCommon(9194), Gateway: gateway.DefaultConfig()} },
		func(env *node.RoleEnv, c *config) (node.Service, error) {
			cfg := c.Gateway
			cfg.MetadAddrs = c.MetadAddrsOr(cfg.MetadAddrs)
			return gateway.New(env, cfg)
		}), args, stdout, stderr)
}
