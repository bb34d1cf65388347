package clustertest

import (
	"path/filepath"
	"testing"
	"time"
)

// StartAllInOne runs the `strata run` binary (every role in one process) on
// loopback ports with its own data directory and waits until it is ready.
// The returned Proc can be killed and restarted like a cluster process.
func StartAllInOne(t testing.TB) *Proc {
	t.Helper()
	bins := Build(t)
	c := &Cluster{t: t, Dir: t.TempDir()}
	t.Cleanup(c.KillAll)
	p := &Proc{Name: "strata", c: c, bin: filepath.Join(bins, "strata"),
		DataDir: filepath.Join(c.Dir, "strata"), HealthAddr: freeAddr(t), MetricsAddr: freeAddr(t), ClientAddr: freeAddr(t)}
	p.args = []string{"run", "--data-dir", p.DataDir, "--ops-host", "127.0.0.1",
		"--health-check-port", port(p.HealthAddr), "--exporter-port", port(p.MetricsAddr), "--enable-exporter",
		"--gateway.client-listen", p.ClientAddr}
	c.Procs = append(c.Procs, p)
	p.Start()
	p.WaitReady(60 * time.Second)
	return p
}
