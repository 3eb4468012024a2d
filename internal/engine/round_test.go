package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitLimit bounds every wait of the internal unit tests on a condition: the
// machine may be loaded, so it is generous, and a test waits on the condition,
// never on a tuned sleep.
const waitLimit = 5 * time.Second

// waitClosed fails t unless ch is closed within waitLimit.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("%s: not within %v", what, waitLimit)
	}
}

// IsClosed reports whether ch is closed, without waiting.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// startedCtx is a roundCtx of no round, started on its own deadlines with
// base and a deadline d from now. Its timer is stopped at the test's end.
func startedCtx(t *testing.T, base context.Context, d time.Duration) (*roundCtx, *deadlines) {
	t.Helper()
	sched := &deadlines{}
	c := &roundCtx{}
	c.start(sched, base, time.Now().Add(d))
	t.Cleanup(func() {
		sched.mu.Lock()
		defer sched.mu.Unlock()
		if sched.timer != nil {
			sched.timer.Stop()
		}
	})
	return c, sched
}

type utKey struct{}

// TestRoundCtxValuesNotCancellation: a round's context has the deadline it
// was started with, lends the base context's values, and does not end when
// the base is cancelled (start: "its cancellation never reaches the calls");
// context.Cause finds no cancelCtx of the caller's behind it.
func TestRoundCtxValuesNotCancellation(t *testing.T) {
	base, cancel := context.WithCancelCause(context.WithValue(context.Background(), utKey{}, "v"))
	c, _ := startedCtx(t, base, time.Hour)

	dl, ok := c.Deadline()
	if !ok || dl != c.deadline || time.Until(dl) < 50*time.Minute {
		t.Fatalf("Deadline() = %v, %v; want the start's deadline, an hour away", dl, ok)
	}
	if got := c.Value(utKey{}); got != "v" {
		t.Fatalf("Value: %v, want the base's value", got)
	}
	if c.Err() != nil || IsClosed(c.Done()) {
		t.Fatal("a fresh round context has ended")
	}

	cancel(errors.New("the caller went away"))
	if c.Err() != nil || IsClosed(c.Done()) {
		t.Fatalf("the base's cancellation reached the round's context: Err %v", c.Err())
	}
	if cause := context.Cause(c); cause != nil {
		t.Fatalf("context.Cause of the round's context is the caller's: %v", cause)
	}
	if got := c.Value(utKey{}); got != "v" {
		t.Fatalf("Value after the base's cancellation: %v", got)
	}
	if !c.end(context.Canceled) {
		t.Fatal("end did not close the context")
	}
	if cause := context.Cause(c); cause != context.Canceled {
		t.Fatalf("context.Cause after end: %v, want the context's own error", cause)
	}
}

// TestRoundCtxEndOnce: end closes Done, sets Err, and reports true only for
// the call that closed it, however many race; a later end, or the deadline's
// fire, changes nothing. An end other than the deadline's unschedules the
// deadline.
func TestRoundCtxEndOnce(t *testing.T) {
	c, sched := startedCtx(t, context.Background(), time.Hour)
	var expired atomic.Int32
	c.expiredF = func() { expired.Add(1) }
	if c.at.idx < 0 {
		t.Fatal("start did not schedule the deadline")
	}

	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if c.end(context.Canceled) {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d concurrent ends reported closing the context; want 1", n)
	}
	if !IsClosed(c.Done()) || c.Err() != context.Canceled {
		t.Fatalf("after end: Done closed %v, Err %v", IsClosed(c.Done()), c.Err())
	}
	c.fire()
	if c.end(context.DeadlineExceeded) || c.Err() != context.Canceled {
		t.Fatalf("a later end or fire changed the context: Err %v", c.Err())
	}
	if expired.Load() != 0 {
		t.Fatal("expiredF ran for a context that ended before its deadline")
	}
	sched.mu.Lock()
	n, idx := len(sched.heap), c.at.idx
	sched.mu.Unlock()
	if n != 0 || idx != -1 {
		t.Fatalf("the deadline is still scheduled after end: heap %d, idx %d", n, idx)
	}
}

