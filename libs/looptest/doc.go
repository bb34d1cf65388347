// Package looptest holds what tests of every module repeat around servers
// on loopback: a free loopback port for a server or a child process to bind
// (FreeAddr, FreePort), a bounded wait for a condition (Eventually), a
// wait for a /ready endpoint (WaitReady), and a bounded context for a
// test's calls (Context).
//
// Ports come from below the kernel's ephemeral range, so no outgoing
// connection of this or another test can be given one between the pick and
// the bind, and each is reserved for the life of the test process with a
// byte-range lock on one shared file, so test processes of different
// packages (go test runs them in parallel) never pick the same port.
package looptest
