package redlock

import (
	"errors"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/logs"
)

// Hooks let a service see what the library does, for metrics and tracing,
// without the library depending on any metrics or tracing package (the
// otel module adapts them to OpenTelemetry). Every field may be nil, and
// each says which Event fields it fills. Hooks are called synchronously on
// the goroutine doing the work: they must return quickly and must not call
// back into the Client.
type Hooks struct {
	// Attempt follows each attempt of Acquire or TryAcquire: Key, Attempt,
	// Elapsed, and Err, nil when the attempt acquired the lock.
	Attempt func(Event)
	// Done follows each Acquire, TryAcquire, Extend and Release call: Op
	// ("acquire", "try-acquire", "extend" or "release"), Key, Elapsed, Err.
	Done func(Event)
	// NodeError follows each node reply that is not a confirmation: Op
	// ("acquire", "commit", "extend", "restore", "delete", "handover" or
	// "announce", a waiting call's entry in the key's waiting room), Key,
	// Node, Addr, and Err: ErrHeldByOther, ErrWriterWaiting, ErrKeyAbsent,
	// ErrRestartGuard, the client's error, or ErrNoReply when the node did
	// not reply in time, so that the outcome is unknown.
	NodeError func(Event)
	// Rollback follows the launch of a failed attempt's deletes: Key, and
	// Nodes, where the attempt may have written.
	Rollback func(Event)
	// CleanupRetry follows each delete parked to be tried again: Key, Node,
	// Addr, Attempt (the try that failed, 1 for the first) and Wait.
	CleanupRetry func(Event)
	// CleanupAbandoned follows each delete that Close gave up because its
	// node had not confirmed it (the key stays there until its TTL ends):
	// Key, Node, Addr, Attempt (the tries sent) and Err, the node's silence
	// (ErrNoReply, with its latest error).
	CleanupAbandoned func(Event)
	// Renewal follows each renewal of a lock kept alive by KeepAlive: Key,
	// Elapsed, and Err, nil when the renewal succeeded.
	Renewal func(Event)
	// LockLost follows a kept-alive lock that can no longer be proven held:
	// Key, and Err, which matches ErrLockLost.
	LockLost func(Event)
}

// Event is what a hook is told: each field of Hooks says which fields it
// fills, and the others are zero. No event holds a token or a value.
type Event struct {
	Op      string        // the call, or the node's operation
	Key     string        // the lock's key, in every event
	Node    int           // the node's index in the slice given to New
	Addr    string        // the node's address, when its client exposes one
	Attempt int           // 1 for the first attempt, or try of a delete
	Nodes   int           // how many nodes a rollback deletes on
	Elapsed time.Duration // since the attempt, call or renewal began
	Wait    time.Duration // until the delete is tried again
	Err     error         // why it failed; nil when it did not
}

// WithHooks sets the hooks called as the Client works (see Hooks).
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}

// WithLogger makes the Client log what it does to l: attempts, calls and
// node errors at Debug, rollbacks at Debug, cleanup retries at Info, lost
// locks and deletes given up by Close at Warn. Nothing is logged without it, and no log line holds a
// token or a value. A nil l is refused: leave the option out for no log.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		c.logger = l
		if l == nil && c.bad == nil {
			c.bad = invalid("WithLogger: nil logger; leave the option out for none")
		}
	})
}

// observer calls the hooks and the logger (internal/logs); with neither,
// each call is a nil check.
type observer struct {
	h   Hooks
	log *logs.Log
	on  bool // any hook or a logger is set
}

func newObserver(h Hooks, log *slog.Logger) observer {
	on := log != nil || h.Attempt != nil || h.Done != nil || h.NodeError != nil || h.Rollback != nil ||
		h.CleanupRetry != nil || h.CleanupAbandoned != nil || h.Renewal != nil || h.LockLost != nil
	return observer{h: h, log: logs.New(log), on: on}
}

func (o *observer) attempt(key string, n int, start time.Time, err error) {
	elapsed := time.Since(start)
	if o.h.Attempt != nil {
		o.h.Attempt(Event{Key: key, Attempt: n, Elapsed: elapsed, Err: err})
	}
	o.log.Attempt(key, n, elapsed, err)
}

func (o *observer) done(op, key string, start time.Time, err error) {
	elapsed := time.Since(start)
	if o.h.Done != nil {
		o.h.Done(Event{Op: op, Key: key, Elapsed: elapsed, Err: err})
	}
	o.log.Done(op, key, elapsed, err)
}

func (o *observer) nodeError(op, key string, node int, addr string, err error) {
	if o.h.NodeError != nil {
		o.h.NodeError(Event{Op: op, Key: key, Node: node, Addr: addr, Err: err})
	}
	o.log.NodeError(op, key, node, addr, errors.Is(err, ErrNoReply), err)
}

func (o *observer) rollback(key string, nodes int) {
	if o.h.Rollback != nil {
		o.h.Rollback(Event{Key: key, Nodes: nodes})
	}
	o.log.Rollback(key, nodes)
}

func (o *observer) cleanupRetry(key string, node int, addr string, try int, wait time.Duration) {
	if o.h.CleanupRetry != nil {
		o.h.CleanupRetry(Event{Key: key, Node: node, Addr: addr, Attempt: try, Wait: wait})
	}
	o.log.CleanupRetry(key, node, addr, try, wait)
}

func (o *observer) cleanupAbandoned(key string, node int, addr string, tries int, err error) {
	if o.h.CleanupAbandoned != nil {
		o.h.CleanupAbandoned(Event{Key: key, Node: node, Addr: addr, Attempt: tries, Err: err})
	}
	o.log.CleanupAbandoned(key, node, addr, tries, err)
}

func (o *observer) renewal(key string, start time.Time, err error) {
	elapsed := time.Since(start)
	if o.h.Renewal != nil {
		o.h.Renewal(Event{Key: key, Elapsed: elapsed, Err: err})
	}
	o.log.Renewal(key, elapsed, err)
}

func (o *observer) lost(key string, cause error) {
	if o.h.LockLost != nil {
		o.h.LockLost(Event{Key: key, Err: cause})
	}
	o.log.Lost(key, cause)
}
