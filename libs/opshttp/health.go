package opshttp

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Check reports nil when the checked subsystem can serve, else why not.
type Check func(ctx context.Context) error

// Health holds a process's readiness checks.
type Health struct {
	mu      sync.RWMutex
	checks  map[string][]Check
	started atomic.Bool
	timeout time.Duration
}

// NewHealth returns a Health with no checks, not yet started.
func NewHealth() *Health {
	return &Health{checks: map[string][]Check{}, timeout: 2 * time.Second}
}

// Register adds a named check. Several checks may share a name (the roles
// of the all-in-one process each register the spec's names, such as
// consumer_metadata or storage): the name is ok only when every one of them
// passes, so no role's condition is lost to another's.
func (h *Health) Register(name string, c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks[name] = append(h.checks[name], c)
}

// SetStarted marks that the process finished initialising its listeners,
// command handlers and workers; /ready stays 503 before that.
func (h *Health) SetStarted(v bool) { h.started.Store(v) }

// Result is the /ready body.
type Result struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// Evaluate runs every check concurrently with a timeout.
func (h *Health) Evaluate(ctx context.Context) (Result, bool) {
	type named struct {
		name string
		c    Check
	}
	h.mu.RLock()
	var checks []named
	for n, cs := range h.checks {
		for _, c := range cs {
			checks = append(checks, named{n, c})
		}
	}
	h.mu.RUnlock()

	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { errs[i] = c.c(ctx) })
	}
	wg.Wait()
	failed := map[string][]string{}
	res := Result{Status: "ready", Checks: map[string]string{}}
	for i, c := range checks {
		res.Checks[c.name] = "ok"
		if errs[i] != nil {
			failed[c.name] = append(failed[c.name], errs[i].Error())
		}
	}
	ready := len(failed) == 0
	for n, msgs := range failed {
		sort.Strings(msgs)
		res.Checks[n] = strings.Join(msgs, "; ")
	}
	if !h.started.Load() {
		ready = false
		res.Checks["startup"] = "initialising"
	}
	if !ready {
		res.Status = "not_ready"
	}
	return res, ready
}

// Handler serves /live and /ready only.
func (h *Health) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/live":
			if !getOrHead(w, r) {
				return
			}
			writeJSON(w, r, http.StatusOK, map[string]string{"status": "live"})
		case "/ready":
			if !getOrHead(w, r) {
				return
			}
			res, ok := h.Evaluate(r.Context())
			code := http.StatusOK
			if !ok {
				code = http.StatusServiceUnavailable
			}
			writeJSON(w, r, code, res)
		default:
			writeJSON(w, r, http.StatusNotFound, map[string]string{"status": "not_found"})
		}
	})
}

func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeJSON(w, r, http.StatusMethodNotAllowed, map[string]string{"status": "method_not_allowed"})
	return false
}

func writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write(append(body, '\n'))
	}
}
