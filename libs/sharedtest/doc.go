// Package sharedtest locates the shared, read-only test inputs (the Wire v2
// vector files under shared/protocol) for tests of every module.
//
// The inputs live outside the repository on purpose: tests read them in place
// and skip with a clear message where they are absent, so the repository never
// carries copies that could drift from the source.
package sharedtest
