package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The errors a node's reply carries when the engine, not the script, says
// what happened. The public package re-exports the first four under the
// same names; their meaning is documented there.
var (
	ErrNoReply         = errors.New("redlock: no reply within node timeout")
	ErrNotAwaited      = errors.New("redlock: reply not awaited")
	ErrClosed          = errors.New("redlock: client closed")
	ErrInvalidArgument = errors.New("redlock: invalid argument")

	// ErrNotNeeded marks a node whose reply was still on its way when the
	// outcome was already decided.
	ErrNotNeeded = fmt.Errorf("%w, the outcome was decided without it", ErrNotAwaited)
	// errNotSent marks a write dropped because its round was over before the
	// node was free (a stalled node still held an earlier call of the lock).
	errNotSent = fmt.Errorf("%w: not sent, node busy with an earlier call", ErrNoReply)
	// errNoClock marks a write not sent because its node's clock is not
	// known yet (its first contact is under way): its deadline could not
	// be carried to the node. It is no sign of a node down, as a reply
	// whose server is still being identified is not (ErrNotAwaited): a
	// node whose clock read failed gets that failure instead.
	errNoClock = fmt.Errorf("%w: not sent, the node's clock is not known yet (%w)", ErrNoReply, ErrNotAwaited)
	// errSuperseded marks a delete not sent because a later delete of the
	// same lock, which covers it, was queued behind it on the node.
	errSuperseded = fmt.Errorf("%w: delete superseded by a later one", ErrNoReply)
	// ErrUnidentified marks a confirmation that did not count: the node's
	// server was not identified yet, and might be another node's too.
	ErrUnidentified = errors.New("the node answered, but its server is not identified yet: its reply does not count")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// IsContextErr reports whether err is a context's end, which a node's
// client reports when our per-node deadline passed: that is the node's
// timeout, not the caller's context.
func IsContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// pastDeadline reports whether ctx's deadline has passed, whether or not ctx
// has noticed yet. A round's context notices its deadline when the Client's
// deadline scheduler fires, which on a loaded machine can be well after a
// batch's own context (context.WithDeadline, on its own timer, with the
// same deadline or a later one) has made go-redis give up with
// context.DeadlineExceeded: that reply is late all the same, an unknown
// outcome at the node's deadline, not the caller's context ending.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Observer is told what the engine does on the nodes, for hooks and logs.
// ctx is the context the round was sent with (SendAndCount's, Launch's),
// for its values: it may have ended long before, as the call returned.
type Observer interface {
	// NodeError: a call of op on node (at addr) did not confirm.
	NodeError(ctx context.Context, op *Op, node int, addr string, err error)
	// CleanupRetry: a delete got no definite answer and is tried again
	// after wait.
	CleanupRetry(ctx context.Context, key string, node int, addr string, try int, wait time.Duration)
}
