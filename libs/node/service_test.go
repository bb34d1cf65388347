package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBasicServiceStopCancelsLoopsThenRunsStopping(t *testing.T) {
	var mu sync.Mutex
	var events []string
	record := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	var s *BasicService
	s = NewBasicService("svc", Hooks{
		Starting: func(context.Context) error {
			s.Go(func(ctx context.Context) {
				// A loop started from a loop is owned too.
				s.Go(func(ctx context.Context) { <-ctx.Done(); record("inner done") })
				<-ctx.Done()
				record("outer done")
			})
			return nil
		},
		Stopping: func(context.Context) error {
			record("stopping")
			return nil
		},
	})
	if s.Name() != "svc" {
		t.Fatalf("name %q", s.Name())
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(events, ",")
	mu.Unlock()
	if !strings.HasSuffix(got, ",stopping") || len(events) != 3 {
		t.Fatalf("events %q: want both loops done before stopping", got)
	}
	if s.Context().Err() == nil {
		t.Fatal("service context still live after Stop")
	}
	if s.Go(func(context.Context) { t.Error("loop ran after Stop") }) {
		t.Fatal("Go accepted a loop after Stop")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestBasicServiceStopRunsStoppingOnceWithoutStart(t *testing.T) {
	calls := 0
	s := NewBasicService("svc", Hooks{Stopping: func(context.Context) error { calls++; return nil }})
	for range 2 {
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("Stopping ran %d times, want 1", calls)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
}

func TestBasicServiceStopReportsLoopsThatOutliveTheDeadline(t *testing.T) {
	release := make(chan struct{})
	stopped := false
	s := NewBasicService("svc", Hooks{Stopping: func(context.Context) error { stopped = true; return nil }})
	done := make(chan struct{})
	s.Go(func(context.Context) {
		defer close(done)
		<-release // ignores the service context
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 background loops") {
		t.Fatalf("want a deadline error naming the loop, got %v", err)
	}
	if !stopped {
		t.Fatal("Stopping did not run after the deadline")
	}
	close(release)
	<-done
}

func TestBasicServiceStartTwiceFails(t *testing.T) {
	boom := errors.New("boom")
	s := NewBasicService("svc", Hooks{Starting: func(context.Context) error { return boom }})
	if err := s.Start(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("want boom, got %v", err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("second Start succeeded")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type namedService struct {
	name string
	log  *[]string
}

func (s namedService) Name() string { return s.name }
func (s namedService) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return nil
}
func (s namedService) Stop(context.Context) error {
	*s.log = append(*s.log, "stop "+s.name)
	return nil
}

func TestInitModulesOrdersByDependencies(t *testing.T) {
	var log []string
	mod := func(name string, deps ...string) Module {
		return Module{Name: name, Deps: deps, Init: func() (Service, error) {
			log = append(log, "init "+name)
			return namedService{name: name, log: &log}, nil
		}}
	}
	// Declared out of order: dependencies decide, declaration breaks ties.
	services, err := InitModules([]Module{
		mod("gateway", "metad", "partitiond", "coordinatord"),
		mod("coordinatord", "metad", "partitiond"),
		mod("metad"),
		mod("partitiond", "metad"),
	}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range services {
		names = append(names, s.Name())
	}
	if got, want := strings.Join(names, ","), "metad,partitiond,coordinatord,gateway"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
	if got, want := strings.Join(log, ","), "init metad,init partitiond,init coordinatord,init gateway"; got != want {
		t.Fatalf("init order %s, want %s", got, want)
	}
}

func TestInitModulesRejectsBadDependencies(t *testing.T) {
	none := func() (Service, error) { t.Fatal("Init ran"); return nil, nil }
	cases := []struct {
		name string
		mods []Module
		want string
	}{
		{"unknown", []Module{{Name: "a", Deps: []string{"b"}, Init: none}}, "unknown module b"},
		{"circular", []Module{{Name: "a", Deps: []string{"b"}, Init: none}, {Name: "b", Deps: []string{"a"}, Init: none}}, "circular"},
		{"duplicate", []Module{{Name: "a", Init: none}, {Name: "a", Init: none}}, "twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := InitModules(c.mods, time.Second); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want %q, got %v", c.want, err)
			}
		})
	}
}

func TestInitModulesStopsBuiltServicesWhenAnInitFails(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	_, err := InitModules([]Module{
		{Name: "a", Init: func() (Service, error) { return namedService{name: "a", log: &log}, nil }},
		{Name: "b", Deps: []string{"a"}, Init: func() (Service, error) { return nil, boom }},
	}, time.Second)
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "b: ") {
		t.Fatalf("want b: boom, got %v", err)
	}
	if got := strings.Join(log, ","); got != "stop a" {
		t.Fatalf("lifecycle %q, want stop a", got)
	}
}

// Draining runs first in Stop, while the loops still run on a live service
// context, and only for a service that was started.
func TestBasicServiceDrainsBeforeCancelling(t *testing.T) {
	var s *BasicService
	loopRunning := make(chan struct{})
	var drainedWithLiveContext, drainedWhileLoopRan bool
	s = NewBasicService("x", Hooks{
		Starting: func(context.Context) error {
			s.Go(func(ctx context.Context) {
				close(loopRunning)
				<-ctx.Done()
			})
			return nil
		},
		Draining: func(context.Context) error {
			drainedWithLiveContext = s.Context().Err() == nil
			select {
			case <-loopRunning:
				drainedWhileLoopRan = true
			default:
			}
			return nil
		},
	})
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-loopRunning
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !drainedWithLiveContext || !drainedWhileLoopRan {
		t.Fatalf("drained with a live context %v, while the loop ran %v", drainedWithLiveContext, drainedWhileLoopRan)
	}
	drained := false
	never := NewBasicService("y", Hooks{Draining: func(context.Context) error { drained = true; return nil }})
	if err := never.Stop(context.Background()); err != nil || drained {
		t.Fatalf("a service never started drained (%v, %v)", drained, err)
	}
}
