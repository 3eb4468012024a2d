package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisnode"
)

// What the client knows of each node's clock: a reading of it, and when,
// on our monotonic clock, the reading was made. A write of a Lock carries
// the node-clock millisecond after which it must change nothing (its
// deadline, docs/late-writes.md): our deadline for the call, carried over
// to the node's clock with this reading, plus what the reading may be off
// by. An error in it costs liveness alone (a write refused as late, or a
// refusal kept a little longer), never safety: the node compares the
// deadline with its own clock, and a delete's refusal expires by the same
// clock (PXAT), so the two always agree on the node.

// clockReading is one reading of a node's clock: the node's Unix time in
// microseconds, read at some moment within half of mid.
type clockReading struct {
	nodeUs int64
	mid    time.Time     // midway between the request and its reply, on our clock
	half   time.Duration // half the round trip: how far from mid the reading may have been made
}

// nodeClock is what a node's writes carry their deadlines with.
type nodeClock struct {
	reading    atomic.Pointer[clockReading]
	refreshing atomic.Bool // a read of the node's clock is under way (refresh)
	mu         sync.Mutex  // serializes note's read-compare-store
	// failed is why the latest read of the node's clock failed, nil since
	// one succeeded: what a write not sent for want of a reading shows.
	failed atomic.Pointer[errBox]
}

// note takes a reading of the node's clock made between sent and got, and
// keeps it unless the one kept is better now: closer (a smaller window)
// once its age is counted at rate. force keeps it anyway: the node said
// the kept one was wrong (a write refused as late).
func (c *nodeClock) note(nodeUs int64, sent, got time.Time, rate float64, force bool) {
	if got.Before(sent) {
		got = sent
	}
	half := got.Sub(sent) / 2
	r := &clockReading{nodeUs: nodeUs, mid: sent.Add(half), half: half}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed.Store(nil)
	if old := c.reading.Load(); old != nil && !force && old.window(r.mid, rate) < r.half {
		return
	}
	c.reading.Store(r)
}

// unknown is why a write to the node was not sent while its clock is not
// known: the error its latest read got, as the node's own (a server's
// answer, such as an ACL without TIME) or as a silence (a refused
// connection, matching ErrNoReply, as node.silence shows it), or
// errNoClock before any read ended.
func (c *nodeClock) unknown() error {
	b := c.failed.Load()
	if b == nil {
		return errNoClock
	}
	var re redis.Error
	if m := Misconfig(b.err); m != nil || errors.As(b.err, &re) {
		return fmt.Errorf("not sent, the node's clock could not be read: %w", asMisconfig(b.err))
	}
	if errors.Is(b.err, ErrNoReply) {
		return b.err
	}
	return silentError{b.err}
}

// noteLate takes the node's clock as a write's late refusal gave it (its
// millisecond, nodeMs), read by the script at some moment between sent
// and got. A write held up in the network, in a stopped node's socket or
// behind a hot key reaches its node late with the node's clock where the
// kept reading says it is: the reply is then as wide as the hold, and the
// kept reading, which agrees with it, is closer and stays unless the
// reply's is better. A reply that the kept reading cannot explain (the
// clock stepped, or drifted past the margin a deadline allows) replaces
// it, however wide: the next write's deadline must be right.
func (c *nodeClock) noteLate(nodeMs int64, sent, got time.Time, rate float64) {
	old := c.reading.Load()
	agrees := old != nil &&
		old.earliest(sent, rate) <= (nodeMs+1)*1000-1 && nodeMs*1000 <= old.latest(got, rate)
	c.note(nodeMs*1000, sent, got, rate, !agrees)
}

// earliest and latest are the earliest and latest the node's clock can
// read at our moment at, in Unix microseconds, by r as a write's deadline
// takes it (its age counted for at most lateAgeCap).
func (r *clockReading) earliest(at time.Time, rate float64) int64 {
	return r.nodeUs + (at.Sub(r.mid) - r.cappedWindow(at, rate)).Microseconds()
}

func (r *clockReading) latest(at time.Time, rate float64) int64 {
	return r.nodeUs + (at.Sub(r.mid) + r.cappedWindow(at, rate)).Microseconds()
}

