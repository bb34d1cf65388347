// Package nodetest runs a node.Process in a test, as every role's
// in-process harness does: Start runs the process's services on a
// goroutine and returns once they all started (failing the test when the
// run ends first or does not start in time); Stop cancels the run and waits
// for it, bounded, reporting a failed shutdown. A run stops when its test
// ends, so no process outlives the test that started it.
package nodetest
