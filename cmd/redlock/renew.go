package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
)

// keepAlive renews l with the library's KeepAlive until ctx ends, and returns
// a context that ends, with a cause matching redlock.ErrLockLost, when
// KeepAlive's does (a renewal found that no quorum can hold our value any
// more, or Until came near without one), or earlier: once less than ttl/3 of
// validity is left without a renewal having reached a quorum. KeepAlive
// itself waits until just before Until; ending a third of the TTL earlier
// gives the command that time to stop before anyone else can take the lock
// (with the defaults, --ttl 30s and --grace 10s, all of it).
func keepAlive(ctx context.Context, l *redlock.Lock, ttl time.Duration) context.Context {
	out, cancel := context.WithCancelCause(l.KeepAlive(ctx))
	margin := ttl / 3
	go func() {
		for {
			until := l.Until()
			timer := time.NewTimer(time.Until(until) - margin)
			select {
			case <-out.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			if l.Until().Equal(until) { // no renewal since: KeepAlive is still retrying
				cancel(fmt.Errorf("%w: %q not renewed while %v of validity was left (until %s)",
					redlock.ErrLockLost, l.Key(), margin, until.Format(time.RFC3339Nano)))
				return
			}
		}
	}()
	return out
}
