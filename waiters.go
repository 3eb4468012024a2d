package redlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// Waiting for a busy key (docs/waiting.md): one Client's Acquire calls for a
// key queue here in FIFO order, the head subscribes to the key's release
// channel on every node, and hints wake it. Only a Release publishes, not a
// rollback, so that the heads of several processes are not all woken to
// split the next vote.

// releaseChannelPrefix names a key's release channel: a key's channel is
// the prefix and the key. This is its one definition in Go; the scripts
// that publish to it (scripts/release.lua) and count its subscribers
// (scripts/handover.lua) spell it as a Lua literal, and
// TestReleaseChannelSpelling keeps the three equal.
const releaseChannelPrefix = "redlock:released:"

// waiters is one Client's queues and subscriptions.
type waiters struct {
	c      *Client
	mu     sync.Mutex           // lock order: before Subscriber.mu and Life.mu only (docs/internals.md)
	queues map[string]*keyQueue // by key
	subs   []*engine.Subscriber // by node; nil until a key is first subscribed to
}

// keyQueue is the Acquire calls of one Client waiting for one key.
type keyQueue struct {
	key     string
	waiters []*waiter // FIFO; waiters[0] contends
	// subscribed: the key's channel is subscribed on every node. heard marks the
	// nodes that announced a release since the head's last attempt, and
	// confirmed those whose subscription the server confirmed.
	subscribed bool
	heard      []bool
	confirmed  []bool
	ready      chan struct{} // closed when a quorum confirmed the subscription
	// streak counts the handovers in a row made while other clients
	// waited (waiters.go, the handover).
	streak int
	// watchers are the AcquireAll calls of this Client waiting for the
	// key among others (watch): not in the FIFO, never handed the key,
	// woken by the key's release hints as the head is.
	watchers []*watcher
}

// watcher is one waiting AcquireAll, shared Lock or permit: it watches
// each of its keys.
type watcher struct {
	wake  chan struct{}     // a hint that one of the keys may be free; capacity 1
	heard map[string][]bool // by key, the nodes that announced its release since the last attempt
}

// waiter is one queued Acquire.
type waiter struct {
	turn chan struct{} // closed when it is at the head
	wake chan struct{} // a hint that the key may be free; capacity 1
	// afterHolder is set, before turn is closed, when the head before it
	// left holding the lock: an attempt at once would only be refused.
	afterHolder bool
	offer       *handOffer // while it waits to be handed the lock (waiters.go, the handover)
}

func (w *waiters) queue(key string) *keyQueue {
	if w.queues == nil {
		w.queues = make(map[string]*keyQueue)
	}
	q := w.queues[key]
	if q == nil {
		q = &keyQueue{key: key}
		w.queues[key] = q
	}
	return q
}

// waiting reports whether Acquire calls of this Client wait for key.
func (w *waiters) waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	return q != nil && len(q.waiters) > 0
}

// join queues an Acquire for key. The returned waiter's turn channel is
// closed when it may contend: at once when nobody else waits.
func (w *waiters) join(key string) *waiter {
	wt := &waiter{turn: make(chan struct{}), wake: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(key)
	q.waiters = append(q.waiters, wt)
	if len(q.waiters) == 1 {
		close(wt.turn)
	}
	return wt
}

// leave takes wt out of key's queue, wherever it is, and hands the turn to
// the next waiter, telling it whether wt left holding the lock. The last one
// out unsubscribes.
func (w *waiters) leave(key string, wt *waiter, acquired bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	for i, x := range q.waiters {
		if x != wt {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			clear(q.heard) // hints heard by the old head are not the new head's
			next := q.waiters[0]
			next.afterHolder = acquired
			close(next.turn)
		}
		break
	}
	w.dropIfIdle(q)
}

// dropIfIdle forgets q, and unsubscribes its key, once nobody waits for
// the key any more.
func (w *waiters) dropIfIdle(q *keyQueue) {
	if len(q.waiters) > 0 || len(q.watchers) > 0 {
		return
	}
	delete(w.queues, q.key)
	if q.subscribed {
		w.send(true, releaseChannelPrefix+q.key)
	}
}

// watch makes a watcher for keys, an AcquireAll's, a shared Lock's or a
// permit's, subscribed to the release channel of each, and returns it with
// the channels closed once a quorum of nodes confirmed each subscription.
func (w *waiters) watch(keys []string) (*watcher, []<-chan struct{}) {
	wt := &watcher{wake: make(chan struct{}, 1), heard: make(map[string][]bool, len(keys))}
	ready := make([]<-chan struct{}, 0, len(keys))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		q := w.queue(k)
		q.watchers = append(q.watchers, wt)
		wt.heard[k] = make([]bool, w.c.nodes.Len())
		w.subscribeLocked(q)
		ready = append(ready, q.ready)
	}
	return wt, ready
}

