package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors returned by Client and Lock. Every error this package returns for a
// failed lock operation matches one of them with errors.Is; the per-node detail
// is reachable with errors.As through *QuorumError and *NodeError.
var (
	// ErrNotAcquired means Acquire or TryAcquire did not get the lock: too few
	// nodes agreed, the validity left was not positive, or ctx ended first.
	ErrNotAcquired = errors.New("redlock: not acquired")
	// ErrNotHeld means a Release or Extend found that a quorum of nodes no
	// longer holds this lock's token, or that the lock had already expired
	// or been released locally.
	ErrNotHeld = errors.New("redlock: not held")
	// ErrInvalidArgument is matched by every error caused by bad input: an empty
	// key or one the library keeps its own values under (redlock:boot, a name
	// containing ":redlock:fence"), a TTL that cannot leave positive validity,
	// a nil context, a bad option or node list. Nothing is sent to any node in
	// that case.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrClosed means the Client was closed before the call. It is also
	// the cause of a KeepAlive context that Close ended.
	ErrClosed = errors.New("redlock: client closed")

	// ErrLockLost is matched by the cause of a KeepAlive context that ended
	// because the lock could no longer be proven held: so many nodes no
	// longer have our value that no quorum can confirm it, or no renewal
	// reached a quorum before Until. The cause says which, and wraps the
	// failed Extend's error when there is one. Do's error matches it when
	// the lock was lost while fn ran.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrUnavailable means so many nodes could not be asked (a refused
	// connection, no reply within the node timeout, an error reply such as
	// NOPERM or READONLY) that those which answered cannot make a quorum:
	// the lock's state is unknown, which a busy lock never is. The error's
	// *NodeError entries name each node's cause. Acquire keeps trying while
	// the nodes are unavailable for at most the unavailability bound
	// (WithUnavailableTimeout), then returns an error matching both
	// ErrNotAcquired and ErrUnavailable, even when ctx has no deadline.
	ErrUnavailable = errors.New("redlock: a quorum of nodes could not be asked")
	// ErrReleased is the cause of a KeepAlive context that ended because
	// Release was called on its lock.
	ErrReleased = errors.New("redlock: lock released")
)

// Per-node causes, found in NodeError.Err.
var (
	// ErrHeldByOther means the node holds the key under another token.
	ErrHeldByOther = errors.New("redlock: key held by another token")
	// ErrKeyAbsent means the node does not hold the key at all: it expired,
	// was never written there, or the node lost it in a restart.
	ErrKeyAbsent = errors.New("redlock: key absent on node")
	// ErrRestartGuard means the node lost its data, restarted or failed over
	// less than the restart guard ago (WithRestartGuard) and does not count
	// toward an acquire's quorum yet. Nothing was written there.
	ErrRestartGuard = errors.New("redlock: node within its restart guard")
	// ErrNoReply means the node did not answer within the per-node timeout.
	// The command may still have run there: the outcome is unknown, which is
	// why every failed acquire is rolled back on every node. A node's deadline
	// is never reported as context.DeadlineExceeded: that error in a returned
	// error's chain means the caller's own context ended.
	ErrNoReply = errors.New("redlock: no reply within node timeout")

	// ErrNotAwaited means the node's reply was not waited for: it was
	// still on its way when the outcome was decided without it, or when
	// the call ended. What the node did is unknown, as with ErrNoReply, but
	// it did not fail.
	ErrNotAwaited = errors.New("redlock: reply not awaited")

	// errNotNeeded marks a node whose reply was still on its way when the
	// outcome was already decided.
	errNotNeeded = fmt.Errorf("%w, the outcome was decided without it", ErrNotAwaited)
	// errCallEnded marks a node whose reply was still on its way when the
	// caller's context ended or the Client was closed.
	errCallEnded = fmt.Errorf("%w, the call ended first", ErrNotAwaited)
	// errNotSent marks a write dropped because its round was over before the
	// node was free (a stalled node still held an earlier call of the lock).
	errNotSent = fmt.Errorf("%w: not sent, node busy with an earlier call", ErrNoReply)
	// errSuperseded marks a delete not sent because a later delete of the
	// same lock, which covers it, was queued behind it on the node.
	errSuperseded = fmt.Errorf("%w: delete superseded by a later one", ErrNoReply)
	// errUnidentified marks a confirmation that did not count: the node's
	// server was not identified yet, and might be another node's too.
	errUnidentified = errors.New("the node answered, but its server is not identified yet: its reply does not count")
	// errLaterAttempt marks a rollback that found a later attempt's value of
	// the same lock, which it must not delete.
	errLaterAttempt = errors.New("stale call: the key holds a later write of the same lock, or its delete came first")
)

