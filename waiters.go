package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waiting for a busy lock. Within one Client, the Acquire calls for one key
// queue in FIFO order and only the head contends on the nodes; the others
// wait for their turn. An Acquire joins the queue after its first attempt
// failed, or before it when others already wait, so an uncontended Acquire
// never touches it. The head, after its first failed attempt, subscribes
// to the key's release channel on every node (one pub/sub connection per
// node per Client, shared by all keys) and attempts again at once, so a
// release between its attempt and its subscription is not missed. From then
// on it attempts again when a quorum of nodes has announced a release of the
// key since its last attempt, when a Lock of this Client released the key,
// or when its fallback timer fires: the refusing nodes' remaining TTL,
// capped by the RetryStrategy's wait. A lost message thus costs at most one
// capped wait, and nodes that refuse pub/sub (an ACL without channel rights)
// leave the fallback, TTL-bounded polling, which never fails the Acquire.
// A waiter that gets its turn from a head that took the lock waits for that
// lock's release (or its first backoff) before its first attempt, which
// would only be refused; only a Release publishes, not a rollback, so the
// heads of several processes are not all woken to split the next vote.
// While it waits, the head offers to be handed the lock by a Release of this
// Client in the release's own round (handover.go).

// releaseChannelPrefix names a key's release channel: a key's channel is
// the prefix and the key. This is its one definition in Go; the scripts
// that publish to it (scripts/release.lua) and count its subscribers
// (scripts/handover.lua) spell it as a Lua literal, and
// TestReleaseChannelSpelling keeps the three equal.
const releaseChannelPrefix = "redlock:released:"

// waiters is one Client's queues and subscriptions.
type waiters struct {
	c      *Client
	mu     sync.Mutex           // lock order: before nodeSub.mu and lifecycle.mu only (docs/internals.md)
	queues map[string]*keyQueue // by key
	subs   []*nodeSub           // by node; nil until a key is first subscribed to
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
	// waited (handover.go).
	streak int
}

// waiter is one queued Acquire.
type waiter struct {
	turn chan struct{} // closed when it is at the head
	wake chan struct{} // a hint that the key may be free; capacity 1
	// afterHolder is set, before turn is closed, when the head before it
	// left holding the lock: an attempt at once would only be refused.
	afterHolder bool
	offer       *handOffer // while it waits to be handed the lock (handover.go)
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
	return w.queues[key] != nil
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
	if len(q.waiters) == 0 {
		delete(w.queues, key)
		if q.subscribed {
			w.send(subOp{channel: releaseChannelPrefix + key, unsubscribe: true})
		}
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
	if q == nil || q.subscribed {
		return nil
	}
	n := len(w.c.nodes.nodes)
	q.subscribed = true
	q.heard, q.confirmed = make([]bool, n), make([]bool, n)
	q.ready = make(chan struct{})
	w.send(subOp{channel: releaseChannelPrefix + key})
	return q.ready
}

// hint records that node announced a release of key, and wakes the head once
// a quorum of nodes has.
func (w *waiters) hint(node int, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || !q.subscribed || len(q.waiters) == 0 {
		return
	}
	q.heard[node] = true
	if count(q.heard) >= w.c.nodes.quorum {
		notify(q.waiters[0].wake)
	}
}

// released wakes the head waiting for key at once: a Lock of this Client
// has just released it on a quorum.
func (w *waiters) released(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil && len(q.waiters) > 0 {
		notify(q.waiters[0].wake)
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
	if count(q.confirmed) == w.c.nodes.quorum {
		close(q.ready)
	}
}

// postOffer posts wt's postOffer to be handed the lock while it waits.
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

// takeOffer takes the offer of key's head waiter, if it posted one, and reports
// whether this Client subscribes to the key's release channel and whether it may
// hand over although other clients wait.
func (w *waiters) takeOffer(key string) (off *handOffer, subscribed, streak bool) {
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
	return off, q.subscribed, q.streak < maxStreak
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

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// subOp is a change to the subscriptions, applied to every node in order.
type subOp struct {
	channel     string
	unsubscribe bool
}

// send queues op on every node's subscriber, starting them on first use.
// Called with w.mu held, from within a public call (so the lifecycle can
// count the goroutines it starts).
func (w *waiters) send(op subOp) {
	if w.subs == nil {
		w.subs = make([]*nodeSub, len(w.c.nodes.nodes))
		for i, n := range w.c.nodes.nodes {
			w.subs[i] = newNodeSub(w, i, n.client)
		}
	}
	for _, s := range w.subs {
		s.push(op)
	}
}

// nodeSub is one node's pub/sub connection: a goroutine applies the
// subscription changes in order, another reads the messages. Both end when
// the Client closes.
type nodeSub struct {
	w    *waiters
	node int
	ps   *redis.PubSub

	mu      sync.Mutex // lock order: a leaf (docs/internals.md)
	pending []subOp
	kick    chan struct{} // capacity 1: pending has work
}

func newNodeSub(w *waiters, node int, rc redis.UniversalClient) *nodeSub {
	s := &nodeSub{w: w, node: node, ps: rc.Subscribe(context.Background()), kick: make(chan struct{}, 1)}
	life := &w.c.nodes.life
	life.add(2)
	go s.apply()
	go s.receive()
	return s
}

func (s *nodeSub) push(op subOp) {
	s.mu.Lock()
	s.pending = append(s.pending, op)
	s.mu.Unlock()
	notify(s.kick)
}

// apply sends the subscription changes, each with a deadline. A change that
// fails is not retried here: go-redis keeps the channel list and
// resubscribes when it reconnects, and the waiters fall back to polling.
func (s *nodeSub) apply() {
	life := &s.w.c.nodes.life
	defer life.end()
	timeout := s.w.c.cfg.cleanupTimeout
	for {
		select {
		case <-s.kick:
		case <-life.closing:
			_ = s.ps.Close() // ends receive
			return
		}
		s.mu.Lock()
		ops := s.pending
		s.pending = nil
		s.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			if op.unsubscribe {
				_ = s.ps.Unsubscribe(ctx, op.channel)
			} else {
				_ = s.ps.Subscribe(ctx, op.channel)
			}
			cancel()
		}
	}
}

// receive dispatches the node's messages. On an error (the node is down, the
// connection broke, pub/sub is refused) it waits before reading again, so a
// dead node costs no busy loop; go-redis reconnects and resubscribes.
func (s *nodeSub) receive() {
	life := &s.w.c.nodes.life
	defer life.end()
	backoff := 50 * time.Millisecond
	for {
		msg, err := s.ps.Receive(context.Background())
		if err != nil {
			select {
			case <-life.closing:
				return
			case <-time.After(backoff):
				backoff = min(2*backoff, 2*time.Second)
			}
			continue
		}
		backoff = 50 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && len(m.Channel) > len(releaseChannelPrefix) {
				s.w.confirm(s.node, m.Channel)
			}
		case *redis.Message:
			if len(m.Channel) > len(releaseChannelPrefix) {
				s.w.hint(s.node, m.Channel[len(releaseChannelPrefix):])
			}
		}
	}
}