// cappedWindow is the window a write's deadline allows for: the reading's
// half round trip up to lateHalfCap, and its drift over an age of up to
// lateAgeCap. An early deadline costs only a write refused as late, whose
// reply carries the node's clock (noteLate); passed, which must not err
// early, uses the whole window.
func (r *clockReading) cappedWindow(at time.Time, rate float64) time.Duration {
	return min(r.half, lateHalfCap) + time.Duration(float64(min(at.Sub(r.mid).Abs(), lateAgeCap))*rate)
}

// lateHalfCap bounds the half round trip of a reading that a write's
// deadline allows for: a reading made while its node was stopped for
// seconds, or at a first contact under load, would otherwise put every
// deadline, and the refusals a delete leaves for them, that far out until
// the reading is replaced. Half a second is over three times a far node's
// (150 ms away).
const lateHalfCap = 500 * time.Millisecond

// window is how far the node's clock may be from what r says at at: the
// reading's own half round trip, and a drift of rate since.
func (r *clockReading) window(at time.Time, rate float64) time.Duration {
	return r.half + time.Duration(float64(at.Sub(r.mid).Abs())*rate)
}

// lateMs is the node-clock Unix millisecond by which our moment at has
// passed on the node, allowing for the reading's error: what a write sent
// until at carries as its deadline. ok is false while no reading is known.
//
// The reading's age counts for at most lateAgeCap: a deadline computed
// too early costs only a write refused as late (whose reply carries the
// node's clock, taken at once), never safety, while one computed from an
// old reading's whole window would let a write land, and a delete's
// refusal live, up to 1 % of the reading's age later (freshen reads an old
// clock first, but a loaded node may not answer within its bound).
func (c *nodeClock) lateMs(at time.Time, rate float64, slack time.Duration) (ms int64, ok bool) {
	r := c.reading.Load()
	if r == nil {
		return 0, false
	}
	us := r.latest(at, rate) + slack.Microseconds()
	return (us + 999) / 1000, true
}

// lateAgeCap bounds the age of a reading that a write's deadline allows
// for (nodeClock.lateMs): ten seconds, 100 ms of margin at a drift of 1 %.
const lateAgeCap = 10 * time.Second

// passed reports whether the node's clock is past millisecond ms at our
// moment now, whatever the reading's error: the earliest the node's clock
// can be at now, by the reading and its window, is in a later millisecond.
// A write with deadline ms can no longer land then (late_write.lua accepts
// a write until its node-clock millisecond passes ms).
func (c *nodeClock) passed(ms int64, now time.Time, rate float64) bool {
	r := c.reading.Load()
	if r == nil {
		return false
	}
	earliest := r.nodeUs + (now.Sub(r.mid) - r.window(now, rate)).Microseconds()
	return earliest >= (ms+1)*1000
}

// stale reports whether the node's clock is to be read again: its reading
// is older than refresh, or none is known.
func (c *nodeClock) stale(now time.Time, refresh time.Duration) bool {
	r := c.reading.Load()
	return r == nil || now.Sub(r.mid) > refresh
}

// lateReply is the reply of a write that reached its node after its
// deadline (scripts/late.lua): "LATE" and the node's clock in milliseconds.
const lateReply = "LATE "

// readLate reads a write's reply as the node's refusal of a late write: ok
// when it is one, with the node's clock, in milliseconds, when it refused.
func readLate(cmd *redis.Cmd) (nodeMs int64, ok bool) {
	err := cmd.Err()
	if err == nil || !strings.HasPrefix(err.Error(), lateReply) {
		return 0, false
	}
	// Declared past the common case: errors.As moves it to the heap.
	var re redis.Error
	if !errors.As(err, &re) {
		return 0, false
	}
	ms, perr := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(err.Error(), lateReply)), 10, 64)
	return ms, perr == nil
}

// unreadCause is what a clock read that failed with err says of the
// node: err, unless it is the read's context ending, which says only that
// no reply came in time (a read under a context a refused first contact
// had spent, go-redis backing off between dials past its end): then the
// error the node's reads or calls last failed with, if it has one, or
// ErrNoReply.
func (n *node) unreadCause(err error) error {
	if !IsContextErr(err) {
		return err
	}
	if b := n.clock.failed.Load(); b != nil && !IsContextErr(b.err) {
		return b.err
	}
	if b := n.lastCause.Load(); b != nil {
		return b.err
	}
	return ErrNoReply
}

