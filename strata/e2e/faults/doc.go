// Package faults holds the tests of faults that only real deployments or
// the in-process server's internals can stage: kill -9 of a whole deployment
// under load (the all-in-one binary and a process cluster, one scenario body
// each), kill -9 of single roles of a process cluster, and a corrupt
// __consumer_offsets record that must keep the in-process all-in-one not
// ready after a restart.
package faults
