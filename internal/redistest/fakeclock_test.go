package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// reading is one TIME of a server, between two readings of ours.
type reading struct{ before, node, after time.Time }

func readTime(t *testing.T, c *redis.Client) reading {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	before := time.Now()
	node, err := c.Time(ctx).Result()
	after := time.Now()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return reading{before, node, after}
}

// TIME has microseconds; ours are read on either side of the round trip.
const timeSlack = time.Millisecond

// requireAhead fails unless the server's clock, at r, was ahead of ours by
// off (within the round trip).
func requireAhead(t *testing.T, r reading, off time.Duration, what string) {
	t.Helper()
	lo, hi := r.before.Add(off-timeSlack), r.after.Add(off+timeSlack)
	if r.node.Before(lo) || r.node.After(hi) {
		t.Fatalf("%s: node clock %v ahead of ours (TIME %s, ours %s..%s), want %v",
			what, r.node.Sub(r.before), r.node.Format("15:04:05.000000"), r.before.Format("15:04:05.000000"),
			r.after.Format("15:04:05.000000"), off)
	}
}

// requireOnLine fails unless the server's clock, at r, read what s's
// Clock said it would (within the round trip).
func requireOnLine(t *testing.T, s *Server, r reading, what string) {
	t.Helper()
	s.mu.Lock()
	lo, hi := r.before.Add(s.clock.offset(r.before)-timeSlack), r.after.Add(s.clock.offset(r.after)+timeSlack)
	s.mu.Unlock()
	if r.node.Before(lo) || r.node.After(hi) {
		t.Fatalf("%s: node clock %v ahead of ours, want %v..%v", what, r.node.Sub(r.before), lo.Sub(r.before), hi.Sub(r.before))
	}
}

