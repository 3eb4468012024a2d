package engine

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// refusingAddr is a loopback address nothing listens on.
func refusingAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// A node refusing connections is shown with the refusal when a write is
// not sent to it for want of its clock, whatever a read of the clock
// tried since got: a read under a context that ended first (go-redis
// retries a refused dial, 100 ms apart, past a second's bound; a read
// under a context a refused first contact had spent) says only that no
// reply came in time. It overwrote the refusal, and the write named the
// context's error, "context deadline exceeded (no reply within node
// timeout)", an error that says the caller's context ended; a loaded
// machine's TestAcquireUnavailable failed so.
func TestUnreadClockNamesRefusal(t *testing.T) {
	// A refused dial is reported at once: no retry.
	rc := redis.NewClient(&redis.Options{Addr: refusingAddr(t), DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	p, err := NewSet([]redis.UniversalClient{rc}, Config{Scripts: testScripts, Sources: testSources, KeyLife: testKeyLife, Timing: testTiming})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Life.Shut() })
	_ = p.CheckServers(time.Second) // the first contact, refused, waited for
	n := p.nodes[0]
	if got := n.clock.unknown(); !errors.Is(got, syscall.ECONNREFUSED) {
		t.Fatalf("after the first contact the clock is unknown for %v; want the refusal", got)
	}
	spent, cancel := context.WithTimeout(context.Background(), -time.Second)
	cancel()
	if err := n.readClock(spent, testTiming.ClockDrift); !IsContextErr(err) {
		t.Fatalf("a read under a spent context: %v", err)
	}

	if err := p.Life.BeginCall(); err != nil {
		t.Fatal(err)
	}
	defer p.Life.EndCall()
	tl, err := p.SendAndCount(context.Background(), NewLanes(1), WriteRound(acquireOp("ut:unread", utValue("utU.", 1), int64(10_000)), Waits{Floor: 50 * time.Millisecond, Cap: time.Second}, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := tl.Replies[0].Err
	if !errors.Is(got, syscall.ECONNREFUSED) || errors.Is(got, context.DeadlineExceeded) || !errors.Is(got, ErrNoReply) {
		t.Fatalf("the write to a node refusing connections: %v; want the refusal as a silence, not a context's error", got)
	}
}
