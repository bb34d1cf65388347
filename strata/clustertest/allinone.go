package clustertest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/strataio/strata/libs/looptest"
)

// StartAllInOne runs the `strata run` binary (every role in one process) on
// loopback ports with its own data directory and waits until it is ready;
// extraArgs are appended to its flags. The returned Proc can be killed and
// restarted like a cluster process.
func StartAllInOne(t testing.TB, extraArgs ...string) *Proc {
	t.Helper()
	bins := Build(t)
	c := &Cluster{t: t, Dir: t.TempDir()}
	p := &Proc{Name: "strata", c: c, bin: filepath.Join(bins, "strata"),
		DataDir: filepath.Join(c.Dir, "strata"), HealthAddr: looptest.FreeAddr(t), MetricsAddr: looptest.FreeAddr(t), ClientAddr: looptest.FreeAddr(t)}
	p.args = []string{"run", "--data-dir", p.DataDir, "--ops-host", "127.0.0.1",
		"--health-check-port", looptest.Port(p.HealthAddr), "--exporter-port", looptest.Port(p.MetricsAddr), "--enable-exporter",
		"--gateway.client-listen", p.ClientAddr}
	p.args = append(p.args, extraArgs...)
	c.Procs = append(c.Procs, p)
	p.Start()
	p.WaitReady(60 * time.Second)
	return p
}