// NodeError is the outcome of one operation on one node that did not confirm
// it. Err is ErrHeldByOther, ErrKeyAbsent, ErrRestartGuard, ErrNoReply,
// ErrNotAwaited, or the error the node's client returned (a refused
// connection, NOPERM, READONLY).
type NodeError struct {
	Node int    // index of the node in the slice given to New
	Addr string // the node's address, when its client exposes one
	Err  error
}

// Error implements error.
func (e *NodeError) Error() string {
	// The package prefix is said once, by the error around the node's.
	cause := strings.TrimPrefix(fmt.Sprint(e.Err), "redlock: ")
	if e.Addr != "" {
		return fmt.Sprintf("node %d (%s): %s", e.Node, e.Addr, cause)
	}
	return fmt.Sprintf("node %d: %s", e.Node, cause)
}

// Unwrap returns the node's cause.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports a lock operation that did not get a quorum of
// confirmations. It matches its sentinel (ErrNotAcquired or ErrNotHeld), the
// context's error when ctx ended first, ErrUnavailable when so many nodes
// failed that no quorum could be asked, and each per-node NodeError.
type QuorumError struct {
	Op     string       // "acquire", "extend", "release" or "ttl"
	Key    string       // the lock's key
	OK     int          // nodes that confirmed
	Quorum int          // confirmations needed
	Nodes  []*NodeError // the nodes that did not confirm, in node order
	// Elapsed is how long the operation took when it failed for want of
	// validity, 0 otherwise.
	Elapsed time.Duration

	sentinel error
	cause    error // ctx.Err(), ErrClosed, or nil
	// unavailable is set when the nodes that failed (not those not
	// awaited) leave too few to make a quorum: the error matches
	// ErrUnavailable.
	unavailable bool
	// holderTTL is the longest remaining TTL a refusing node reported for
	// the other holder's key, -1 when none did: how long a waiter sleeps at
	// most before its next attempt.
	holderTTL time.Duration
}

// Error implements error.
func (e *QuorumError) Error() string {
	var b strings.Builder
	if e.Op == "acquire" { // the sentinel says it: "not acquired"
		fmt.Fprintf(&b, "%v: %q: %d of %d needed confirmed", e.sentinel, showKey(e.Key), e.OK, e.Quorum)
	} else {
		fmt.Fprintf(&b, "%v: %s of %q: %d of %d needed confirmed", e.sentinel, e.Op, showKey(e.Key), e.OK, e.Quorum)
	}
	if e.unavailable {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(ErrUnavailable.Error(), "redlock: "))
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	if e.Elapsed > 0 {
		fmt.Fprintf(&b, ": no validity left after %v", e.Elapsed)
	}
	for _, n := range e.Nodes {
		b.WriteString("; ")
		b.WriteString(n.Error())
	}
	return b.String()
}

// Unwrap exposes the sentinel, the cause and the node errors to errors.Is and
// errors.As.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, 0, len(e.Nodes)+3)
	errs = append(errs, e.sentinel)
	if e.unavailable {
		errs = append(errs, ErrUnavailable)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	for _, n := range e.Nodes {
		errs = append(errs, n)
	}
	return errs
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// maxShownKey is the longest key an error message shows whole: a key is
// user input of any length, and a message is read by people and logs.
const maxShownKey = 128

// showKey returns key as error messages show it: whole when short, else its
// start and its length.
func showKey(key string) string {
	if len(key) <= maxShownKey {
		return key
	}
	cut := maxShownKey - 32
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return fmt.Sprintf("%s…(%d bytes)", key[:cut], len(key))
}

// isContextErr reports whether err is a context's end, which a node's
// client reports when our per-node deadline passed: that is the node's
// timeout, not the caller's context.
func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}