// unwatch takes wt off its keys.
func (w *waiters) unwatch(wt *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range wt.heard {
		if q := w.queues[k]; q != nil {
			q.watchers = slices.DeleteFunc(q.watchers, func(x *watcher) bool { return x == wt })
			w.dropIfIdle(q)
		}
	}
}

// forget clears what wt heard: its next attempt sees whatever the hints
// announced.
func (w *waiters) forget(wt *watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range wt.heard {
		clear(h)
	}
	select {
	case <-wt.wake:
	default:
	}
}

// beforeAttempt forgets the release hints heard so far: the head's next
// attempt sees whatever they announced.
func (w *waiters) beforeAttempt(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil && len(q.waiters) > 0 {
		clear(q.heard)
		select {
		case <-q.waiters[0].wake:
		default:
		}
	}
}

// subscribe subscribes to key's release channel on every node, once per queue,
// and returns a channel closed when a quorum of nodes confirmed it (or nil
// when it already was: nothing to wait for).
func (w *waiters) subscribe(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return nil
	}
	if q.subscribed {
		return nil
	}
	w.subscribeLocked(q)
	return q.ready
}

// subscribeLocked subscribes to q's key's release channel, once. Called
// with w.mu held.
func (w *waiters) subscribeLocked(q *keyQueue) {
	if q.subscribed {
		return
	}
	n := w.c.nodes.Len()
	q.subscribed = true
	q.heard, q.confirmed = make([]bool, n), make([]bool, n)
	q.ready = make(chan struct{})
	w.send(false, releaseChannelPrefix+q.key)
}

// hint records that node announced a release of key, and wakes the head once
// a quorum of nodes has.
func (w *waiters) hint(node int, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || !q.subscribed {
		return
	}
	for _, wt := range q.watchers {
		h := wt.heard[key]
		h[node] = true
		if engine.Count(h) >= w.c.nodes.Quorum {
			wake(wt.wake)
		}
	}
	if len(q.waiters) == 0 {
		return
	}
	q.heard[node] = true
	if engine.Count(q.heard) >= w.c.nodes.Quorum {
		wake(q.waiters[0].wake)
	}
}

// released wakes the head waiting for key at once: a Lock of this Client
// has just released it on a quorum.
func (w *waiters) released(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	for _, wt := range q.watchers {
		wake(wt.wake)
	}
	if len(q.waiters) > 0 {
		wake(q.waiters[0].wake)
	}
}

// confirm records a node's confirmation of a subscription.
func (w *waiters) confirm(node int, channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[channel[len(releaseChannelPrefix):]]
	if q == nil || !q.subscribed || q.confirmed[node] {
		return
	}
	q.confirmed[node] = true
	if engine.Count(q.confirmed) == w.c.nodes.Quorum {
		close(q.ready)
	}
}

// postOffer sets off as wt's standing offer, which a Release of the key
// may take (claimOffer) until wt withdraws it.
func (w *waiters) postOffer(wt *waiter, off *handOffer) {
	w.mu.Lock()
	wt.offer = off
	w.mu.Unlock()
}

// withdraw takes back wt's offer and returns it if a Release took it: the
// caller must wait for its outcome.
func (w *waiters) withdraw(wt *waiter) *handOffer {
	w.mu.Lock()
	defer w.mu.Unlock()
	off := wt.offer
	wt.offer = nil
	if off != nil && off.done != nil {
		return off
	}
	return nil
}

// claimOffer takes the offer of key's head waiter, if it posted one, and reports
// whether this Client subscribes to the key's release channel and whether it may
// hand over although other clients wait.
func (w *waiters) claimOffer(key string) (off *handOffer, subscribed, streak bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || len(q.waiters) == 0 {
		return nil, false, false
	}
	off = q.waiters[0].offer
	if off == nil || off.done != nil {
		return nil, false, false
	}
	off.done = make(chan struct{})
	// An AcquireAll of this Client watching the key counts as another
	// client waiting: the key is handed over only within a streak, then
	// announced to all.
	return off, q.subscribed && len(q.watchers) == 0, q.streak < maxStreak
}

