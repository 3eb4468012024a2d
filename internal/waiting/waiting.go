// Package waiting keeps one Client's calls that wait for a busy key
// (docs/waiting.md): its Acquire calls for a key queue in FIFO order, the
// head subscribes to the key's release channel on every node, and hints
// wake it; AcquireAll calls, shared Locks and permits watch their keys
// beside the queue. Only a Release publishes, not a rollback, so that the
// heads of several processes are not all woken to split the next vote.
// The queue also carries the head's offer to be handed the key by a
// Release of the same Client (the handover, in the root package).
package waiting

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/engine"
)

// ChannelPrefix names a key's release channel: a key's channel is the
// prefix and the key. This is its one definition in Go; the scripts that
// publish to it (scripts/release.lua) and count its subscribers
// (scripts/handover.lua) spell it as a Lua literal, and
// TestReleaseChannelSpelling keeps the three equal.
const ChannelPrefix = "redlock:released:"

// maxStreak is how many handovers in a row a Client makes while other
// clients wait for the key; then its Release announces the key to all of
// them. A streak buys throughput (a handover is one round, a contest of
// several processes' waiters two or more, with split votes) for a bounded
// unfairness: another process's waiter waits at most that many more turns
// for each contest, and every process's winner gets the same streak.
const maxStreak = 3

// Queues is one Client's queues and subscriptions; O is its Acquire calls'
// offer to be handed the key (a Release claims it: ClaimOffer). The zero
// value is ready once Init has run.
type Queues[O any] struct {
	nodes   *engine.Set
	timeout time.Duration           // a subscription change's node deadline
	mu      sync.Mutex              // lock order: before Subscriber.mu and Life.mu only (docs/internals.md)
	queues  map[string]*keyQueue[O] // by key
	subs    []*engine.Subscriber    // by node; nil until a key is first subscribed to
}

// Init sets the nodes the queues subscribe on, and the deadline of each
// subscription change.
func (w *Queues[O]) Init(nodes *engine.Set, timeout time.Duration) {
	w.nodes, w.timeout = nodes, timeout
}

// keyQueue is the Acquire calls of one Client waiting for one key.
type keyQueue[O any] struct {
	key     string
	waiters []*Waiter[O] // FIFO; waiters[0] contends
	// subscribed: the key's channel is subscribed on every node. heard marks the
	// nodes that announced a release since the head's last attempt, and
	// confirmed those whose subscription the server confirmed.
	subscribed bool
	heard      []bool
	confirmed  []bool
	ready      chan struct{} // closed when a quorum confirmed the subscription
	// streak counts the handovers in a row made while other clients
	// waited (the handover, in the root package).
	streak int
	// watchers are the AcquireAll calls of this Client waiting for the
	// key among others (watch): not in the FIFO, never handed the key,
	// woken by the key's release hints as the head is.
	watchers []*Watcher
}

// Watcher is one waiting AcquireAll, shared Lock or permit: it watches
// each of its keys.
type Watcher struct {
	Wake  chan struct{}     // a hint that one of the keys may be free; capacity 1
	heard map[string][]bool // by key, the nodes that announced its release since the last attempt
}

// Waiter is one queued Acquire.
type Waiter[O any] struct {
	Turn chan struct{} // closed when it is at the head
	Wake chan struct{} // a hint that the key may be free; capacity 1
	// AfterHolder is set, before Turn is closed, when the head before it
	// left holding the lock: an attempt at once would only be refused.
	AfterHolder bool
	offer       *O            // while it waits to be handed the lock (PostOffer)
	claimed     chan struct{} // made when a Release claims the offer
}

func (w *Queues[O]) queue(key string) *keyQueue[O] {
	if w.queues == nil {
		w.queues = make(map[string]*keyQueue[O])
	}
	q := w.queues[key]
	if q == nil {
		q = &keyQueue[O]{key: key}
		w.queues[key] = q
	}
	return q
}

// Waiting reports whether Acquire calls of this Client wait for key.
func (w *Queues[O]) Waiting(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	return q != nil && len(q.waiters) > 0
}

// Join queues an Acquire for key. The returned waiter's Turn channel is
// closed when it may contend: at once when nobody else waits.
func (w *Queues[O]) Join(key string) *Waiter[O] {
	wt := &Waiter[O]{Turn: make(chan struct{}), Wake: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue(key)
	q.waiters = append(q.waiters, wt)
	if len(q.waiters) == 1 {
		close(wt.Turn)
	}
	return wt
}

// Leave takes wt out of key's queue, wherever it is, and hands the turn to
// the next waiter, telling it whether wt left holding the lock. The last one
// out unsubscribes.
func (w *Queues[O]) Leave(key string, wt *Waiter[O], acquired bool) {
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
			next.AfterHolder = acquired
			close(next.Turn)
		}
		break
	}
	w.dropIfIdle(q)
}

// dropIfIdle forgets q, and unsubscribes its key, once nobody waits for
// the key any more.
func (w *Queues[O]) dropIfIdle(q *keyQueue[O]) {
	if len(q.waiters) > 0 || len(q.watchers) > 0 {
		return
	}
	delete(w.queues, q.key)
	if q.subscribed {
		w.send(true, ChannelPrefix+q.key)
	}
}

// Watch makes a watcher for keys, an AcquireAll's, a shared Lock's or a
// permit's, subscribed to the release channel of each, and returns it with
// the channels closed once a quorum of nodes confirmed each subscription.
func (w *Queues[O]) Watch(keys []string) (*Watcher, []<-chan struct{}) {
	wt := &Watcher{Wake: make(chan struct{}, 1), heard: make(map[string][]bool, len(keys))}
	ready := make([]<-chan struct{}, 0, len(keys))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		q := w.queue(k)
		q.watchers = append(q.watchers, wt)
		wt.heard[k] = make([]bool, w.nodes.Len())
		w.subscribeLocked(q)
		ready = append(ready, q.ready)
	}
	return wt, ready
}