// ErrLate is a node's refusal of a write that reached it after its
// deadline: it changed nothing (scripts/late.lua).
var ErrLate = errors.New("redlock: reached the node after its deadline, changed nothing")

// readClock reads the node's clock with TIME (or, from a cluster client,
// the first master's) and notes it.
func (n *node) readClock(ctx context.Context, rate float64) error {
	sent := time.Now()
	t, err := n.client.Time(ctx).Result()
	if err != nil {
		n.clock.failed.Store(&errBox{n.unreadCause(err)})
		return err
	}
	got := time.Now()
	n.rtt.observe(sent, got)
	n.clock.note(t.UnixMicro(), sent, got, rate, false)
	return nil
}

// noteInfoClock notes the node's clock from its INFO server section, read
// between sent and got (server_time_usec; a server without it is read
// with TIME instead).
func (n *node) noteInfoClock(info string, sent, got time.Time, rate float64) bool {
	us, err := strconv.ParseInt(redisnode.InfoFields(info)["server_time_usec"], 10, 64)
	if err != nil || us <= 0 {
		return false
	}
	n.clock.note(us, sent, got, rate, false)
	return true
}

// refreshClock reads node i's clock again in the background when its
// reading is stale, unless a read is under way: the margin a deadline
// carries grows with the reading's age.
func (p *Set) refreshClock(n *node) {
	if !n.clock.stale(time.Now(), p.timing.ClockRefresh) || !n.clock.refreshing.CompareAndSwap(false, true) {
		return
	}
	p.Life.Add(1)
	go func() {
		defer p.Life.End()
		defer n.clock.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), p.timing.IdentifyTimeout)
		defer cancel()
		_ = n.readClock(ctx, p.timing.ClockDrift)
	}()
}

// staleReadings is how many ClockRefresh periods old a node's reading
// may be when a write round starts before freshen reads the clock again
// first: the deadline a write carries grows by ClockDrift of the
// reading's age (a Client idle for ten minutes would send deadlines six
// seconds loose, and its refusals would live as long).
const staleReadings = 5

// freshen reads again, in parallel, the clocks of write round r's nodes
// whose readings are older than staleReadings × ClockRefresh (writes
// refresh a reading in the background once it is ClockRefresh old, so
// only a Client idle that long gets here), and waits for those reads at
// most a quarter of the round's wait: a node that does not answer in time
// is sent the write with the reading it has, and one whose last read
// failed is left to the background. The reads go on after the wait if
// they must (go-redis may hold a call past its context).
func (p *Set) freshen(r *round) {
	now := time.Now()
	old := now.Add(-staleReadings * p.timing.ClockRefresh)
	var done []chan struct{}
	for k := range r.jobs {
		n := p.nodes[r.jobs[k].node]
		rd := n.clock.reading.Load()
		if rd == nil || !rd.mid.Before(old) || n.clock.failed.Load() != nil || !n.clock.refreshing.CompareAndSwap(false, true) {
			continue
		}
		ch := make(chan struct{})
		done = append(done, ch)
		p.Life.Add(1)
		go func() {
			defer p.Life.End()
			defer n.clock.refreshing.Store(false)
			defer close(ch)
			ctx, cancel := context.WithTimeout(context.Background(), p.timing.IdentifyTimeout)
			defer cancel()
			_ = n.readClock(ctx, p.timing.ClockDrift)
		}()
	}
	if len(done) == 0 {
		return
	}
	t := time.NewTimer(r.deadline.Sub(now) / 4)
	defer t.Stop()
	for _, ch := range done {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// lateMs is node i's deadline for a write of ours sent until at, on the
// node's clock (nodeClock.lateMs); ok is false while the node's clock is
// unknown, and a read of it is then started.
func (p *Set) lateMs(i int, at time.Time) (int64, bool) {
	n := p.nodes[i]
	p.refreshClock(n)
	return n.clock.lateMs(at, p.timing.ClockDrift, p.timing.LateSlack)
}