// handedOver counts a handover of key made while other clients waited
// (inStreak), or ends the streak.
func (w *waiters) handedOver(key string, inStreak bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil {
		if inStreak {
			q.streak++
		} else {
			q.streak = 0
		}
	}
}

// send changes the subscription to channels on every node, in order and
// in one command, starting the nodes' subscribers on first use. Called with
// w.mu held, from within a public call (so the lifecycle can count the
// goroutines it starts).
func (w *waiters) send(unsubscribe bool, channels ...string) {
	if w.subs == nil {
		w.subs = make([]*engine.Subscriber, w.c.nodes.Len())
		for i := range w.subs {
			w.subs[i] = w.c.nodes.Subscribe(i, w.c.cfg.cleanupTimeout,
				func(ch string) {
					if strings.HasPrefix(ch, releaseChannelPrefix) {
						w.confirm(i, ch)
					}
				},
				func(ch string) {
					if strings.HasPrefix(ch, releaseChannelPrefix) {
						w.hint(i, ch[len(releaseChannelPrefix):])
					}
				})
		}
	}
	for _, s := range w.subs {
		s.Change(unsubscribe, channels...)
	}
}

// Handover (docs/waiting.md): a Release hands the key to the next waiting
// Acquire of the same Client in one round (scripts/handover.lua), which
// counts as the waiter's own attempt. The waiter posts an offer while it
// waits at the head of its queue; a Release takes the offer, runs the round,
// and settles it: the waiter's Lock is held, or it attempts again at once.

// handOffer is a waiting Acquire's standing offer to be handed the lock.
type handOffer struct {
	l      *Lock
	ttl    time.Duration
	ttlArg any

	// done is made when a Release takes the offer (under waiters.mu) and
	// closed by that Release once the offer is settled.
	done chan struct{}
	got  bool // the waiter's Lock is held; set before done closes
}

// handsOver reports whether this Client's locks may be handed over: the
// handover script neither fences nor guards against restarts.
func (c *Client) handsOver() bool {
	return !c.cfg.fencing && c.cfg.restartGuard == 0
}

// newOffer makes the offer a waiting Acquire of l for ttl posts, so that a
// Release of this Client may hand it the key; nil when this Client does not
// hand over (fencing or the restart guard is on).
func (c *Client) newOffer(l *Lock, ttl time.Duration, ttlArg any) *handOffer {
	if !c.handsOver() {
		return nil
	}
	return &handOffer{l: l, ttl: ttl, ttlArg: ttlArg}
}

// maxStreak is how many handovers in a row a Client makes while other
// clients wait for the key; then its Release announces the key to all of
// them. A streak buys throughput (a handover is one round, a contest of
// several processes' waiters two or more, with split votes) for a bounded
// unfairness: another process's waiter waits at most that many more turns
// for each contest, and every process's winner gets the same streak.
const maxStreak = 3

// waitHandover is await with an offer to be handed the lock meanwhile (none
// when off is nil). It reports whether a Release handed it over. Once a
// Release took the offer it waits for the outcome, even when ctx ends:
// the round is bounded by the node deadline, and a Lock handed over to an
// Acquire that has since given up is released again.
func (c *Client) waitHandover(ctx context.Context, wt *waiter, off *handOffer, ch <-chan struct{}, timeUp <-chan time.Time) (bool, error) {
	if off == nil {
		return false, c.waitFor(ctx, ch, timeUp)
	}
	c.waits.postOffer(wt, off)
	err := c.waitFor(ctx, ch, timeUp)
	taken := c.waits.withdraw(wt)
	if taken == nil {
		return false, err
	}
	<-taken.done
	if !taken.got {
		return false, err
	}
	if err != nil {
		off.l.discard(c)
		return false, err
	}
	return true, nil
}

// discard deletes a Lock handed over to an Acquire that gave up meanwhile
// (its context ended, or Close began), which will not return it. It runs
// within that Acquire's lifecycle, so also while the Client closes; a
// delete without a definite answer is retried as a Release's is.
func (l *Lock) discard(c *Client) {
	l.mu.Lock()
	l.releasing = true
	ttl := l.ttl
	l.mu.Unlock()
	t, _ := c.nodes.SendAndCount(context.Background(), l.seq, l.deleteAll(c.cfg.nodeTimeout(ttl), c.cfg.cleanupTimeout))
	if t.Reached() {
		c.waits.released(l.key)
	}
}