func pttl(t *testing.T, c *redis.Client, key string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

func set(t *testing.T, c *redis.Client, key string, px time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Set(ctx, key, "v", px).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

func adjust(t *testing.T, s *Server, step time.Duration, rate float64) {
	t.Helper()
	if err := s.AdjustClock(step, rate); err != nil {
		t.Fatalf("AdjustClock(%v, %v): %v", step, rate, err)
	}
}

// TestFakeClockJumps: a step of the clock moves TIME and the expiry of the
// keys by the step, forward and back, and nothing else.
func TestFakeClockJumps(t *testing.T) {
	s := StartT(t, 1, WithFakeClock())[0]
	c := newClient(t, s.Addr())
	requireAhead(t, readTime(t, c), 0, "at start")

	set(t, c, "k", 3*time.Second)
	adjust(t, s, 2*time.Second, 1)
	requireAhead(t, readTime(t, c), 2*time.Second, "after +2s")
	// 3 s less the 2 s step and the moments between the SET and now.
	if d := pttl(t, c, "k"); d > time.Second || d < 500*time.Millisecond {
		t.Fatalf("PTTL after a +2s step of a 3s key: %v, want just under 1s", d)
	}
	if off, rate := s.Clock(); off < 2*time.Second-time.Millisecond || off > 2*time.Second+time.Millisecond || rate != 1 {
		t.Fatalf("Clock() = %v, %v; want 2s, 1", off, rate)
	}

	adjust(t, s, -2*time.Second-500*time.Microsecond, 1)
	requireAhead(t, readTime(t, c), -500*time.Microsecond, "after -2.0005s")
	if d := pttl(t, c, "k"); d <= 2*time.Second {
		t.Fatalf("PTTL after stepping back: %v, want over 2s again", d)
	}
	// A step within the millisecond the drift allowance is made of.
	adjust(t, s, 700*time.Microsecond, 1)
	requireAhead(t, readTime(t, c), 200*time.Microsecond, "after +0.7ms")
}

// TestFakeClockRate: a rate runs the clock, and so the keys' expiry, at
// that rate from the moment it is set, with no step at that moment however
// long the process has run, and the real rate again keeps the offset
// gained.
func TestFakeClockRate(t *testing.T) {
	s := StartT(t, 1, WithFakeClock())[0]
	c := newClient(t, s.Addr())
	// libfaketime measures a rate from the process's start: a process
	// some time old shows a step at the change if that is not undone.
	old := readTime(t, c)
	for time.Since(old.after) < 300*time.Millisecond {
		readTime(t, c)
	}

	adjust(t, s, 0, 1.5)
	r0 := readTime(t, c)
	requireOnLine(t, s, r0, "when the rate is set")
	set(t, c, "k", 3*time.Second)
	setAt := time.Now()
	for time.Since(setAt) < 400*time.Millisecond {
		readTime(t, c)
	}
	// The node's clock advanced 1.5 times as far as ours between the two
	// readings (each within its round trip).
	r1 := readTime(t, c)
	requireOnLine(t, s, r1, "at rate 1.5")
	node := r1.node.Sub(r0.node)
	lo, hi := time.Duration(1.5*float64(r1.before.Sub(r0.after))), time.Duration(1.5*float64(r1.after.Sub(r0.before)))
	if node < lo-timeSlack || node > hi+timeSlack {
		t.Fatalf("node clock advanced %v while ours advanced %v..%v, want 1.5 times", node, r1.before.Sub(r0.after), r1.after.Sub(r0.before))
	}
	// A key of 3 s, set at 1.5 times the real rate: 1.5 s of it gone in 1 s.
	left := pttl(t, c, "k")
	if gone, ours := 3*time.Second-left, time.Since(setAt); gone < time.Duration(1.4*float64(ours))-5*time.Millisecond {
		t.Fatalf("a 3s key lost %v of its life in %v of ours at rate 1.5", gone, ours)
	}

	off, _ := s.Clock()
	if off < 100*time.Millisecond {
		t.Fatalf("Clock() offset %v after 400ms at 1.5, want over 200ms", off)
	}
	adjust(t, s, 0, 1)
	r2 := readTime(t, c)
	off, rate := s.Clock()
	requireAhead(t, r2, off, "back at the real rate")
	r3 := readTime(t, c)
	requireAhead(t, r3, off, "back at the real rate, later")
	if rate != 1 {
		t.Fatalf("Clock() rate %v, want 1", rate)
	}

	// Slower than real, as the nemesis makes it (0.5%), over a second.
	adjust(t, s, 0, 0.995)
	r4 := readTime(t, c)
	requireOnLine(t, s, r4, "when the rate is set to 0.995")
	for time.Since(r4.after) < time.Second {
		readTime(t, c)
	}
	r5 := readTime(t, c)
	requireOnLine(t, s, r5, "at rate 0.995")
	node = r5.node.Sub(r4.node)
	lo, hi = time.Duration(0.995*float64(r5.before.Sub(r4.after))), time.Duration(0.995*float64(r5.after.Sub(r4.before)))
	if node < lo-timeSlack || node > hi+timeSlack {
		t.Fatalf("node clock advanced %v while ours advanced %v..%v, want 0.995 times", node, r5.before.Sub(r4.after), r5.after.Sub(r4.before))
	}
}

// TestFakeClockRestart: the clock outlives the process, as a machine's
// does, and a killed process leaves nothing of libfaketime's in /dev/shm.
func TestFakeClockRestart(t *testing.T) {
	s := StartT(t, 1, WithFakeClock())[0]
	c := newClient(t, s.Addr())
	adjust(t, s, 5*time.Second, 1)
	pid := pidOf(s)
	shm := []string{fmt.Sprintf("/dev/shm/sem.faketime_sem_%d", pid), fmt.Sprintf("/dev/shm/faketime_shm_%d", pid)}
	for _, f := range shm {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("libfaketime's %s of the running server: %v", f, err)
		}
	}
	if err := s.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	for _, f := range shm {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Kill: %v, want it gone", f, err)
		}
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	requireAhead(t, readTime(t, c), 5*time.Second, "after a restart")
}

func TestFakeClockMisuse(t *testing.T) {
	s := StartT(t, 1)[0]
	if err := s.AdjustClock(time.Millisecond, 1); !errors.Is(err, ErrNoFakeClock) {
		t.Fatalf("AdjustClock on a server without WithFakeClock: %v, want ErrNoFakeClock", err)
	}
	if off, rate := s.Clock(); off != 0 || rate != 1 {
		t.Fatalf("Clock() without WithFakeClock = %v, %v; want 0, 1", off, rate)
	}
	f := StartT(t, 1, WithFakeClock())[0]
	if err := f.AdjustClock(0, 0); err == nil {
		t.Fatal("AdjustClock with rate 0: no error")
	}
}

func TestFakeTimeLibraryEnv(t *testing.T) {
	t.Setenv(libFakeTimeEnv, "/nonexistent/libfaketime.so.1")
	if _, err := FakeTimeLibrary(); err == nil || !strings.Contains(err.Error(), libFakeTimeEnv) {
		t.Fatalf("FakeTimeLibrary() with a bad $%s: %v, want an error naming it", libFakeTimeEnv, err)
	}
	if _, err := Start(1, WithFakeClock()); err == nil {
		t.Fatal("Start WithFakeClock without libfaketime: no error")
	}
	t.Setenv(libFakeTimeEnv, "")
	if _, err := FakeTimeLibrary(); err != nil {
		t.Fatalf("FakeTimeLibrary(): %v (install libfaketime: ./test.sh does)", err)
	}
}
