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
	return node.Main(node.Binary[config]{
		Name:  "gateway",
		Usage: "Strata gateway: serves Wire v2 clients and routes commands to metad, partitiond and coordinatord over mTLS gRPC.",
		Config: func() *config {
			return &config{Common: node.DefaultCommon(9194), Gateway: gateway.DefaultConfig()}
		},
		Process: func(c *config) *node.ProcessConfig { return &c.ProcessConfig },
		Modules: func(p *node.Process, c *config) ([]node.Module, error) {
			return []node.Module{c.RoleModule(p, pki.RoleGateway, func(env *node.RoleEnv) (node.Service, error) {
				cfg := c.Gateway
				if len(cfg.MetadAddrs) == 0 {
					cfg.MetadAddrs = c.MetadAddrs
				}
				return gateway.New(env, cfg)
			})}, nil
		},
	}, args, stdout, stderr)
}
