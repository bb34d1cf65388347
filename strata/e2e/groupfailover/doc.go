// Package groupfailover holds the consumer group failure tests of issue 6:
// a consumer that dies mid-batch is replaced after its session timeout with
// no record lost (in-process all-in-one and process cluster), and a group's
// commits stay monotonic through kill -9 of the coordinatord that owns it
// (process cluster only: it needs two coordinators).
package groupfailover
