// Package metrictest reads a process's Prometheus registry in tests: every
// sample keyed "name{label=value,...}" (Series, Key) and the value of one
// sample (Value), so a test states the series it expects as plain strings
// and numbers.
package metrictest
