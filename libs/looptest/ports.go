package looptest

import (
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lowPort is the bottom of the band ports are picked from; the top is the
// start of the kernel's ephemeral range.
const lowPort = 10000

// LockFile is the file whose byte ranges reserve ports across test
// processes (byte n reserves port n); one per user, so another user's file
// mode never stands in the way.
var LockFile = filepath.Join(os.TempDir(), "strata-test-ports-"+strconv.Itoa(os.Getuid())+".lock")

var ports struct {
	mu    sync.Mutex
	given map[int]bool
	lock  *os.File // held open for the life of the process: closing it drops every reservation
	err   error
}

// FreePort returns a loopback TCP port that is free now and that no other
// caller in any test process of this machine gets while this process runs.
// It fails the test when no port is found.
func FreePort(t testing.TB) int {
	t.Helper()
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.given == nil {
		ports.given = map[int]bool{}
		ports.lock, ports.err = os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o600)
	}
	if ports.err != nil {
		t.Fatalf("looptest: port reservations: %v", ports.err)
	}
	high := max(ephemeralLow(), lowPort+1000)
	for range 2000 {
		p := lowPort + rand.IntN(high-lowPort)
		if ports.given[p] || !reserve(ports.lock, p) {
			continue
		}
		ports.given[p] = true // kept even when busy: never tried again
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("looptest: no free loopback port in %d-%d", lowPort, high-1)
	return 0
}

// FreeAddr returns "127.0.0.1:<FreePort>".
func FreeAddr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(FreePort(t)))
}

// Port returns the port of a host:port address as a string (for flags and
// environment variables); it panics on an address without a numeric port,
// which is a bug in the test.
func Port(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.Atoi(p)
	}
	if err != nil {
		panic("looptest: no port in " + addr)
	}
	return p
}

// reserve takes a non-blocking write lock on byte p of f: held by another
// process, the port is theirs. The lock goes when the process exits.
func reserve(f *os.File, p int) bool {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: int64(p), Len: 1}
	return syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk) == nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		if n, err := strconv.Atoi(f[0]); err == nil {
			return n
		}
	}
	return 32768
}
