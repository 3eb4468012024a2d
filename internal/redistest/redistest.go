// Package redistest runs real, throw-away redis-server processes on loopback
// ports for tests and local tooling.
//
// Redlock's safety argument is about how independent redis nodes behave when
// they crash, restart empty, or stall, so the tests exercise real processes
// and real signals rather than an in-memory fake. Every server runs without
// persistence (no RDB, no AOF): a killed or stopped server always comes back
// empty, which is exactly the "node restarted and lost its keys" case the
// algorithm has to tolerate.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/nodetest"
)

// Timeouts. Every wait in this package is bounded so that a broken
// redis-server can never hang a test run.
const (
	// readyTimeout bounds how long a start waits for the first PONG:
	// generous, as the nemesis restarts nodes while worker processes of
	// its own and other test binaries share two cores (a restart took
	// more than 5 s there at a load average of 15).
	readyTimeout = 30 * time.Second
	// exitTimeout bounds how long we wait for a signalled process to be reaped.
	exitTimeout = 5 * time.Second
	// startAttempts is how often a start is retried when redis could not bind
	// its port (another process grabbed it between our probe and the start).
	startAttempts = 5
	// logTailLines is how much of the server log goes into start errors.
	logTailLines = 15
)

// ErrNotRunning is returned by Pause and Resume when there is no live process
// to signal (it was killed, stopped, or never restarted). Returning an error
// instead of silently doing nothing keeps a fault-injection test from
// believing a node is stalled when it is actually down.
var ErrNotRunning = errors.New("redistest: server is not running")

// ErrClosed is returned by every lifecycle method after Close.
var ErrClosed = errors.New("redistest: server is closed")

// Option customises how servers are started.
type Option func(*config)

type config struct {
	args      []string
	conf      string // config file given as the first argument; see withConfigFile
	fakeClock bool   // WithFakeClock
	fakeLib   string // libfaketime.so.1, found by Start
}

// WithArgs appends extra redis-server command-line arguments, e.g.
// WithArgs("--maxmemory", "10mb"). They come after the package defaults, and
// redis lets a later occurrence of a directive win, so they can also override
// a default.
func WithArgs(extra ...string) Option {
	return func(c *config) { c.args = append(c.args, extra...) }
}

// Server is one redis-server process on a loopback port.
//
// The port is chosen once and kept across Restart, so clients (and proxies)
// configured with Addr keep working after a crash/restart cycle. All methods
// are safe for concurrent use.
type Server struct {
	bin  string   // redis-server binary
	port int      // fixed for the Server's lifetime
	addr string   // "127.0.0.1:port"
	dir  string   // private temp dir: working dir and log; removed by Close
	args []string // extra args from WithArgs
	conf string   // config file path, "" for none

	mu     sync.Mutex
	clock  *fakeClock    // nil unless started WithFakeClock
	cmd    *exec.Cmd     // current process, nil before the first start
	exited chan struct{} // closed once cmd has been reaped
	paused bool          // SIGSTOP sent and no SIGCONT since
	closed bool
}

// Binary locates redis-server. It honours $REDIS_SERVER first (and fails if
// that does not point at an executable rather than silently using another
// binary), then PATH, then /usr/bin/redis-server, which is where Debian
// installs it but which may be missing from a minimal PATH.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		if err := isExecutable(p); err != nil {
			return "", fmt.Errorf("redistest: $REDIS_SERVER=%q is not usable: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if isExecutable(fallbackBinary) == nil {
		return fallbackBinary, nil
	}
	return "", errors.New("redistest: redis-server not found in $REDIS_SERVER, PATH or " + fallbackBinary +
		"; install it (Debian/Ubuntu: apt-get install redis-server) or set REDIS_SERVER to its path")
}

// fallbackBinary is where Debian installs redis-server; a variable so tests
// can exercise the not-found error on machines that have it.
var fallbackBinary = "/usr/bin/redis-server"

