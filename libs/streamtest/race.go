// Package streamtest holds the racing-appender check of an aggregate
// stream's optimistic concurrency (SERVICE-SPEC 2.5): partitiond's
// StreamService test and the black-box suite run it at their own level
// (gRPC to the leader, Wire v2 through the gateways) with one Appender and
// reader each.
package streamtest

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// VersionsEnv overrides how many versions a race appends: the spec's proof
// size is 10,000 (`make race-streams`), CI runs fewer.
const VersionsEnv = "STRATA_STREAM_RACE_VERSIONS"

// Versions returns VersionsEnv's count, ci when it is unset.
func Versions(t testing.TB, ci uint64) uint64 {
	t.Helper()
	v := os.Getenv(VersionsEnv)
	if v == "" {
		return ci
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("%s=%q is not a positive integer", VersionsEnv, v)
	}
	return n
}

// Appender appends the event of version with payload to the raced
// aggregate and returns the version the answer names.
type Appender func(version uint64, payload string) (uint64, error)

// Event is one event read back.
type Event struct {
	Version uint64
	Payload string
}

// Result is what a race measured.
type Result struct {
	// Conflicts is how many appends lost with version_conflict.
	Conflicts int
	// Elapsed is the time until every appender was done.
	Elapsed time.Duration
}

// Race runs len(appenders) appenders at once for versions 1..total of one
// aggregate, appender a writing payload "a<a>". Each appends the version
// after the last one it saw taken: exactly one must win each version, and
// every loser must get version_conflict with expected= the version it
// asked for and current= at or above it (someone else holds it). Then
// read, called with the next version until total, must give back every
// version densely, each with its winner's payload. The first violation is
// the error.
func Race(total uint64, appenders []Appender, read func(from uint64) ([]Event, error)) (Result, error) {
	var (
		mu        sync.Mutex
		winners   = map[uint64][]int{}
		conflicts int
		first     error
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	start := time.Now()
	for a, appendFn := range appenders {
		wg.Go(func() {
			for next := uint64(1); next <= total; {
				got, err := appendFn(next, fmt.Sprintf("a%d", a))
				if err == nil {
					if got != next {
						fail(fmt.Errorf("append %d answered version %d", next, got))
						return
					}
					mu.Lock()
					winners[next] = append(winners[next], a)
					mu.Unlock()
					next++
					continue
				}
				e, ok := errcode.As(err)
				if !ok || e.Code != errcode.VersionConflict.Name() {
					fail(fmt.Errorf("append %d: %w", next, err))
					return
				}
				cur, perr := strconv.ParseUint(e.Field("current"), 10, 64)
				if perr != nil || cur < next || e.Field("expected") != strconv.FormatUint(next, 10) {
					fail(fmt.Errorf("append %d lost with current %q expected %q: another appender must hold %d",
						next, e.Field("current"), e.Field("expected"), next))
					return
				}
				mu.Lock()
				conflicts++
				mu.Unlock()
				next = cur + 1
			}
		})
	}
	wg.Wait()
	res := Result{Conflicts: conflicts, Elapsed: time.Since(start)}
	if first != nil {
		return res, first
	}
	for v := uint64(1); v <= total; v++ {
		if len(winners[v]) != 1 {
			return res, fmt.Errorf("version %d won by appenders %v", v, winners[v])
		}
	}
	for from := uint64(1); from <= total; {
		evs, err := read(from)
		if err != nil || len(evs) == 0 {
			return res, fmt.Errorf("read back from %d: %d events, err %v", from, len(evs), err)
		}
		for _, ev := range evs {
			if from > total {
				return res, fmt.Errorf("read back version %d beyond the %d appended", ev.Version, total)
			}
			if want := fmt.Sprintf("a%d", winners[from][0]); ev.Version != from || ev.Payload != want {
				return res, fmt.Errorf("read back version %d (want %d) payload %q, want %q", ev.Version, from, ev.Payload, want)
			}
			from++
		}
	}
	return res, nil
}
