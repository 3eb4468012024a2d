package redistest

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient returns a client whose per-command deadline comes from the
// context and which never retries, so timeouts are observed exactly.
func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func pingWithin(c *redis.Client, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Ping(ctx).Err()
}

func pidOf(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return 0
	}
	return s.cmd.Process.Pid
}

// processGone reports whether pid no longer exists (kill -0 fails with ESRCH).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStartPing(t *testing.T) {
	servers := StartT(t, 3)
	if len(servers) != 3 {
		t.Fatalf("got %d servers, want 3", len(servers))
	}
	seen := map[string]bool{}
	for _, s := range servers {
		if seen[s.Addr()] {
			t.Fatalf("duplicate address %s", s.Addr())
		}
		seen[s.Addr()] = true
		if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
			t.Errorf("Addr() = %q, want a 127.0.0.1 address", s.Addr())
		}
		c := s.Client()
		if err := pingWithin(c, 2*time.Second); err != nil {
			t.Errorf("PING %s: %v", s.Addr(), err)
		}
		_ = c.Close()
	}
}

func TestDebugCommandEnabled(t *testing.T) {
	s := StartT(t, 1)[0]
	c := newClient(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Do(ctx, "DEBUG", "SLEEP", "0").Err(); err != nil {
		t.Fatalf("DEBUG SLEEP 0: %v", err)
	}
}

func TestKillRestartLosesDataKeepsPort(t *testing.T) {
	s := StartT(t, 1)[0]
	addr := s.Addr()
	c := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	oldPid := pidOf(s)
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if !processGone(oldPid) {
		t.Fatalf("pid %d still exists after Kill", oldPid)
	}
	if err := pingWithin(c, time.Second); err == nil {
		t.Fatal("PING succeeded against a killed server")
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("second Kill should be a no-op, got %v", err)
	}

	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr changed across Restart: %s -> %s", addr, s.Addr())
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart: err=%v, want redis.Nil (data must be gone)", err)
	}
}

func TestStopRestart(t *testing.T) {
	s := StartT(t, 1)[0]
	c := newClient(t, s.Addr())
	pid := pidOf(s)
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !processGone(pid) {
		t.Fatalf("pid %d still exists after Stop", pid)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
}

func TestRestartWhileRunningKillsFirst(t *testing.T) {
	s := StartT(t, 1)[0]
	c := newClient(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	pid := pidOf(s)
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !processGone(pid) {
		t.Fatalf("old pid %d still exists after Restart", pid)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart: err=%v, want redis.Nil", err)
	}
}

func TestPauseResume(t *testing.T) {
	s := StartT(t, 1)[0]
	c := newClient(t, s.Addr())
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := s.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	err := pingWithin(c, 100*time.Millisecond)
	if !nodetest.IsTimeout(err) {
		t.Fatalf("PING on paused server: err=%v, want a timeout", err)
	}
	if err := s.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestPauseResumeAfterKill(t *testing.T) {
	s := StartT(t, 1)[0]
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := s.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Pause after Kill: %v, want ErrNotRunning", err)
	}
	if err := s.Resume(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Resume after Kill: %v, want ErrNotRunning", err)
	}
}

func TestKillAndStopPausedServer(t *testing.T) {
	s := StartT(t, 1)[0]
	for _, stop := range []struct {
		name string
		fn   func() error
	}{{"Kill", s.Kill}, {"Stop", s.Stop}} {
		if err := s.Restart(); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		pid := pidOf(s)
		if err := s.Pause(); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if err := stop.fn(); err != nil {
			t.Fatalf("%s on paused server: %v", stop.name, err)
		}
		if !processGone(pid) {
			t.Fatalf("pid %d still exists after %s of a paused server", pid, stop.name)
		}
	}
}

// TestCloseLeavesNoProcess uses Start (not StartT) so it controls Close, and
// covers closing a paused server and closing twice.
func TestCloseLeavesNoProcess(t *testing.T) {
	servers, err := Start(3)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	var pids []int
	for _, s := range servers {
		pids = append(pids, pidOf(s))
	}
	if err := servers[1].Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	for _, s := range servers {
		if err := s.Close(); err != nil {
			t.Errorf("Close %s: %v", s.Addr(), err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close %s: %v", s.Addr(), err)
		}
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("pid %d still exists after Close", pid)
		}
	}
	for _, s := range servers {
		if err := s.Restart(); !errors.Is(err, ErrClosed) {
			t.Errorf("Restart after Close: %v, want ErrClosed", err)
		}
	}
	// The port must be free again.
	ln, err := net.Listen("tcp", servers[0].Addr())
	if err != nil {
		t.Fatalf("port of closed server still in use: %v", err)
	}
	_ = ln.Close()
}

func TestRestartPortTakenReportsLog(t *testing.T) {
	s := StartT(t, 1)[0]
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		t.Fatalf("grabbing the port: %v", err)
	}
	err = s.Restart()
	_ = ln.Close()
	if err == nil {
		t.Fatal("Restart succeeded although the port was taken")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Restart error lacks the redis log tail: %v", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart after freeing the port: %v", err)
	}
}

func TestBadArgsReportLog(t *testing.T) {
	_, err := Start(1, WithArgs("--no-such-directive", "x"))
	if err == nil {
		t.Fatal("Start with a bogus directive succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks the redis log tail: %v", err)
	}
}

func TestWithArgs(t *testing.T) {
	s := StartT(t, 1, WithArgs("--maxmemory", "12345678"))[0]
	c := newClient(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got, err := c.ConfigGet(ctx, "maxmemory").Result()
	if err != nil {
		t.Fatalf("CONFIG GET: %v", err)
	}
	if got["maxmemory"] != "12345678" {
		t.Fatalf("maxmemory = %q, want 12345678", got["maxmemory"])
	}
}

func TestBinaryEnv(t *testing.T) {
	t.Setenv("REDIS_SERVER", "/nonexistent/redis-server")
	_, err := Binary()
	if err == nil || !strings.Contains(err.Error(), "REDIS_SERVER") {
		t.Fatalf("Binary() with a bad $REDIS_SERVER: %v, want an error naming REDIS_SERVER", err)
	}
	t.Setenv("REDIS_SERVER", "")
	if _, err := Binary(); err != nil {
		t.Fatalf("Binary(): %v", err)
	}
}

func TestBinaryMissing(t *testing.T) {
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir())
	old := fallbackBinary
	fallbackBinary = "/nonexistent/redis-server"
	defer func() { fallbackBinary = old }()
	_, err := Binary()
	if err == nil || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("Binary() error %v should explain how to install redis-server", err)
	}
}

// TestConcurrentLifecycle hammers one server from several goroutines; run it
// with -race. Errors are expected (e.g. Pause on a killed server), panics,
// races and hangs are not, and the server must be usable afterwards.
func TestConcurrentLifecycle(t *testing.T) {
	s := StartT(t, 1)[0]
	var wg sync.WaitGroup
	ops := []func() error{s.Pause, s.Resume, s.Kill, s.Restart, s.Stop}
	for i, op := range ops {
		wg.Go(func() {
			for range 3 {
				err := op()
				if err != nil && !errors.Is(err, ErrNotRunning) {
					t.Errorf("op %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if err := s.Restart(); err != nil {
		t.Fatalf("final Restart: %v", err)
	}
	c := newClient(t, s.Addr())
	if err := pingWithin(c, 2*time.Second); err != nil {
		t.Fatalf("PING after concurrent lifecycle: %v", err)
	}
}