// TestRoundCtxDeadline: at its deadline the context ends by itself with
// context.DeadlineExceeded; a try's expiredF runs once, before the
// AfterFunc callbacks, which then see the context done.
func TestRoundCtxDeadline(t *testing.T) {
	c, sched := startedCtx(t, context.Background(), 20*time.Millisecond)
	var order []string
	var mu sync.Mutex
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	c.expiredF = func() { note("expired") }
	callbackSaw := make(chan error, 1)
	c.AfterFunc(func() {
		note("callback")
		callbackSaw <- c.Err()
	})

	waitClosed(t, c.Done(), "the round context's deadline")
	if err := c.Err(); err != context.DeadlineExceeded {
		t.Fatalf("Err at the deadline: %v, want context.DeadlineExceeded", err)
	}
	select {
	case err := <-callbackSaw:
		if err != context.DeadlineExceeded {
			t.Fatalf("the callback saw Err %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the AfterFunc callback did not run at the deadline")
	}
	mu.Lock()
	got := append([]string(nil), order...)
	mu.Unlock()
	if len(got) != 2 || got[0] != "expired" || got[1] != "callback" {
		t.Fatalf("at the deadline ran %v; want expiredF once, then the callback", got)
	}
	if c.end(context.Canceled) {
		t.Fatal("end after the deadline reported closing the context")
	}
	sched.mu.Lock()
	n := len(sched.heap)
	sched.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d deadlines left after the only one fired", n)
	}

	// fire is the deadline's end, whoever calls it.
	c2, _ := startedCtx(t, context.Background(), time.Hour)
	c2.fire()
	if c2.Err() != context.DeadlineExceeded || !IsClosed(c2.Done()) {
		t.Fatalf("fire: Err %v", c2.Err())
	}
}

// TestRoundCtxAfterFunc: a callback runs once, when the context ends and
// before end returns; its stop function cancels it (true) only before that;
// a callback registered after the end runs at once, and its stop reports
// false.
func TestRoundCtxAfterFunc(t *testing.T) {
	c, _ := startedCtx(t, context.Background(), time.Hour)
	var ran, stopped atomic.Int32
	var sawDone atomic.Bool
	stop := c.AfterFunc(func() {
		ran.Add(1)
		sawDone.Store(IsClosed(c.Done()))
	})
	stopMe := c.AfterFunc(func() { stopped.Add(1) })
	if !stopMe() {
		t.Fatal("stop before the end reported false")
	}
	if stopMe() {
		t.Fatal("a second stop reported true")
	}
	if ran.Load() != 0 {
		t.Fatal("a callback ran before the context ended")
	}

	c.end(context.Canceled)
	if ran.Load() != 1 {
		t.Fatalf("the callback ran %d times by the time end returned; want 1", ran.Load())
	}
	if !sawDone.Load() {
		t.Fatal("the callback ran before Done was closed")
	}
	if stopped.Load() != 0 {
		t.Fatal("a stopped callback ran")
	}
	if stop() {
		t.Fatal("stop after the callback ran reported true")
	}
	c.end(context.Canceled)
	c.fire()
	if ran.Load() != 1 {
		t.Fatalf("the callback ran %d times after more ends; want 1", ran.Load())
	}

	late := make(chan struct{})
	if c.AfterFunc(func() { close(late) })() {
		t.Fatal("stop of a callback registered after the end reported true")
	}
	waitClosed(t, late, "a callback registered after the end")
}

// TestRoundCtxDerived: a context derived from a round's (as go-redis or a
// hook may do) ends with it, through AfterFunc and without a goroutine of
// its own, and one cancelled first leaves no callback behind.
func TestRoundCtxDerived(t *testing.T) {
	c, _ := startedCtx(t, context.Background(), time.Hour)
	child, cancel := context.WithCancel(c)
	defer cancel()
	other, cancelOther := context.WithCancel(c)
	c.mu.Lock()
	n := len(c.funcs)
	c.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d callbacks registered by two derived contexts; want 2 (AfterFunc is used)", n)
	}
	cancelOther()
	c.mu.Lock()
	n = len(c.funcs)
	c.mu.Unlock()
	if n != 1 || other.Err() == nil {
		t.Fatalf("a derived context cancelled first left %d callbacks; want 1", n)
	}

	c.end(context.Canceled)
	if !IsClosed(child.Done()) || !errors.Is(child.Err(), context.Canceled) {
		t.Fatalf("the derived context did not end with the round's: %v", child.Err())
	}
}
