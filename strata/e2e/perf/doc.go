// Package perf holds the deployment benchmarks that need real processes:
// they print figures (never assert timings) and run only when asked
// (STRATA_BENCH=1; make bench-replication).
package perf
