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
// more, or Until came near without one), or earlier: once no more than
// before of validity is left without a renewal having reached a quorum.
// KeepAlive itself waits until just before Until; run ends before by the
// grace it gives the command between SIGTERM and SIGKILL, and the margin
// its SIGKILL needs, so that both fit before Until.
func keepAlive(ctx context.Context, l *redlock.Lock, before time.Duration) context.Context {
	return endBefore(l.KeepAlive(ctx), l.Until, before, quoteKeys(l.Keys()))
}

// endBefore returns a context that ends when renewed does (a KeepAlive's,
// or a leadership's Context, which ends just before its Until), or, with a
// cause matching redlock.ErrLockLost, once no more than before of the
// validity that until reads is left without a renewal having moved it: the
// grace and kill margin of the command's stop must fit in what is left.
// what names the lock in that cause.
func endBefore(renewed context.Context, until func() time.Time, before time.Duration, what string) context.Context {
	out, cancel := context.WithCancelCause(renewed)
	go func() {
		for {
			valid := until()
			timer := time.NewTimer(time.Until(valid) - before)
			select {
			case <-out.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
			if until().Equal(valid) { // no renewal since: KeepAlive is still retrying
				cancel(fmt.Errorf("%w: %s not renewed while %v of validity was left", redlock.ErrLockLost, what, before))
				return
			}
		}
	}()
	return out
}

// timingFloor is the least of run's per-node deadline and of its kill
// margin: below it a call to a node or a signal and a timer on a loaded
// machine cannot be counted on.
const timingFloor = 10 * time.Millisecond

// minTTL is the shortest --ttl run accepts: the TTL at which the per-node
// deadline (ttl/20) and the kill margin (ttl/10) reach their floor. Below
// it the floors take an ever larger share of the TTL (at 10 ms the kill
// margin is the whole of it: the command is killed as soon as it starts),
// and renewals every ttl/5 or so must each land within 10 ms.
const minTTL = 20 * timingFloor

// killMarginFor is how long before Until run sends SIGKILL: a tenth of the
// TTL, 10 to 250 ms, for the signal to be delivered and the processes to
// die, and for a thread that wakes late on a loaded machine. Not for one
// that the kernel does not run for a second: on a busy machine only the
// real-time priority of the killer's thread (killAt) keeps it on time.
func killMarginFor(ttl time.Duration) time.Duration {
	return min(max(ttl/10, timingFloor), 250*time.Millisecond)
}

// termLeadFor is how much validity run leaves when it gives up on renewal
// and sends SIGTERM: the grace and the margin of the SIGKILL that follows,
// so that both fit before Until, but no more than two thirds of the TTL. A
// grace close to the TTL would otherwise end the lock at once, before its
// first renewal could land; SIGKILL still comes a margin before Until.
func termLeadFor(ttl, grace time.Duration) time.Duration {
	return min(grace+killMarginFor(ttl), ttl*2/3)
}

// renewIntervalFor renews every third of the TTL, or more often when the
// lead leaves less than two thirds of it: a renewal that fails is then
// still retried twice before SIGTERM is due.
func renewIntervalFor(ttl, lead time.Duration) time.Duration {
	return max(min(ttl/3, (ttl-lead)/3), time.Millisecond)
}
