package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A server started WithFakeClock runs under libfaketime (LD_PRELOAD), which
// reads the clock it fakes from a file of the server's own at every call
// (FAKETIME_TIMESTAMP_FILE with FAKETIME_NO_CACHE=1), so that AdjustClock
// moves it at once. Only the wall clock moves, the one Redis expires keys
// by and TIME reads (gettimeofday, clock_gettime(CLOCK_REALTIME));
// FAKETIME_DONT_FAKE_MONOTONIC=1 leaves the event loop's monotonic timers
// alone.
//
// libfaketime reads "+O xR" as: at real time t the clock reads
// S + O + (t-S)×R, where S is when libfaketime started in the process (its
// constructor, just after exec). A rate is thus measured from S, not from
// when the file changed: writing "+0 x1.5" into a server that has run for
// a minute would throw its clock 30 s ahead at once. fakeClock keeps the
// clock as the line it should follow since the last change, and writes the
// O that makes libfaketime's line that one. That needs S, which the
// process does not tell: it starts at the real rate, where S plays no
// part, and once it answers calibrate gives it a spec at half the real
// rate from the offset it has (never ahead of its line), whose TIME, on a
// connection already open, tells S within half a round trip; the clock
// then takes its line. Nothing can have set a key by the slow clock
// meanwhile: Start and Restart return after calibrate. (S guessed as the
// moment of the exec instead was off by 25 ms under -race, a step of 12 ms
// at a change to rate 1.5; a TIME whose round trip included the dial and
// the handshake, by 7 ms.)
//
// Two facts about libfaketime 0.9.10 (Debian's) shape the start:
//   - Debian's redis-server allocates with jemalloc, whose start reads the
//     clock, which starts libfaketime, whose start allocates (an error
//     message for a symbol glibc lacks): the server deadlocks before main
//     (libfaketime issue #130). libc.so.6 preloaded after libfaketime makes
//     malloc glibc's, so that no allocation starts jemalloc; the server
//     then keeps jemalloc for its statistics (mallctl) and for one size
//     hint (nallocx in sdsResize, which only decides whether to realloc).
//   - libfaketime keeps a semaphore and a shared memory object per process
//     in /dev/shm, named after its pid, which a killed process leaves
//     behind; Kill removes them (removeFakeTimeShm).

// libFakeTimeEnv names the environment variable that points at
// libfaketime.so.1 where the usual places do not have it.
const libFakeTimeEnv = "LIBFAKETIME"

// WithFakeClock starts each server under libfaketime, so that its clock can
// be moved at run time (Server.AdjustClock). It starts at the real time and
// rate. Start fails if libfaketime is not installed (Debian/Ubuntu:
// apt-get install libfaketime; elsewhere $LIBFAKETIME names the library).
func WithFakeClock() Option {
	return func(c *config) { c.fakeClock = true }
}

// ErrNoFakeClock is returned by AdjustClock for a server started without
// WithFakeClock.
var ErrNoFakeClock = errors.New("redistest: server was not started WithFakeClock")

// FakeTimeLibrary locates libfaketime.so.1: $LIBFAKETIME (which must name a
// file), else Debian's and the usual install places, else what dpkg says
// the libfaketime package installed.
func FakeTimeLibrary() (string, error) {
	if p := os.Getenv(libFakeTimeEnv); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return "", fmt.Errorf("redistest: $%s=%q is not a file", libFakeTimeEnv, p)
		}
		return p, nil
	}
	for _, pattern := range []string{
		"/usr/lib/*/faketime/libfaketime.so.1", // Debian, Ubuntu
		"/usr/lib/faketime/libfaketime.so.1",
		"/usr/lib64/faketime/libfaketime.so.1",
		"/usr/local/lib/faketime/libfaketime.so.1", // make install
	} {
		if found, _ := filepath.Glob(pattern); len(found) > 0 {
			return found[0], nil
		}
	}
	if out, err := exec.Command("dpkg", "-L", "libfaketime").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasSuffix(line, "/libfaketime.so.1") {
				return line, nil
			}
		}
	}
	return "", fmt.Errorf("redistest: libfaketime.so.1 not found; install it (Debian/Ubuntu: apt-get install libfaketime) or set $%s to its path", libFakeTimeEnv)
}

// fakeClock is the clock of a server started WithFakeClock: since at, it
// reads the real time plus off, and runs at rate.
type fakeClock struct {
	lib   string    // libfaketime.so.1
	file  string    // FAKETIME_TIMESTAMP_FILE
	start time.Time // S, libfaketime's start in the current process
	at    time.Time // when the clock was last set
	off   time.Duration
	rate  float64
}

// offset is how far the clock is ahead of the real one at now.
func (c *fakeClock) offset(now time.Time) time.Duration {
	return c.off + time.Duration(float64(now.Sub(c.at))*(c.rate-1))
}

// set makes the clock read now+off at now and run at rate from then on, and
// writes it for libfaketime.
func (c *fakeClock) set(now time.Time, off time.Duration, rate float64) error {
	c.at, c.off, c.rate = now, off, rate
	// S + O + (t-S)×R = t + off + (t-now)×(R-1) for every t.
	return c.write(off-time.Duration(float64(now.Sub(c.start))*(rate-1)), rate)
}

