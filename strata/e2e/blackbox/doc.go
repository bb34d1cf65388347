// Package blackbox holds the black-box suite: scenarios that drive a Strata
// deployment only through its public listeners (Wire v2 client port, health
// and metrics HTTP) with libs/client, raw libs/wire frames and the strata
// CLI. Each scenario is written once against framework.Cluster; the suite
// runs against the in-process all-in-one and against a process cluster of
// role binaries (suite_test.go), and its produce/read/commit scenario
// against an external deployment such as the compose stack
// (TestScenarioExternal).
package blackbox
