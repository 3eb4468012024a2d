package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Hooks let a service see what the library does, for metrics and tracing,
// without the library depending on any metrics or tracing package (the
// otel module adapts them to OpenTelemetry). Every field may be nil. Hooks
// are called synchronously on the goroutine doing the work: they must
// return quickly and must not call back into the Client. No hook sees a
// token or a value.
type Hooks struct {
	// Attempt follows each attempt of Acquire or TryAcquire.
	Attempt func(AttemptInfo)
	// Done follows each Acquire, TryAcquire, Extend and Release call.
	Done func(OpInfo)
	// NodeError follows each node reply that is not a confirmation: a
	// refusal, an error, or no reply in time.
	NodeError func(NodeInfo)
	// Rollback follows the launch of a failed attempt's deletes.
	Rollback func(RollbackInfo)
	// CleanupRetry follows each delete parked to be tried again.
	CleanupRetry func(CleanupInfo)
	// Renewal follows each renewal of a lock kept alive by KeepAlive.
	Renewal func(RenewalInfo)
	// LockLost follows a kept-alive lock that can no longer be proven held.
	LockLost func(LostInfo)
}

// AttemptInfo describes one attempt of Acquire or TryAcquire.
type AttemptInfo struct {
	Key      string
	Attempt  int // 1 for the first
	Elapsed  time.Duration
	Acquired bool
	Err      error // why it failed; nil when Acquired
}

// OpInfo describes one public call.
type OpInfo struct {
	Op      string // "acquire", "try-acquire", "extend" or "release"
	Key     string
	Elapsed time.Duration
	Err     error
}

// NodeInfo describes one node's reply that was not a confirmation.
type NodeInfo struct {
	Op      string // "acquire", "commit", "extend", "restore", "delete" or "handover"
	Key     string
	Node    int
	Addr    string
	Err     error // ErrHeldByOther, ErrKeyAbsent, ErrRestartGuard, ErrNoReply, or the client's error
	Timeout bool  // no reply in time: the outcome is unknown
}

// RollbackInfo describes the deletes launched after a failed attempt.
type RollbackInfo struct {
	Key   string
	Nodes int // the nodes where the attempt may have written
}

// CleanupInfo describes a delete that had no definite answer and will be
// tried again.
type CleanupInfo struct {
	Key  string
	Node int
	Addr string
	Try  int // the try that failed, 1 for the first
	Wait time.Duration
}

// RenewalInfo describes one renewal of a kept-alive lock.
type RenewalInfo struct {
	Key     string
	Elapsed time.Duration
	Err     error // nil when the renewal succeeded
}

// LostInfo describes a kept-alive lock that can no longer be proven held.
type LostInfo struct {
	Key   string
	Cause error // matches ErrLockLost
}

// WithHooks sets the hooks called as the Client works (see Hooks).
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}

// WithLogger makes the Client log what it does to l: attempts, calls and
// node errors at Debug, rollbacks at Debug, cleanup retries at Info, lost
// locks at Warn. Nothing is logged without it, and no log line holds a
// token or a value. A nil l is refused: leave the option out for no log.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		c.logger = l
		if l == nil && c.bad == nil {
			c.bad = invalid("WithLogger: nil logger; leave the option out for none")
		}
	})
}

// observer calls the hooks and the logger; with neither, each call is a nil
// check.
type observer struct {
	h   Hooks
	log *slog.Logger
	on  bool // any hook or a logger is set
}

func newObserver(h Hooks, log *slog.Logger) observer {
	on := log != nil || h.Attempt != nil || h.Done != nil || h.NodeError != nil || h.Rollback != nil ||
		h.CleanupRetry != nil || h.Renewal != nil || h.LockLost != nil
	return observer{h: h, log: log, on: on}
}

func (o *observer) attempt(key string, n int, start time.Time, err error) {
	if o.h.Attempt != nil {
		o.h.Attempt(AttemptInfo{Key: key, Attempt: n, Elapsed: time.Since(start), Acquired: err == nil, Err: err})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelDebug, "redlock: attempt",
			slog.String("key", key), slog.Int("attempt", n), slog.Duration("elapsed", time.Since(start)),
			slog.Bool("acquired", err == nil), errAttr(err))
	}
}

func (o *observer) done(op, key string, start time.Time, err error) {
	if o.h.Done != nil {
		o.h.Done(OpInfo{Op: op, Key: key, Elapsed: time.Since(start), Err: err})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelDebug, "redlock: "+op,
			slog.String("key", key), slog.Duration("elapsed", time.Since(start)), errAttr(err))
	}
}

func (o *observer) nodeError(op, key string, node int, addr string, err error) {
	timeout := errors.Is(err, ErrNoReply)
	if o.h.NodeError != nil {
		o.h.NodeError(NodeInfo{Op: op, Key: key, Node: node, Addr: addr, Err: err, Timeout: timeout})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelDebug, "redlock: node did not confirm",
			slog.String("op", op), slog.String("key", key), slog.Int("node", node), slog.String("addr", addr),
			slog.Bool("timeout", timeout), errAttr(err))
	}
}

func (o *observer) rollback(key string, nodes int) {
	if o.h.Rollback != nil {
		o.h.Rollback(RollbackInfo{Key: key, Nodes: nodes})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelDebug, "redlock: rollback",
			slog.String("key", key), slog.Int("nodes", nodes))
	}
}

func (o *observer) cleanupRetry(key string, node int, addr string, try int, wait time.Duration) {
	if o.h.CleanupRetry != nil {
		o.h.CleanupRetry(CleanupInfo{Key: key, Node: node, Addr: addr, Try: try, Wait: wait})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelInfo, "redlock: delete to be tried again",
			slog.String("key", key), slog.Int("node", node), slog.String("addr", addr),
			slog.Int("try", try), slog.Duration("wait", wait))
	}
}

func (o *observer) renewal(key string, start time.Time, err error) {
	if o.h.Renewal != nil {
		o.h.Renewal(RenewalInfo{Key: key, Elapsed: time.Since(start), Err: err})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelDebug, "redlock: renewal",
			slog.String("key", key), slog.Duration("elapsed", time.Since(start)), errAttr(err))
	}
}

func (o *observer) lost(key string, cause error) {
	if o.h.LockLost != nil {
		o.h.LockLost(LostInfo{Key: key, Cause: cause})
	}
	if o.log != nil {
		o.log.LogAttrs(context.Background(), slog.LevelWarn, "redlock: lock lost",
			slog.String("key", key), errAttr(cause))
	}
}

func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("err", err.Error())
}