// handOver releases l by handing its key to the waiter that posted off, in
// one round on the waiter's lanes, and settles the offer. It returns the
// nodes where l's value is gone, as far as the replies in time tell: taken
// over by the waiter or deleted. Where a node's outcome is unknown, l's
// value may still be there, and l's delete goes there in the background,
// with its usual retries. Unless l's value is gone from a quorum, the caller
// then releases l as usual.
func (c *Client) handOver(ctx context.Context, l *Lock, off *handOffer, subscribed, streak bool) []bool {
	w := off.l
	n := c.nodes.Len()
	// Each node's reply, whenever it comes: where l's value is gone, and
	// where it may not be (no answer, or an error), l's delete follows, with
	// its retries, as a Release's would. The replies also go to seen, for
	// l's own outcome: the round returns at the waiter's, which can come
	// before enough nodes said that l's value is gone.
	seen := make(chan engine.Reply, n)
	note := func(r engine.Reply) {
		switch {
		case script.HandedAway(r):
			l.noteDeleted(engine.Reply{Node: r.Node, Status: engine.OK})
		case r.Status == engine.Unknown:
			only := make([]bool, n)
			only[r.Node] = true
			c.deleteOn(l, only)
		}
		seen <- r
	}
	start := c.cfg.clock.Now()
	until := c.cfg.validUntil(start, off.ttl)
	deadline := time.Now().Add(c.cfg.nodeTimeout(off.ttl))
	v := w.nextValue(off.ttl)
	l.mu.Lock()
	gone, tombMs := l.gen, l.tombMs()
	l.mu.Unlock()
	t, _ := c.nodes.SendAndCount(ctx, w.seq, engine.Spec{Kind: engine.Write, Op: handoverOp(l.key, v, off.ttlArg, l.vals.Own(), gone, tombMs, subscribed, streak),
		Wait: time.Until(deadline), TTL: off.ttl, Note: note})
	// Where a call of l may still land (an acquire or restore that has not
	// returned, which could write l's value where the key is absent), l's
	// delete goes too, behind it in l's lane, so that no late write of ours
	// outlives the handover; it leaves the waiter's value alone. A call
	// that has returned by now ran before the waiter could release, so it
	// found the key taken. This runs before the waiter learns the outcome.
	if late := l.seq.Unsettled(); late != nil {
		c.deleteOn(l, late)
	}
	c.settleHandover(l.key, off, v, t, until)
	return l.collectGone(seen, deadline)
}

// settleHandover settles off, whose handover round of the waiter's value v
// for key ended with t: the waiter's Lock is held until until, or the
// round is rolled back. Then it wakes the waiter.
func (c *Client) settleHandover(key string, off *handOffer, v script.Value, t *engine.Tally, until time.Time) {
	w := off.l
	got := t.Reached() && c.cfg.clock.Now().Before(until)
	if got {
		w.mu.Lock()
		w.until, w.ttl = until, off.ttl
		w.mu.Unlock()
	} else {
		c.rollback(w, v, off.ttl, t)
	}
	// The streak goes on while the waiter got the key with others waiting,
	// and ends with a handover nobody else waited for, or a release.
	inStreak := got && slices.ContainsFunc(t.Replies, func(r engine.Reply) bool { return r.Val == script.HandedInStreak })
	c.waits.handedOver(key, inStreak)
	off.got = got
	close(off.done)
	// Wake the waiter. Where the nodes released and announced the key to
	// other clients' waiters, it is woken by the same announcements as
	// they are, so that it does not always win the contest that follows.
	if got || !slices.ContainsFunc(t.Replies, func(r engine.Reply) bool { return r.Val == script.ReleasedHandover }) {
		c.waits.released(key)
	}
}

// collectGone reads the handover round's replies from seen until deadline,
// and returns the nodes where l's value is gone: handed away, or deleted.
func (l *Lock) collectGone(seen <-chan engine.Reply, deadline time.Time) []bool {
	p := l.client.nodes
	n := p.Len()
	gone := make([]bool, n)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for replied := 0; replied < n && engine.Count(gone) < p.Quorum; replied++ {
		select {
		case r := <-seen:
			gone[r.Node] = script.HandedAway(r)
		case <-timer.C:
			return l.orDeleted(gone)
		}
	}
	return l.orDeleted(gone)
}

// orDeleted adds to gone the nodes where l's delete was confirmed.
func (l *Lock) orDeleted(gone []bool) []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, d := range l.deleted {
		gone[i] = gone[i] || d
	}
	return gone
}