func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// Start launches n servers on distinct free loopback ports and waits until
// each answers PING. It is meant for non-test callers (benchmark harness,
// demos); the caller must Close every server. On error, servers already
// started are closed and nil is returned.
func Start(n int, opts ...Option) ([]*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.fakeClock {
		if cfg.fakeLib, err = FakeTimeLibrary(); err != nil {
			return nil, err
		}
	}
	servers := make([]*Server, 0, n)
	for range n {
		s, err := startNew(bin, cfg)
		if err != nil {
			for _, started := range servers {
				_ = started.Close()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// StartT is Start for tests: it fails the test with a clear message when
// redis-server is missing or does not start, and registers a cleanup that
// closes every server. If the test failed, the tail of each server log is
// logged first because the log directory is deleted on close.
func StartT(t testing.TB, n int, opts ...Option) []*Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Fatalf("%v (these tests need a real redis-server binary)", err)
	}
	servers, err := Start(n, opts...)
	if err != nil {
		t.Fatalf("redistest: starting %d redis-server(s): %v", n, err)
	}
	closeAtCleanup(t, servers)
	return servers
}

// closeAtCleanup closes servers when the test ends, logging each log's tail
// first if the test failed, because Close deletes the log.
func closeAtCleanup(t testing.TB, servers []*Server) {
	t.Cleanup(func() {
		for _, s := range servers {
			if t.Failed() {
				t.Logf("redistest: log tail of %s:\n%s", s.Addr(), s.logTail(0))
			}
			if err := s.Close(); err != nil {
				t.Errorf("redistest: closing %s: %v", s.Addr(), err)
			}
		}
	})
}

// startNew creates a Server on a fresh port, retrying with a new port when
// redis fails to bind: probing a free port and handing it to redis is
// inherently racy with other processes picking ephemeral ports.
func startNew(bin string, cfg config) (*Server, error) {
	var lastErr error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, fmt.Errorf("redistest: creating temp dir: %w", err)
		}
		s := &Server{
			bin:  bin,
			port: port,
			addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			dir:  dir,
			args: cfg.args,
			conf: cfg.conf,
		}
		if cfg.fakeClock {
			s.clock = &fakeClock{lib: cfg.fakeLib, file: filepath.Join(dir, "faketime.rc"), rate: 1}
		}
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		_ = s.Close()
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	return nil, lastErr
}

// freePort asks the kernel for an unused loopback port. The listener is
// closed before redis binds, so the port can be stolen in between; callers
// retry on errAddrInUse.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns "127.0.0.1:PORT". It never changes, including across Restart.
func (s *Server) Addr() string { return s.addr }

// Client returns a new go-redis client for this server with default options
// apart from Addr. The caller owns it and must Close it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr})
}

// Kill sends SIGKILL and waits until the process has been reaped. Without
// persistence all data is lost: this is the "node crashed" fault. Killing a
// server that is not running is a no-op; a paused server can be killed.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.killLocked()
}

// Stop shuts the server down gracefully with SIGTERM, so redis closes its
// client connections itself, and falls back to SIGKILL if it has not exited
// within a few seconds. A paused server is resumed so it can handle SIGTERM.
// Data is lost either way because persistence is off. Stopping a server that
// is not running is a no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.runningLocked() {
		return nil
	}
	if err := s.signalLocked(syscall.SIGTERM); err != nil {
		return err
	}
	// A stopped process keeps SIGTERM pending until it is continued.
	if s.paused {
		if err := s.signalLocked(syscall.SIGCONT); err != nil {
			return err
		}
		s.paused = false
	}
	if s.waitExitLocked(exitTimeout) {
		return nil
	}
	return s.killLocked()
}

// Pause sends SIGSTOP: the process stalls while the kernel keeps accepting
// TCP connections and buffering requests, so clients see timeouts rather
// than refusals (a GC pause, a VM freeze, a stuck disk). On Linux it returns
// only once the process is observed stopped. It returns ErrNotRunning if
// there is no live process.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.runningLocked() {
		return ErrNotRunning
	}
	if err := s.signalLocked(syscall.SIGSTOP); err != nil {
		return err
	}
	s.paused = true
	return waitStopped(s.cmd.Process.Pid, s.exited, exitTimeout)
}

// Resume sends SIGCONT to a paused server. Resuming a running, unpaused
// server is harmless; it returns ErrNotRunning if there is no live process.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.runningLocked() {
		return ErrNotRunning
	}
	if err := s.signalLocked(syscall.SIGCONT); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// Restart starts a fresh, empty redis-server on the same port and waits until
