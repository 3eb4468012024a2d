package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
)

// errLockLost is the cause of keepAlive's context when the lock can no
// longer be shown to be held.
var errLockLost = errors.New("lock lost")

// keepAlive renews l for ttl every ttl/3 until ctx ends, and returns a
// context that ends, with a cause matching errLockLost, once the lock can no
// longer be shown to be held: an extension found that no quorum can hold our
// value any more (ErrHeldByOther or ErrKeyAbsent on too many nodes), or the
// extensions kept failing (nodes unreachable) until less than ttl/3 of
// validity was left. Declaring the loss with a third of the TTL still valid
// gives the command that time to stop before anyone else can take the lock.
// A failed extension is tried again every ttl/15.
func keepAlive(ctx context.Context, l *redlock.Lock, ttl time.Duration, logf func(string, ...any)) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	every, retry, margin := ttl/3, max(ttl/15, 10*time.Millisecond), ttl/3
	go func() {
		timer := time.NewTimer(every)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			ectx, done := context.WithTimeout(ctx, every)
			err := l.Extend(ectx, ttl)
			done()
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				logf("renewed %q until %s", l.Key(), l.Until().Format(time.RFC3339Nano))
				timer.Reset(every)
			case definitelyLost(err):
				cancel(fmt.Errorf("%w: %w", errLockLost, err))
				return
			case time.Until(l.Until()) < margin:
				cancel(fmt.Errorf("%w: renewal kept failing, validity ends at %s: %w", errLockLost, l.Until().Format(time.RFC3339Nano), err))
				return
			default:
				logf("renewal failed, trying again in %v: %v", retry, err)
				timer.Reset(retry)
			}
		}
	}()
	return ctx
}

// definitelyLost reports a failed extension after which no quorum can hold
// our value: the nodes that answered that the key is absent or someone
// else's leave too few, or the lock had already expired or been released.
func definitelyLost(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return errors.Is(err, redlock.ErrNotHeld) && !errors.Is(err, context.DeadlineExceeded)
	}
	gone := 0
	for _, n := range qe.Nodes {
		if errors.Is(n, redlock.ErrHeldByOther) || errors.Is(n, redlock.ErrKeyAbsent) {
			gone++
		}
	}
	return qe.OK+len(qe.Nodes)-gone < qe.Quorum
}
