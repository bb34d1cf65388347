package proctest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strataio/strata/libs/looptest"
)

// Spec says how to run a process.
type Spec struct {
	// Name names the process in messages and its default log file.
	Name string
	// Path is the binary: from Binary, or os.Args[0] for the test binary
	// itself (its TestMain switches to the child's code on an environment
	// variable the test sets in Env).
	Path string
	// Args are the command-line arguments (without the program name).
	Args []string
	// Env is added to the test process's environment.
	Env []string
	// HealthAddr is the host:port whose /ready WaitReady polls.
	HealthAddr string
	// LogPath receives stdout and stderr, appended across restarts
	// (default: <Name>.log in a temporary directory of the test).
	LogPath string
	// Lines delivers stdout line by line on Lines instead of the log (for a
	// child that reports what it did, such as acknowledgements); stderr
	// still goes to the log.
	Lines bool
}

// Proc is a process a test runs (again after Kill or Stop).
type Proc struct {
	t    testing.TB
	spec Spec

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when the current run has exited
	state *os.ProcessState
	lines chan string
	// readers are the stdout line readers of every run; quit, closed at
	// cleanup, makes a reader nobody drains give up.
	readers sync.WaitGroup
	quit    chan struct{}
}

// New prepares a process without starting it; the test's cleanup kills it
// and, if the test failed, prints the end of its log.
func New(t testing.TB, spec Spec) *Proc {
	t.Helper()
	if spec.LogPath == "" {
		spec.LogPath = filepath.Join(t.TempDir(), spec.Name+".log")
	}
	p := &Proc{t: t, spec: spec, quit: make(chan struct{})}
	t.Cleanup(p.cleanup)
	return p
}

// Start runs a process (see New).
func Start(t testing.TB, spec Spec) *Proc {
	t.Helper()
	p := New(t, spec)
	p.Start()
	return p
}

// Pid returns the process id of the current run (0 before the first
// Start); benchmarks read its CPU time and peak RSS from /proc.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Name returns Spec.Name.
func (p *Proc) Name() string { return p.spec.Name }

// LogPath returns the file the process logs to.
func (p *Proc) LogPath() string { return p.spec.LogPath }

// Start runs the process; it must not be running.
func (p *Proc) Start() {
	t := p.t
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		t.Fatalf("%s already running", p.spec.Name)
	}
	logf, err := os.OpenFile(p.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the test binary if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdout *os.File
	if p.spec.Lines {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, stdout = w, r
		defer w.Close() // likewise: EOF comes when the child is gone
	}
	if err := cmd.Start(); err != nil {
		if stdout != nil {
			stdout.Close()
		}
		t.Fatalf("start %s: %v", p.spec.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.state = cmd.ProcessState
		p.mu.Unlock()
		close(done)
	}()
	p.cmd, p.done, p.state = cmd, done, nil
	if stdout != nil {
		p.lines = make(chan string, 1024)
		p.readers.Add(1)
		go p.readLines(stdout, p.lines)
	}
}

// readLines delivers the child's stdout lines until EOF (closing lines) or
// until the test is over.
func (p *Proc) readLines(r *os.File, lines chan<- string) {
	defer p.readers.Done()
	defer r.Close()
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case lines <- sc.Text():
		case <-p.quit:
			return
		}
	}
}

// Lines returns the stdout lines of the current run (Spec.Lines); the
// channel is closed once the process has exited and every line was read.
func (p *Proc) Lines() <-chan string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines
}

// Exited returns a channel closed when the current run has exited (nil if
// never started).
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running says whether the process has been started and not yet exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// ExitState returns how the last run ended (nil while it runs).
func (p *Proc) ExitState() *os.ProcessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Signal sends sig to the running process without waiting for anything.
func (p *Proc) Signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Pause stops the process (SIGSTOP): it holds its connections and answers
// nothing, as a hung node. It returns once the kernel reports the process
// stopped: kill(2) only queues the signal, and a thread running on another
// core may still answer a request in between (CI: a paused process
// answered).
func (p *Proc) Pause() {
	p.Signal(syscall.SIGSTOP)
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	stat := fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil || processStopped(b) {
			return // gone (or no procfs): nothing more to wait for
		}
		time.Sleep(time.Millisecond)
	}
	p.t.Errorf("%s: still running 10 s after SIGSTOP", p.spec.Name)
}

// processStopped reads the state field of /proc/<pid>/stat ("pid (comm) S
// ..."; comm may hold spaces and parentheses, so the state follows the last
// ')').
func processStopped(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'T' || stat[i+2] == 't'
}

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() { p.Signal(syscall.SIGCONT) }

// Kill sends SIGKILL (kill -9) and waits until the process has exited. It
// does nothing when the process is not running.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process must be able to die
	_ = cmd.Process.Kill()
	<-done
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It returns nil when the process exited by itself with status 0.
func (p *Proc) Stop(timeout time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s did not stop within %v after SIGTERM; killed", p.spec.Name, timeout)
	}
	if st := p.ExitState(); !st.Success() {
		return fmt.Errorf("%s stopped with %v", p.spec.Name, st)
	}
	return nil
}

// Restart kills the process and starts it again on the same arguments.
func (p *Proc) Restart() {
	p.t.Helper()
	p.Kill()
	p.Start()
}

// WaitReady polls Spec.HealthAddr's /ready until it answers 200; the test
// fails with the end of the log when the process exits first or timeout
// passes.
func (p *Proc) WaitReady(timeout time.Duration) {
	t := p.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := p.Exited()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err := looptest.CheckReady(cctx, p.spec.HealthAddr)
		ccancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("%s exited while starting (%v)\n--- log tail ---\n%s", p.spec.Name, p.ExitState(), p.LogTail(4000))
		case <-ctx.Done():
			t.Fatalf("%s not ready after %v: %v\n--- log tail ---\n%s", p.spec.Name, timeout, err, p.LogTail(4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Log returns the whole log.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.spec.LogPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// LogTail returns the last n bytes of the log.
func (p *Proc) LogTail(n int) string {
	s := p.Log()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// printed holds the log paths already printed after a failure.
var printed sync.Map

func (p *Proc) cleanup() {
	p.Kill()
	close(p.quit)
	p.readers.Wait()
	if !p.t.Failed() {
		return
	}
	// Processes of one test may share a log (Spec.LogPath): print it once.
	if _, again := printed.LoadOrStore(p.spec.LogPath, true); again {
		return
	}
	if tail := p.LogTail(8000); tail != "" {
		p.t.Logf("--- %s log (%s), last 8000 bytes ---\n%s", p.spec.Name, p.spec.LogPath, tail)
	}
}