// it answers PING. It is meant to follow Kill or Stop; if the server is still
// running it is killed first, so Restart always means "crash and come back
// empty". If the port was taken by someone else meanwhile, Restart retries
// briefly and then fails with the redis log tail.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	var err error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
		}
		if err = s.startLocked(); !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return err
}

// Close kills the process (resuming it first if paused), waits for it to be
// reaped and removes the server's temp directory. It is idempotent; after
// Close every other lifecycle method returns ErrClosed.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.killLocked()
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// runningLocked reports whether a started process has not been reaped yet.
func (s *Server) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// signalLocked signals the current process. A process that exited on its own
// since the last check is not an error: os.Process uses a pidfd on Linux, so
// signalling a reaped process can never hit a recycled pid.
func (s *Server) signalLocked(sig os.Signal) error {
	err := s.cmd.Process.Signal(sig)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: signalling %s (pid %d) with %v: %w", s.addr, s.cmd.Process.Pid, sig, err)
	}
	return nil
}

func (s *Server) killLocked() error {
	if !s.runningLocked() {
		s.paused = false
		return nil
	}
	if err := s.signalLocked(syscall.SIGKILL); err != nil {
		return err
	}
	// SIGKILL also terminates stopped processes; the SIGCONT merely makes
	// sure nothing stays frozen if the kill raced with something odd.
	_ = s.signalLocked(syscall.SIGCONT)
	s.paused = false
	if !s.waitExitLocked(exitTimeout) {
		return fmt.Errorf("redistest: %s (pid %d) did not exit within %v of SIGKILL", s.addr, s.cmd.Process.Pid, exitTimeout)
	}
	if s.clock != nil {
		removeFakeTimeShm(s.cmd.Process.Pid)
	}
	return nil
}

func (s *Server) waitExitLocked(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

// errAddrInUse marks a start that failed because the port was taken.
var errAddrInUse = errors.New("address already in use")

// startLocked launches redis-server on s.port and waits for PING. On failure
// the process is killed and reaped, and the error carries the log tail.
func (s *Server) startLocked() error {
	logPath := s.logPath()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: opening log: %w", err)
	}
	// Remember where this run's output starts so errors quote only it.
	var logStart int64
	if fi, err := logFile.Stat(); err == nil {
		logStart = fi.Size()
	}

	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		// DEBUG SLEEP and friends are handy for fault tests; redis >= 7
		// refuses DEBUG unless this is set.
		"--enable-debug-command", "yes",
	}
	args = append(args, s.args...)
	if s.conf != "" {
		// redis only reads a config file named as the first argument.
		args = append([]string{s.conf}, args...)
	}
	cmd := exec.Command(s.bin, args...)
	if s.clock != nil {
		if cmd.Env, err = s.clock.env(); err != nil {
			_ = logFile.Close()
			return err
		}
	}
	// Pass the file itself (not an io.Writer) so os/exec starts no copying
	// goroutines; redis logs to stdout because --logfile is unset, and
	// argument errors go to stderr before any logfile would be opened.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = logFile.Close() // the child has its own copy
	if err != nil {
		return fmt.Errorf("redistest: starting %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		// Reap the child so it never lingers as a zombie, and publish its
		// exit to everybody waiting on s.exited.
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited, s.paused = cmd, exited, false

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	err = nodetest.WaitReady(ctx, s.addr, exited)
	if err == nil && s.clock != nil {
		err = s.clock.calibrate(ctx, s.addr)
	}
	cancel()
	if err != nil {
		_ = s.killLocked()
		tail := s.logTail(logStart)
		if strings.Contains(tail, "Address already in use") {
			err = fmt.Errorf("%w: %w", errAddrInUse, err)
		}
		return fmt.Errorf("redistest: redis-server on %s did not start: %w\n--- log tail ---\n%s", s.addr, err, tail)
	}
	return nil
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

// logTail returns the last lines written to the log at or after offset from.
func (s *Server) logTail(from int64) string {
	f, err := os.Open(s.logPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	const maxBytes = 8 << 10
	if fi, err := f.Stat(); err == nil && fi.Size()-from > maxBytes {
		from = fi.Size() - maxBytes
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
