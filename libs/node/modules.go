package node

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Module is one unit a process hosts, as data: a named role, the modules
// that must run before it, and the function that builds its service. A
// role binary hosts one module; `strata run` hosts the four roles as
// modules of one process, so both go through the same lifecycle.
type Module struct {
	Name string
	// Deps name the modules this one needs running first: it starts after
	// them and stops before them.
	Deps []string
	// Init builds the module's service (binding its environment). It runs
	// after the Init of every dependency, so it may use what they set up.
	Init func() (Service, error)
}

// InitModules builds mods in dependency order — a module after every
// module it depends on, otherwise in the order given — and returns their
// services in that order, which is the order Process.Run starts them (and
// the reverse of the order it stops them). An unknown or circular
// dependency is an error. When an Init fails, the services already built
// are stopped (within stopTimeout) before the error is returned.
func InitModules(mods []Module, stopTimeout time.Duration) ([]Service, error) {
	order, err := moduleOrder(mods)
	if err != nil {
		return nil, err
	}
	services := make([]Service, 0, len(order))
	for _, m := range order {
		svc, err := m.Init()
		if err != nil {
			stopServices(services, stopTimeout)
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		services = append(services, svc)
	}
	return services, nil
}

// moduleOrder sorts mods topologically, keeping the given order among
// modules whose dependencies are all placed.
func moduleOrder(mods []Module) ([]Module, error) {
	byName := make(map[string]bool, len(mods))
	for _, m := range mods {
		if byName[m.Name] {
			return nil, fmt.Errorf("module %s listed twice", m.Name)
		}
		byName[m.Name] = true
	}
	for _, m := range mods {
		for _, d := range m.Deps {
			if !byName[d] {
				return nil, fmt.Errorf("module %s depends on unknown module %s", m.Name, d)
			}
		}
	}
	placed := make(map[string]bool, len(mods))
	order := make([]Module, 0, len(mods))
	for len(order) < len(mods) {
		progressed := false
		for _, m := range mods {
			ready := !placed[m.Name] && !slices.ContainsFunc(m.Deps, func(d string) bool { return !placed[d] })
			if ready {
				placed[m.Name] = true
				order = append(order, m)
				progressed = true
				break // restart from the top: earlier modules go first
			}
		}
		if !progressed {
			var left []string
			for _, m := range mods {
				if !placed[m.Name] {
					left = append(left, m.Name)
				}
			}
			return nil, fmt.Errorf("circular module dependencies among %v", left)
		}
	}
	return order, nil
}

// stopServices stops services in reverse order within timeout, for a
// process that will not run them.
func stopServices(services []Service, timeout time.Duration) []error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var errs []error
	for i := len(services) - 1; i >= 0; i-- {
		if err := services[i].Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", services[i].Name(), err))
		}
	}
	return errs
}
