package engine

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher sends a node's calls together: while flights (a call, or a
// batch of calls) are in flight to the node, up to maxFlights of them, the
// calls that arrive wait, and go out as one batch (a go-redis pipeline: one
// write of every command, the replies read in order) as soon as a flight
// returns. There is no timer: a call to a node with a free flight goes at
// once, alone, as without a batcher. Two system calls a batch instead of two
// a call is what many locks at once on 2 cores cost (docs/benchmarks.md).
//
// A flight that has been out for several times as long as the node's
// flights take (stallFactor times their moving average, at least
// stallFloor), or past the deadlines of all its calls, stops counting: a
// stalled node, a reply the network lost. The next call goes at once on
// another connection, and the calls queued behind it go then (rescue),
// rather than when go-redis gives up on it. So a lost reply costs the node
// no call but its own, and a node that answers slowly still gets batches.
//
// Nothing else changes: each call keeps its own command, context and
// deadline (a reply after it is late, as before), a call whose context
// ended, or whose deadline passed, while it waited is not sent (errNotSent,
// as a write whose round is over), a NOSCRIPT reply is handled by its own
// call, and the lanes still hold one call of a lock per node at a time, so
// that a batch never carries two calls of one lock.
//
// A batch is run by the first call that waited for it, on its own goroutine
// (a worker's), under a context whose deadline is the latest of the batch's
// deadlines: a client that bounds calls by their context
// (ContextTimeoutEnabled) still ends each batch within its calls' time.
// Its commands are sent once (once): go-redis never sends a batch again,
// so no write of it goes out after its own round, whatever the latest
// deadline.
type batcher struct {
	mu      sync.Mutex
	flights []flight  // in flight and not overdue; at most maxFlights
	gen     uint64    // the last flight's name
	queue   []*waiter // the calls for the next batch, in arrival order
	spare   []*waiter // an emptied batch's array, for the next queue
	// rescue starts the queued calls once a flight is overdue, should none
	// have returned by then: armed while calls are queued.
	rescue     *time.Timer
	flightsBuf [maxFlights]flight
	// avg is the moving average of how long the node's flights took, zero
	// before the first returned; minStall, when set, replaces the
	// least time after which a flight stops counting (tests).
	avg      time.Duration
	minStall time.Duration
}

// maxFlights is how many flights a node has in flight at once: two keep
// the batches large under load and let one flight's replies be read while
// the next is written (docs/benchmarks.md).
const maxFlights = 2

// A flight stops counting once it has been out stallFactor times the
// node's average flight, and at least stallFloor.
const (
	stallFactor = 4
	stallFloor  = 2 * time.Millisecond
)

// flight is a call or batch in flight: its name, when it started, and the
// latest deadline of its calls, zero when one has none.
type flight struct {
	gen   uint64
	start time.Time
	until time.Time
}

// waiter is one call waiting for the next batch.
type waiter struct {
	ctx   context.Context
	cmd   *redis.Cmd
	wake  chan bool // true: run the batch (w.batch) as flight w.gen; false: w.cmd is done
	batch []*waiter
	gen   uint64
	sent  bool
}

var waiters = sync.Pool{New: func() any { return &waiter{wake: make(chan bool, 1)} }}

// idle reports whether nothing is in flight to the node: a call made now
// would go at once, alone.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(time.Now())
	return len(b.flights) == 0
}

// prune stops counting the flights that are overdue. Called with b.mu
// held.
func (b *batcher) prune(now time.Time) {
	if b.flights == nil {
		b.flights = b.flightsBuf[:0]
	}
	kept := b.flights[:0]
	for _, f := range b.flights {
		if now.Before(b.overdueAt(f)) {
			kept = append(kept, f)
		}
	}
	b.flights = kept
}

// overdueAt is when flight f stops counting. Called with b.mu held.
func (b *batcher) overdueAt(f flight) time.Time {
	floor := stallFloor
	if b.minStall > 0 {
		floor = b.minStall
	}
	at := f.start.Add(max(floor, stallFactor*b.avg))
	if !f.until.IsZero() && f.until.Before(at) {
		return f.until
	}
	return at
}

// start counts a new flight that ends by until, and returns its name.
// Called with b.mu held.
func (b *batcher) start(now, until time.Time) uint64 {
	b.gen++
	b.flights = append(b.flights, flight{b.gen, now, until})
	return b.gen
}

