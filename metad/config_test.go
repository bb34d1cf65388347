package metad

import (
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

func TestParseVoters(t *testing.T) {
	vs, err := parseVoters([]string{"m1=10.0.0.1:9191", " m2=host-b:9191 ", ""})
	if err != nil || len(vs) != 2 || vs[1].id != "m2" || vs[1].addr != "host-b:9191" {
		t.Fatalf("%v %v", vs, err)
	}
	for _, bad := range [][]string{{"m1"}, {"=h:1"}, {"m1=nohost"}, {"m1=a:1", "m1=b:2"}, {"bad id=h:1"}} {
		if _, err := parseVoters(bad); errcode.CodeOf(err) != errcode.InvalidParameter.Name() {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestNewRejectsBadConfigurations(t *testing.T) {
	ca := pkitest.New(t)
	p := node.NewProcess(nil, nil)
	defer p.Close()
	env, err := p.NewRoleEnv(node.RoleOptions{Role: pki.RoleMetad, NodeID: "m1", TLSFiles: ca.Files(t, pki.RoleMetad, "m1"), Listen: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"voters without this node": func(c *Config) { c.Voters = []string{"m2=127.0.0.1:1"} },
		"advertise differs":        func(c *Config) { c.Voters = []string{"m1=127.0.0.1:1"}; c.RaftAdvertise = "127.0.0.1:2" },
		"zero shards":              func(c *Config) { c.TransactionCoordinatorShards = 0 },
		"tiny lease":               func(c *Config) { c.NodeLeaseTimeout = 1 },
	} {
		cfg := fastConfig()
		mut(&cfg)
		if _, err := New(env, cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
