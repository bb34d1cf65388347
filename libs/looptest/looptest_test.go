package looptest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childPortEnv makes the test binary a child that reserves the port it
// names, says "locked" and waits to be killed.
const childPortEnv = "LOOPTEST_CHILD_RESERVE"

func TestMain(m *testing.M) {
	if v := os.Getenv(childPortEnv); v != "" {
		p, _ := strconv.Atoi(v)
		f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil || !reserve(f, p) {
			fmt.Println("busy", err)
			os.Exit(2)
		}
		fmt.Println("locked")
		select {}
	}
	goleak.VerifyTestMain(m)
}

func TestFreePortsAreDistinctBindableAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if seen[p] || p < lowPort || p >= max(ephemeralLow(), lowPort+1000) {
			t.Fatalf("port %d (seen %v)", p, seen[p])
		}
		seen[p] = true
	}
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if Port(addr) != addr[strings.LastIndexByte(addr, ':')+1:] {
		t.Fatalf("Port(%s) = %s", addr, Port(addr))
	}
}

// A port another process reserved is not handed out here.
func TestReservationHoldsAcrossProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("byte-range locks checked on linux")
	}
	p := FreePort(t) // reserved by this process, so free of any other
	ports.mu.Lock()
	f := ports.lock
	ports.mu.Unlock()
	// Give the reservation up so the child may take the port.
	if err := unlock(f, p); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childPortEnv+"="+strconv.Itoa(p))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	if reserve(f, p) {
		t.Fatal("a port another process holds was reserved again")
	}
}

// failTB records a Fatal instead of ending the test that owns it.
type failTB struct {
	testing.TB
	msg string
}

func (f *failTB) Helper() {}
func (f *failTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventuallyTakesBoolsOrErrorsAndIsBounded(t *testing.T) {
	var n atomic.Int32
	Eventually(t, "three calls", func() bool { return n.Add(1) >= 3 })
	Eventually(t, "no error", func() error {
		if n.Add(1) < 6 {
			return errors.New("not yet")
		}
		return nil
	})
	ft := &failTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyWithin(ft, 50*time.Millisecond, "never", func() error { return errors.New("still broken") })
	}()
	<-done
	if !strings.Contains(ft.msg, "never") || !strings.Contains(ft.msg, "still broken") {
		t.Fatalf("failure message %q", ft.msg)
	}
}

func TestWaitReady(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" || !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	go func() {
		time.Sleep(50 * time.Millisecond)
		ready.Store(true)
	}()
	WaitReady(t, addr, 5*time.Second)
}

// unlock gives up this process's reservation of port p.
func unlock(f *os.File, p int) error {
	lk := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: io.SeekStart, Start: int64(p), Len: 1}
	return syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
}