// process runs cmd on the node's client c: at once if a flight is free,
// else in the next batch. It reports false when cmd was not sent because
// ctx ended while it waited. alone runs cmd at once whatever is in flight,
// outside the flights: a call on a round's caller's goroutine, which must
// not wait past its deadline for another batch.
func (b *batcher) process(c redis.UniversalClient, ctx context.Context, cmd *redis.Cmd, alone bool) bool {
	b.mu.Lock()
	now := time.Now()
	b.prune(now)
	if len(b.flights) < maxFlights {
		until, _ := ctx.Deadline()
		g := b.start(now, until)
		b.mu.Unlock()
		_ = c.Process(ctx, once{cmd})
		b.next(g)
		return true
	}
	if alone {
		b.mu.Unlock()
		_ = c.Process(ctx, once{cmd})
		return true
	}
	w := waiters.Get().(*waiter)
	w.ctx, w.cmd = ctx, cmd
	if len(b.queue) == 0 {
		b.armRescue(now)
	}
	b.queue = append(b.queue, w)
	b.mu.Unlock()
	if <-w.wake {
		b.run(c, w.batch, w.gen)
	}
	sent := w.sent
	w.ctx, w.cmd, w.batch, w.sent = nil, nil, nil, false
	waiters.Put(w)
	return sent
}

// armRescue arms the timer that starts the queued calls when the first
// flight becomes overdue, should none have returned by then. Called with
// b.mu held.
func (b *batcher) armRescue(now time.Time) {
	var first time.Time
	for _, f := range b.flights {
		if at := b.overdueAt(f); first.IsZero() || at.Before(first) {
			first = at
		}
	}
	if b.rescue != nil {
		b.rescue.Stop()
	}
	b.rescue = time.AfterFunc(first.Sub(now), b.rescued)
}

// rescued runs when a flight becomes overdue while calls are queued.
func (b *batcher) rescued() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		return
	}
	now := time.Now()
	b.prune(now)
	if len(b.flights) < maxFlights {
		b.take()
		return
	}
	b.armRescue(now)
}

// next ends flight g, counted or overdue: the queued calls go as the next
// flight, run by the first of them.
func (b *batcher) next(g uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for i, f := range b.flights {
		if f.gen == g {
			// Only flights that returned while counted feed the average: a
			// stalled one's time says nothing of how long flights take.
			if took := now.Sub(f.start); b.avg == 0 {
				b.avg = took
			} else {
				b.avg += (took - b.avg) / 8
			}
			b.flights = append(b.flights[:i], b.flights[i+1:]...)
			break
		}
	}
	if len(b.queue) == 0 {
		return
	}
	b.prune(now)
	if len(b.flights) < maxFlights {
		b.take()
	}
}

// take makes the queued calls the next flight and wakes the first of them
// to run it. Called with b.mu held, a non-empty queue and a free flight.
func (b *batcher) take() {
	batch := b.queue
	b.queue, b.spare = b.spare, nil
	if b.rescue != nil {
		b.rescue.Stop()
		b.rescue = nil
	}
	var until time.Time
	bounded := true
	for _, w := range batch {
		if d, ok := w.ctx.Deadline(); !ok {
			bounded = false
		} else if d.After(until) {
			until = d
		}
	}
	if !bounded {
		until = time.Time{}
	}
	batch[0].batch, batch[0].gen = batch, b.start(time.Now(), until)
	batch[0].wake <- true
}

// run sends batch, flight g, whose first call is the caller's, hands the
// node to the next flight, and wakes the batch's other calls.
func (b *batcher) run(c redis.UniversalClient, batch []*waiter, g uint64) {
	var pipe redis.Pipeliner
	var only *waiter
	var last time.Time
	bounded, n := true, 0
	now := time.Now()
	for _, w := range batch {
		d, ok := w.ctx.Deadline()
		if w.ctx.Err() != nil || ok && !now.Before(d) {
			// Its round is over, or its try: not sent. A write is never
			// sent after its round's deadline, whenever its context
			// notices (the lanes' expireBy counts on it).
			continue
		}
		w.sent = true
		if !ok {
			bounded = false
		} else if d.After(last) {
			last = d
		}
		n++
		switch n {
		case 1:
			only = w
		case 2:
			pipe = c.Pipeline()
			_ = pipe.Process(only.ctx, once{only.cmd})
			fallthrough
		default:
			_ = pipe.Process(w.ctx, once{w.cmd})
		}
	}
	switch {
	case n == 1:
		_ = c.Process(only.ctx, once{only.cmd})
	case n > 1:
		// The first call's values (a tracing span, for the user's go-redis
		// hooks), none of its cancellation.
		ctx, cancel := context.WithoutCancel(only.ctx), context.CancelFunc(nil)
		if bounded {
			ctx, cancel = context.WithDeadline(ctx, last)
		}
		_, _ = pipe.Exec(ctx)
		if cancel != nil {
			cancel()
		}
	}
	b.next(g)
	for _, w := range batch[1:] {
		w.wake <- false
	}
	clear(batch)
	b.mu.Lock()
	if b.spare == nil {
		b.spare = batch[:0]
	}
	b.mu.Unlock()
}