// Unwatch takes wt off its keys.
func (w *Queues[O]) Unwatch(wt *Watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range wt.heard {
		if q := w.queues[k]; q != nil {
			q.watchers = slices.DeleteFunc(q.watchers, func(x *Watcher) bool { return x == wt })
			w.dropIfIdle(q)
		}
	}
}

// Forget clears what wt heard: its next attempt sees whatever the hints
// announced.
func (w *Queues[O]) Forget(wt *Watcher) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range wt.heard {
		clear(h)
	}
	select {
	case <-wt.Wake:
	default:
	}
}

// BeforeAttempt forgets the release hints heard so far: the head's next
// attempt sees whatever they announced.
func (w *Queues[O]) BeforeAttempt(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.queues[key]; q != nil && len(q.waiters) > 0 {
		clear(q.heard)
		select {
		case <-q.waiters[0].Wake:
		default:
		}
	}
}

// Subscribe subscribes to key's release channel on every node, once per queue,
// and returns a channel closed when a quorum of nodes confirmed it (or nil
// when it already was: nothing to wait for).
func (w *Queues[O]) Subscribe(key string) <-chan struct{} {
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
func (w *Queues[O]) subscribeLocked(q *keyQueue[O]) {
	if q.subscribed {
		return
	}
	n := w.nodes.Len()
	q.subscribed = true
	q.heard, q.confirmed = make([]bool, n), make([]bool, n)
	q.ready = make(chan struct{})
	w.send(false, ChannelPrefix+q.key)
}

// hint records that node announced a release of key, and wakes the head once
// a quorum of nodes has.
func (w *Queues[O]) hint(node int, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || !q.subscribed {
		return
	}
	for _, wt := range q.watchers {
		h := wt.heard[key]
		h[node] = true
		if engine.Count(h) >= w.nodes.Quorum {
			Wake(wt.Wake)
		}
	}
	if len(q.waiters) == 0 {
		return
	}
	q.heard[node] = true
	if engine.Count(q.heard) >= w.nodes.Quorum {
		Wake(q.waiters[0].Wake)
	}
}

// Released wakes the head waiting for key at once: a Lock of this Client
// has just released it on a quorum.
func (w *Queues[O]) Released(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		return
	}
	for _, wt := range q.watchers {
		Wake(wt.Wake)
	}
	if len(q.waiters) > 0 {
		Wake(q.waiters[0].Wake)
	}
}

// confirm records a node's confirmation of a subscription.
func (w *Queues[O]) confirm(node int, channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[channel[len(ChannelPrefix):]]
	if q == nil || !q.subscribed || q.confirmed[node] {
		return
	}
	q.confirmed[node] = true
	if engine.Count(q.confirmed) == w.nodes.Quorum {
		close(q.ready)
	}
}

// PostOffer sets off as wt's standing offer, which a Release of the key
// may claim (ClaimOffer) until wt withdraws it.
func (w *Queues[O]) PostOffer(wt *Waiter[O], off *O) {
	w.mu.Lock()
	wt.offer, wt.claimed = off, nil
	w.mu.Unlock()
}

// Withdraw takes back wt's offer and, if a Release claimed it, returns the
// channel that Release closes once the offer is settled: the caller must
// wait for it.
func (w *Queues[O]) Withdraw(wt *Waiter[O]) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	claimed := wt.claimed
	wt.offer, wt.claimed = nil, nil
	return claimed
}

// ClaimOffer claims the offer of key's head waiter, if it posted one not
// claimed yet, and returns it with the channel to close once it is settled;
// it reports whether this Client subscribes to the key's release channel
// and whether it may hand over although other clients wait.
func (w *Queues[O]) ClaimOffer(key string) (off *O, settled chan<- struct{}, subscribed, streak bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil || len(q.waiters) == 0 {
		return nil, nil, false, false
	}
	head := q.waiters[0]
	if head.offer == nil || head.claimed != nil {
		return nil, nil, false, false
	}
	head.claimed = make(chan struct{})
	// An AcquireAll of this Client watching the key counts as another
	// client waiting: the key is handed over only within a streak, then
	// announced to all.
	return head.offer, head.claimed, q.subscribed && len(q.watchers) == 0, q.streak < maxStreak
}

// HandedOver counts a handover of key made while other clients waited
// (inStreak), or ends the streak.
func (w *Queues[O]) HandedOver(key string, inStreak bool) {
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
func (w *Queues[O]) send(unsubscribe bool, channels ...string) {
	if w.subs == nil {
		w.subs = make([]*engine.Subscriber, w.nodes.Len())
		for i := range w.subs {
			w.subs[i] = w.nodes.Subscribe(i, w.timeout,
				func(ch string) {
					if strings.HasPrefix(ch, ChannelPrefix) {
						w.confirm(i, ch)
					}
				},
				func(ch string) {
					if strings.HasPrefix(ch, ChannelPrefix) {
						w.hint(i, ch[len(ChannelPrefix):])
					}
				})
		}
	}
	for _, s := range w.subs {
		s.Change(unsubscribe, channels...)
	}
}

// Wake signals sig, if there is one, without waiting.
func Wake(sig chan struct{}) {
	if sig != nil {
		select {
		case sig <- struct{}{}:
		default:
		}
	}
}
