package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/leadership"
)

func init() {
	leadership.Lock = func(ld any) any { return ld.(*Leadership).l }
}

// Election is a campaign for the leadership of one key through a Client:
// at most one leader at a time within the Redlock assumptions, each with a
// term, a fence that increases strictly from leader to leader, for storage
// to refuse a deposed leader's writes (docs/election.md). Make one with
// Client.Election; it is safe for concurrent use, and each Campaign or Run
// campaigns on its own.
type Election struct {
	c   *Client
	key string
	ttl time.Duration
}

// Election returns the campaign for key's leadership, each leadership held
// for ttl and renewed in the background. It sends nothing. It fails with
// ErrInvalidArgument when key is empty or reserved, or ttl out of range.
func (c *Client) Election(key string, ttl time.Duration) (*Election, error) {
	if key == "" {
		return nil, invalid("election: empty key")
	}
	if what := reservedKey(key); what != "" {
		return nil, invalid("election: key %q is reserved: %s", showKey(key), what)
	}
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, err
	}
	return &Election{c: c, key: key, ttl: ttl}, nil
}

// Leadership is one term of leadership, from a Campaign that returned it
// until its Context ends.
type Leadership struct {
	l   *Lock
	ctx context.Context
}

// Campaign waits until the caller leads, or ctx ends, and returns its
// leadership, renewed in the background until Resign or its loss. value is
// what operators see of the leader: its holder metadata (WithMetadata's
// rules; Inspect and redlock status show it). Campaign goes on through
// refusals and unavailable nodes; it fails when ctx ends (an error
// matching ErrNotAcquired and ctx.Err()), when the Client closes
// (ErrClosed), or with ErrInvalidArgument for a bad value.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	opts := []AcquireOption{WithMetadata(value), acquireOptionFunc(func(c *acquireConfig) { c.fenced = true })}
	for failed := 1; ; failed++ {
		l, err := e.c.Acquire(ctx, e.key, e.ttl, opts...)
		if err == nil {
			return &Leadership{l: l, ctx: l.KeepAlive(context.Background())}, nil
		}
		if ctx == nil || ctx.Err() != nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) {
			return nil, err
		}
		// The Client's RetryStrategy or its unavailability bound gave up:
		// a campaign does not, but it pauses before it asks again.
		wait, ok := e.c.cfg.retry.Backoff(failed)
		if !ok {
			wait = e.ttl / 3
		}
		timer := time.NewTimer(min(wait, e.ttl/3))
		werr := e.c.waitFor(ctx, nil, timer.C)
		timer.Stop()
		if werr != nil {
			return nil, fmt.Errorf("%w: %q: campaigning: %w", ErrNotAcquired, showKey(e.key), errors.Join(err, werr))
		}
	}
}

// Run campaigns, calls lead while it leads, and campaigns again when its
// leadership is lost, until ctx ends; it resigns whenever lead returns.
// lead's context ends when the leadership can no longer be proven (a cause
// matching ErrLockLost), before the leadership's validity does, or when ctx
// ends. lead returning nil after its context ended means "lead again when
// elected"; returning nil while it still leads ends Run with nil (the work
// is done); an error ends Run with that error. Run returns nil when ctx
// ends, and the campaign's error when the Client closes or value is
// invalid. This is client-go's RunOrDie without callbacks: lead is
// OnStartedLeading, its return OnStoppedLeading.
func (e *Election) Run(ctx context.Context, value string, lead func(ctx context.Context, l *Leadership) error) error {
	if lead == nil {
		return invalid("election on %q: nil function", showKey(e.key))
	}
	if ctx == nil {
		return invalid("election on %q: nil context", showKey(e.key))
	}
	for {
		ld, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lctx, stop := context.WithCancelCause(ld.ctx)
		stopWithCtx := context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
		leadErr := lead(lctx, ld)
		stopWithCtx()
		lost := ld.ctx.Err() != nil
		stop(nil)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.cleanupTimeout)
		_ = ld.Resign(rctx) // a lost leadership's values expire; a failed Resign's too
		cancel()
		switch {
		case leadErr != nil:
			return leadErr
		case ctx.Err() != nil:
			return nil
		case !lost:
			return nil // lead returned while it led: the work is done
		}
	}
}

// Context returns the leadership's context: it ends when the leadership
// is resigned (cause ErrReleased), its Client closes (ErrClosed), or it can
// no longer be proven (a cause matching ErrLockLost), never later than its
// validity. Its end is a signal, not a barrier: a leader paused past its
// TTL runs on without seeing it, which is what Term is for.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Term is the leadership's fence: higher than every earlier leader's term
// on this key, across Clients and processes, and through the loss of a
// minority's data (docs/fencing.md). Give it with each write to storage
// that keeps the highest term it has seen and refuses lower ones.
func (ld *Leadership) Term() uint64 { return ld.l.Fence() }

// Value is the value the leadership campaigned with.
func (ld *Leadership) Value() string { return ld.l.Metadata() }

// Until is when the leadership's validity ends unless it is renewed.
func (ld *Leadership) Until() time.Time { return ld.l.Until() }

// Resign ends the leadership: its Context ends with ErrReleased and its key
// is released on the nodes, so that the next campaigner is woken at once.
// It runs even when ctx has ended, within the Client's cleanup timeout.
func (ld *Leadership) Resign(ctx context.Context) error { return ld.l.Release(ctx) }
