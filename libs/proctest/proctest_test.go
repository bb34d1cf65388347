package proctest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/proctest"
)

// childEnv makes the test binary one of the children below instead of
// running the tests.
const childEnv = "PROCTEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "serve":
		serve(os.Getenv("PROCTEST_HEALTH"))
	case "lines":
		for i := range 5 {
			fmt.Printf("line %d\n", i)
		}
		select {}
	case "exit":
		fmt.Fprintln(os.Stderr, "dying on purpose")
		os.Exit(3)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { proctest.RemoveBuilds() }))
}

// serve answers /ready until SIGTERM, then exits 0.
func serve(addr string) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.ListenAndServe()
	<-stop
	srv.Close()
	os.Exit(0)
}

func child(t *testing.T, mode string, lines bool) (*proctest.Proc, string) {
	t.Helper()
	health := looptest.FreeAddr(t)
	p := proctest.New(t, proctest.Spec{Name: mode, Path: os.Args[0], Env: []string{childEnv + "=" + mode, "PROCTEST_HEALTH=" + health},
		HealthAddr: health, Lines: lines})
	return p, health
}

func TestReadyPauseResumeKillRestartStop(t *testing.T) {
	p, health := child(t, "serve", false)
	p.Start()
	p.WaitReady(20 * time.Second)
	p.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := looptest.CheckReady(ctx, health); err == nil {
		t.Fatal("a paused process answered")
	}
	p.Resume()
	p.WaitReady(20 * time.Second)
	p.Kill()
	if st := p.ExitState(); st == nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || p.Running() {
		t.Fatalf("after kill: %v running=%v", st, p.Running())
	}
	p.Restart()
	p.WaitReady(20 * time.Second)
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

func TestLinesArriveAndCloseAfterTheKill(t *testing.T) {
	p, _ := child(t, "lines", true)
	p.Start()
	for i := range 5 {
		select {
		case l := <-p.Lines():
			if l != fmt.Sprintf("line %d", i) {
				t.Fatalf("line %d: %q", i, l)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no line")
		}
	}
	p.Kill()
	if _, open := <-p.Lines(); open {
		t.Fatal("lines still open after the child died")
	}
}

func TestExitOnItsOwn(t *testing.T) {
	p, _ := child(t, "exit", false)
	p.Start()
	select {
	case <-p.Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("child did not exit")
	}
	if code := p.ExitState().ExitCode(); code != 3 || !strings.Contains(p.Log(), "dying on purpose") {
		t.Fatalf("exit %d, log %q", code, p.Log())
	}
	if err := p.Stop(time.Second); err == nil {
		t.Fatal("Stop of a process that failed by itself must say so")
	}
}

func TestBuildOnceAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	bin := proctest.Binary(t, "./testdata/sleeper")
	if again := proctest.Binary(t, "./testdata/sleeper"); again != bin {
		t.Fatalf("second build in %s, first in %s", again, bin)
	}
	p := proctest.Start(t, proctest.Spec{Name: "sleeper", Path: bin, Args: []string{"a", "b"}, Lines: true})
	select {
	case l := <-p.Lines():
		if l != "args a b" {
			t.Fatalf("output %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no output")
	}
	<-p.Exited()
	if !p.ExitState().Success() {
		t.Fatalf("exit %v: %s", p.ExitState(), p.Log())
	}
}
