// Package proctest runs real processes for tests: the role binaries, the
// all-in-one, or the test binary itself as a child. It is the one base of
// every kill -9 test and of strata/clustertest.
//
// Build compiles main packages once per test process (RemoveBuilds, from
// TestMain, deletes them). Start runs a binary with arguments and
// environment; its stdout and stderr go to a log file (kept across
// restarts), or, with Spec.Lines, stdout arrives line by line for child
// protocols such as "ack <offset>". A Proc can be killed with SIGKILL,
// stopped with SIGTERM, paused and resumed with SIGSTOP/SIGCONT, restarted
// on the same arguments, and waited on until its /ready answers 200. When
// the test ends every process is killed (t.Cleanup), and when the test has
// failed the end of each log is printed. Children run in their own process
// group and die with the test binary (Pdeathsig), so none outlives a test
// binary that is killed itself.
//
// Ports for children come from libs/looptest (FreeAddr), which reserves
// them across test processes.
package proctest