// write writes the spec that makes libfaketime, started at c.start, read
// at time t start + o + (t-start)×rate.
func (c *fakeClock) write(o time.Duration, rate float64) error {
	// "x" always: a spec without one keeps the previous rate. The
	// fraction is read with atof; the server never changes LC_NUMERIC.
	spec := fmt.Sprintf("%+.9f x%.9f\n", o.Seconds(), rate)
	// The server opens the file at every clock read: a rename gives it the
	// old spec or the new one, never a partial or missing file (which
	// libfaketime would read as "+0").
	tmp := c.file + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		return fmt.Errorf("redistest: writing the fake clock: %w", err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		return fmt.Errorf("redistest: writing the fake clock: %w", err)
	}
	return nil
}

// calibrationRate is the rate a process starts at until calibrate, and
// calibrationReadings how many TIME readings calibrate takes to find its
// start (it keeps the one of the shortest round trip).
const (
	calibrationRate     = 0.5
	calibrationReadings = 8
)

// env is the environment of a process about to start: its clock keeps the
// offset it has, at the real rate until calibrate has found the process's
// start and given the clock its rate.
func (c *fakeClock) env() ([]string, error) {
	now := time.Now()
	c.at, c.off = now, c.offset(now)
	if err := c.write(c.off, 1); err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range os.Environ() {
		// FAKETIME would win over the file; the others are ours to set.
		if !strings.HasPrefix(kv, "FAKETIME") && !strings.HasPrefix(kv, "LD_PRELOAD=") {
			env = append(env, kv)
		}
	}
	return append(env,
		"LD_PRELOAD="+c.lib+" libc.so.6",
		"FAKETIME_TIMESTAMP_FILE="+c.file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	), nil
}

// calibrate finds the start of the process that env started, from one TIME
// at calibrationRate, puts the clock on its line (offset and rate as set)
// and checks with another TIME that it is there.
func (c *fakeClock) calibrate(ctx context.Context, addr string) error {
	rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rc.Close()
	// Connected first, so that the round trip around TIME is TIME's alone.
	if err := rc.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redistest: reading the fake clock: %w", err)
	}
	now := time.Now()
	c.at, c.off = now, c.offset(now)
	// With S unknown, "+off" at calibrationRate reads off + S×(1-rate) +
	// t×rate at t: behind t+off for every t after S.
	if err := c.write(c.off, calibrationRate); err != nil {
		return err
	}
	// The reading of the shortest round trip of a few: S's error is the
	// round trip's (half of it, over 1-r), and a rate of 1.5 later makes
	// half of that a step. On a loaded machine one reading's round trip
	// took over 2 ms, and TestFakeClockRate saw its clock 1.05 ms off.
	var node, before, after time.Time
	for i := 0; i < calibrationReadings; i++ {
		b := time.Now()
		n, err := rc.Time(ctx).Result()
		a := time.Now()
		if err != nil {
			return fmt.Errorf("redistest: reading the fake clock: %w", err)
		}
		if i == 0 || a.Sub(b) < after.Sub(before) {
			node, before, after = n, b, a
		}
	}
	// node = S + off + (t-S)×r for t in [before, after]: S = (node - off -
	// t×r) / (1-r), taken at the middle.
	mid := before.Add(after.Sub(before) / 2)
	r := calibrationRate
	s := node.Add(-c.off).Add(-time.Duration(float64(mid.Sub(c.at)) * r))
	// s is now S - at×r... written relative to at to stay in range:
	// S - at = (s - at) / (1-r).
	c.start = c.at.Add(time.Duration(float64(s.Sub(c.at)) / (1 - r)))
	now = time.Now()
	if err := c.set(now, c.offset(now), c.rate); err != nil {
		return err
	}
	before = time.Now()
	node, err := rc.Time(ctx).Result()
	after = time.Now()
	if err != nil {
		return fmt.Errorf("redistest: reading the fake clock: %w", err)
	}
	lo, hi := before.Add(c.offset(before)-time.Millisecond), after.Add(c.offset(after)+time.Millisecond)
	if node.Before(lo) || node.After(hi) {
		return fmt.Errorf("redistest: the fake clock reads %s, not within %s..%s: libfaketime does not follow its spec as this package expects",
			node.Format(time.RFC3339Nano), lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	}
	return nil
}

// AdjustClock steps the server's clock by step from what it reads now
// (negative: back) and runs it at rate from now on (1: the real rate,
// 1.01: 1% fast), without any other discontinuity. The clock is kept across
// Kill and Restart, as a machine's is. It returns ErrNoFakeClock for a
// server started without WithFakeClock.
func (s *Server) AdjustClock(step time.Duration, rate float64) error {
	if !(rate > 0) {
		return fmt.Errorf("redistest: clock rate %v: must be positive", rate)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.clock == nil {
		return ErrNoFakeClock
	}
	now := time.Now()
	return s.clock.set(now, s.clock.offset(now)+step, rate)
}

// Clock returns how far the server's clock is ahead of the real one now
// (negative: behind) and its rate: 0 and 1 for a server started without
// WithFakeClock.
func (s *Server) Clock() (time.Duration, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock == nil {
		return 0, 1
	}
	return s.clock.offset(time.Now()), s.clock.rate
}
