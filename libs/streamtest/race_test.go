package streamtest

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// aggregate is an in-memory stream. With check it keeps the spec's version
// rule (current + 1 or version_conflict); without, it takes every append,
// as a store that lost the check would. lie makes reads return another
// payload.
type aggregate struct {
	mu     sync.Mutex
	events map[uint64]string
	check  bool
	lie    bool
}

func (g *aggregate) append(v uint64, payload string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := uint64(len(g.events))
	if g.check && v != cur+1 {
		return 0, errcode.VersionConflict.New("version taken", "expected", strconv.FormatUint(v, 10),
			"current", strconv.FormatUint(cur, 10))
	}
	g.events[v] = payload
	return v, nil
}

func (g *aggregate) read(from uint64) ([]Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Event
	for v := from; v < from+10 && g.events[v] != ""; v++ {
		p := g.events[v]
		if g.lie {
			p += "!"
		}
		out = append(out, Event{Version: v, Payload: p})
	}
	return out, nil
}

func race(g *aggregate, total uint64, appenders int) (Result, error) {
	apps := make([]Appender, appenders)
	for i := range apps {
		apps[i] = g.append
	}
	return Race(total, apps, g.read)
}

func TestRacePassesAStreamThatKeepsTheRule(t *testing.T) {
	g := &aggregate{events: map[uint64]string{}, check: true}
	res, err := race(g, 300, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.events) != 300 {
		t.Fatalf("%d events appended, want 300", len(g.events))
	}
	t.Logf("%d conflicts in %v", res.Conflicts, res.Elapsed)
}

func TestRaceFailsWhatBreaksTheRule(t *testing.T) {
	wrongCode := func(uint64, string) (uint64, error) { return 0, errcode.Internal.New("down") }
	wrongVersion := func(v uint64, _ string) (uint64, error) { return v + 1, nil }
	for _, tc := range []struct {
		name string
		run  func() (Result, error)
		want string
	}{
		{"two winners", func() (Result, error) { return race(&aggregate{events: map[uint64]string{}}, 20, 2) }, "won by appenders"},
		{"another payload read back", func() (Result, error) {
			return race(&aggregate{events: map[uint64]string{}, check: true, lie: true}, 20, 2)
		}, "payload"},
		{"a loser without version_conflict", func() (Result, error) { return Race(5, []Appender{wrongCode}, nil) }, "append 1"},
		{"another version answered", func() (Result, error) { return Race(5, []Appender{wrongVersion}, nil) }, "answered version 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.run()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
}
