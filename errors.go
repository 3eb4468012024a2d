package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// Errors returned by Client and Lock. Every error this package returns for a
// failed lock operation matches one of them with errors.Is; the per-node detail
// is reachable with errors.As through *QuorumError and *NodeError.
var (
	// ErrNotAcquired means Acquire or TryAcquire did not get the lock: too few
	// nodes agreed, the validity left was not positive, or ctx ended first.
	ErrNotAcquired = errors.New("redlock: not acquired")
	// ErrNotHeld means the lock could not be shown held. From Extend and TTL:
	// no quorum confirmed it (nodes refused or did not answer, or ctx ended
	// first), or it had expired or been released; it is lost only when too
	// few nodes hold its value, which KeepAlive reports as ErrLockLost. From
	// Release: the lock was held no longer, because too few nodes held its
	// value or it had expired or been found lost before Release began.
	ErrNotHeld = script.ErrNotHeld
	// ErrReleaseUnconfirmed means no quorum confirmed a Release's deletes in
	// time because nodes did not answer (or answered with errors), while too
	// few refused to prove the lock not held: the key may still be held on
	// some nodes until it expires, and the deletes go on in the background
	// until then. It matches ErrUnavailable too when so many nodes failed
	// that no quorum could be asked.
	ErrReleaseUnconfirmed = errors.New("redlock: release not confirmed")
	// ErrInvalidArgument is matched by every error caused by bad input: an empty
	// or reserved key (redlock:boot, a name containing ":redlock:fence",
	// ":redlock:wait" or ":redlock:tomb"), a TTL
	// over MaxTTL or leaving no validity, a nil context, a bad option or node
	// list, refused before anything is sent. Three cases are found by the nodes:
	// a key held by another kind of lock than the one asked for (permits
	// against an exclusive or shared lock, or of another count), refused by
	// each node without a change and never waited for, and two nodes that are
	// one server or a node that is a replica (ErrReplica), which make every
	// operation fail with it.
	ErrInvalidArgument = engine.ErrInvalidArgument
	// ErrClosed means the Client was closed before the call. It is also
	// the cause of a KeepAlive context that Close ended.
	ErrClosed = engine.ErrClosed
	// ErrCleanupAbandoned is matched by Close's error when Close gave up
	// deletes (a failed attempt's rollback, a Release's delete to a node
	// it did not wait for) that nodes had not confirmed within its bound:
	// those nodes keep the key until its TTL ends. A *NodeError names each
	// node.
	ErrCleanupAbandoned = errors.New("redlock: deletes given up by Close")

	// ErrLockLost is matched by the cause of a KeepAlive context, and by Do's
	// error, when the lock could no longer be proven held: so many nodes lost its
	// value that no quorum can confirm it, or no renewal reached a quorum before
	// Until. The cause says which.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrUnavailable means so many nodes could not be asked (a refused
	// connection, no reply in time, an error reply such as NOPERM) that those
	// which answered cannot make a quorum: the lock's state is unknown, which a
	// busy lock's never is. Acquire returns it, with ErrNotAcquired, once
	// WithUnavailableTimeout has passed.
	ErrUnavailable = errors.New("redlock: a quorum of nodes could not be asked")
	// ErrReleased is the cause of a KeepAlive context that ended because
	// Release was called on its lock.
	ErrReleased = errors.New("redlock: lock released")
	// ErrNoLeader means Election.Leader found no elected leader that a
	// quorum of nodes holds: none leads, or one is being elected, or the
	// one that led has just lost its leadership.
	ErrNoLeader = errors.New("redlock: no leader")

	// The per-node causes, found in NodeError.Err.

	// ErrHeldByOther means the node holds the key under another token.
	ErrHeldByOther = script.ErrHeldByOther
	// ErrWriterWaiting means the node refused a shared Lock because an
	// exclusive Lock waits for the key there: new shared Locks wait behind
	// it (docs/shared.md). Nobody need hold the key exclusively.
	ErrWriterWaiting = script.ErrWriterWaiting
	// ErrKeyAbsent means the node does not hold the key at all: it expired,
	// was never written there, or the node lost it in a restart.
	ErrKeyAbsent = script.ErrKeyAbsent
	// ErrMaxShared means the node holds the key for MaxShared shared Locks,
	// the most it takes: a shared Acquire waits for one to leave, as for a
	// held key. It matches ErrHeldByOther too.
	ErrMaxShared = script.ErrMaxShared
	// ErrRestartGuard means the node lost its data, restarted or failed over
	// less than the restart guard ago (WithRestartGuard) and does not count
	// toward an acquire's quorum yet. Nothing was written there.
	ErrRestartGuard = script.ErrRestartGuard
	// ErrNoReply means the node gave no definite answer in time: no reply
	// within the per-node timeout (shown as the node's latest error, such as
	// a refused connection, when it had one), or a call not sent because an
	// earlier call of the lock still held the node. What the node holds is
	// unknown, so a failed acquire is rolled back there too. A node's deadline
	// is never reported as context.DeadlineExceeded.
	ErrNoReply = engine.ErrNoReply
	// ErrLate means the node refused a write that reached it past its
	// deadline, by the node's own clock: it changed nothing. Every write
	// carries the moment after which it must change nothing, so that a copy
	// held up in the network or in a stopped node's socket cannot land
	// after the Lock's delete (docs/late-writes.md).
	ErrLate = engine.ErrLate

	// ErrAuth means the node refused the credentials of its client (NOAUTH:
	// none given to a server that wants one; WRONGPASS: a wrong user name
	// or password, or a disabled user). ErrNoPermission means the node's
	// ACL refused a command or a key of ours (NOPERM, or a script's
	// command refused). Both are errors of configuration, never matched
	// together with ErrNoReply: Warm returns them, and an Acquire (or a
	// Campaign) that so many nodes refuse that the others cannot make a
	// quorum fails at once with them instead of trying until its context
	// ends. An ACL without INFO, ROLE, PING or SCRIPT is no failure
	// (docs/operations.md, least-privilege ACL).
	ErrAuth         = engine.ErrAuth
	ErrNoPermission = engine.ErrNoPermission
	// ErrReplica is matched, with ErrInvalidArgument, by every operation's
	// error while a node's server says (ROLE) it is a replica: a replica
	// refuses writes, or loses them at its next resync, and beside its own
	// master it would vote twice for one server. The message names the
	// node and its master, and the other node that is that master when
	// one is. Like two nodes of one server, it is found at first contact
	// (Warm, or the first operation), and the node is asked again: a
	// replica promoted to master since is taken.
	ErrReplica = engine.ErrReplica

	// ErrNotAwaited means the node's reply was not waited for: it was
	// still on its way when the outcome was decided without it, or when
	// the call ended. What the node did is unknown, as with ErrNoReply, but
	// it did not fail.
	ErrNotAwaited = engine.ErrNotAwaited

	// errCallEnded marks a node whose reply was still on its way when the
	// caller's context ended or the Client was closed.
	errCallEnded = fmt.Errorf("%w, the call ended first", ErrNotAwaited)
)

// NodeError is the outcome of one operation on one node that did not confirm
// it. Err matches ErrHeldByOther (and ErrMaxShared), ErrWriterWaiting,
// ErrKeyAbsent, ErrRestartGuard, ErrNoReply, ErrNotAwaited, ErrNotHeld (a
// fence commit refused), ErrAuth or ErrNoPermission (the server's own
// words kept), or ErrInvalidArgument (a key held by another kind
// of lock, named), or it is the node client's error (READONLY; a
// refused connection, which matches ErrNoReply too when the call's deadline
// passed first), a stale call refused, or a reply that did not count
// because the node's server is not identified yet.
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
// confirmations. It matches its sentinel (ErrNotAcquired, ErrNotHeld or
// ErrReleaseUnconfirmed), the context's error when ctx ended first,
// ErrUnavailable when so many nodes failed that no quorum could be asked,
// and each per-node NodeError. Its message leaves out the nodes whose reply
// the outcome did not need (ErrNotAwaited), which Nodes keeps.
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
	if e.Op == "acquire" || e.sentinel == ErrReleaseUnconfirmed { // the sentinel names the operation
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
		if n.Err == engine.ErrNotNeeded {
			continue // the outcome did not need it: nothing to say of it here
		}
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

// abandonedError is Close's error when it gave up deletes: how many, on
// which nodes, and the context's error if it ended first.
type abandonedError struct {
	deletes int
	nodes   []*NodeError
	cause   error
}

// Error implements error.
func (e *abandonedError) Error() string {
	var b strings.Builder
	b.WriteString(ErrCleanupAbandoned.Error())
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	if e.deletes == 1 {
		b.WriteString(": 1 delete not confirmed, its key left to expire with its TTL")
	} else {
		fmt.Fprintf(&b, ": %d deletes not confirmed, their keys left to expire with their TTL", e.deletes)
	}
	for _, n := range e.nodes {
		b.WriteString("; ")
		b.WriteString(n.Error())
	}
	return b.String()
}

// Unwrap exposes ErrCleanupAbandoned, the cause and the node errors.
func (e *abandonedError) Unwrap() []error {
	errs := []error{ErrCleanupAbandoned}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	for _, n := range e.nodes {
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
