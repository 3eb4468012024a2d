package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// closeBound is how long a test lets Close take on a loaded machine: every
// Close here waits for nodes that answer.
const closeBound = 10 * time.Second

// closeClient closes c with closeBound and returns when it returned.
func closeClient(t *testing.T, c *redlock.Client) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeBound)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	return time.Now()
}

// isDone reports whether ch is closed already.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCloseEndsDo: Close ends the context of a running Do's fn (cause
// ErrClosed), waits for fn to return and for Do's release, and leaves the
// key on no node. A graceful shutdown must not lock other processes out of
// the keys it held for the rest of their TTL.
func TestCloseEndsDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	const ttl = 6 * time.Second // renewals every 2 s: a Close that waits for one is seen

	started := make(chan string, 1)
	fnDone := make(chan struct{})
	doDone := make(chan struct{})
	var cause, doErr error
	go func() {
		defer close(doDone)
		doErr = c.Do(t.Context(), key, ttl, func(ctx context.Context, l *redlock.Lock) error {
			defer close(fnDone)
			started <- l.Token()
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return ctx.Err()
			case <-time.After(closeBound):
				return errors.New("fn's context outlived Close")
			}
		})
	}()
	e.awaitHolders(key, <-started)
	closeClient(t, c)
	require.True(t, isDone(fnDone), "Close returned while fn still ran")
	<-doDone // returning once its release is done
	require.ErrorIs(t, cause, redlock.ErrClosed, "the cause of fn's context")
	require.NotErrorIs(t, cause, redlock.ErrLockLost, "a Close is no loss")
	require.ErrorIs(t, doErr, redlock.ErrClosed)
	require.ErrorIs(t, doErr, context.Canceled, "fn's own error is kept")
	require.NotErrorIs(t, doErr, redlock.ErrNotHeld, "Do's release failed")
	require.NotErrorIs(t, doErr, redlock.ErrLockLost)
	e.requireNoKey(key)
}

// TestCloseLeavesHeldLocksToHolders: Close ends the KeepAlive contexts of
// the Locks held (cause ErrClosed, no loss) but takes no Lock from its
// holder: the keys stay until the holders release them, and their Release
// works after Close.
func TestCloseLeavesHeldLocksToHolders(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	plain, err := c.Acquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	kept, err := c.TryAcquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	kctx := kept.KeepAlive(ctx)
	for _, l := range []*redlock.Lock{plain, kept} {
		e.awaitHolders(l.Key(), l.Token())
	}

	closeClient(t, c)
	require.True(t, isDone(kctx.Done()), "the KeepAlive context outlived Close")
	require.Equal(t, redlock.ErrClosed, context.Cause(kctx))
	for _, l := range []*redlock.Lock{plain, kept} {
		require.Equal(t, len(e.direct), e.holders(l.Key(), l.Token()), "Close took the lock from its holder")
	}
	require.ErrorIs(t, plain.Extend(ctx, time.Minute), redlock.ErrClosed)
	after := plain.KeepAlive(ctx)
	require.True(t, isDone(after.Done()))
	require.Equal(t, redlock.ErrClosed, context.Cause(after))

	for _, l := range []*redlock.Lock{plain, kept} {
		require.NoError(t, l.Release(ctx), "a Release after Close")
	}
	closeClient(t, c) // waits for the releases' background work
	for _, l := range []*redlock.Lock{plain, kept} {
		e.requireNoKey(l.Key())
	}
}

// TestReleaseWhileClosing: Releases of user code that run while Close
// drains work, and Close waits for those that began before it was done.
func TestReleaseWhileClosing(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	var locks []*redlock.Lock
	for range 8 {
		l, err := c.TryAcquire(ctx, newKey(t), time.Minute)
		require.NoError(t, err)
		e.awaitHolders(l.Key(), l.Token())
		locks = append(locks, l)
	}
	// Deletes take a while: some Releases are on their way when Close
	// begins, others begin after.
	for _, p := range e.proxies {
		p.SetDelay(50 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeBound)
		defer cancel()
		closed <- c.Close(cctx)
	}()
	errs := make(chan error, len(locks))
	for _, l := range locks {
		go func() { errs <- l.Release(ctx) }()
	}
	for range locks {
		require.NoError(t, <-errs)
	}
	require.NoError(t, <-closed)
	closeClient(t, c) // the releases' background work is over
	e.resetFaults()
	for _, l := range locks {
		e.requireNoKey(l.Key())
	}
}

// TestAcquireEndingAfterClose: an Acquire whose attempt succeeds once Close
// has begun does not hand out a Lock that nobody will release: it releases
// it and fails with ErrClosed, and Close waits for that.
func TestAcquireEndingAfterClose(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(3*time.Second), redlock.WithCleanupTimeout(3*time.Second))
	key := newKey(t)
	// Every node answers a second late: the attempt is on its way when
	// Close begins, and the release that follows is answered in time.
	for _, p := range e.proxies {
		p.SetDelay(time.Second)
	}
	acquired := make(chan error, 1)
	go func() {
		_, err := c.TryAcquire(t.Context(), key, time.Minute)
		acquired <- err
	}()
	require.Eventually(t, func() bool {
		for _, n := range c.Nodes() {
			if n.InFlight == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the attempt was not sent")
	closeClient(t, c)
	err := <-acquired
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, redlock.ErrClosed)
	e.resetFaults()
	e.requireNoKey(key)
}

// TestCloseBoundedByContext: Close waits for fn no longer than its
// context; the Do still running then releases its lock when fn returns,
// although the Client is closed.
func TestCloseBoundedByContext(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	started := make(chan string, 1)
	finish := make(chan struct{})
	doDone := make(chan error, 1)
	go func() {
		doDone <- c.Do(t.Context(), key, time.Minute, func(_ context.Context, l *redlock.Lock) error {
			started <- l.Token()
			<-finish // ignores its context
			return nil
		})
	}()
	e.awaitHolders(key, <-started)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Close(ctx), context.DeadlineExceeded)
	assert.GreaterOrEqual(t, e.quorumHolders(key), c.Quorum(), "released under a running fn")
	close(finish)
	require.NoError(t, <-doDone, "fn returned nil and the lock was held throughout")
	closeClient(t, c) // the Do's deletes have all been answered
	e.requireNoKey(key)
}

// TestCloseWaitsForNestedDo: an owner's Do within its own Do, and a hold
// of the owner's Lock by Acquire: Close ends both fns' contexts and waits
// for both Do calls, which give back their holds; the Acquire's hold is its
// holder's to release.
func TestCloseWaitsForNestedDo(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	owner := redlock.WithOwner("job-7")
	held, err := c.Acquire(ctx, key, time.Minute, owner)
	require.NoError(t, err)
	e.awaitHolders(key, held.Token())

	started := make(chan struct{})
	doDone := make(chan error, 1)
	var innerErr error
	go func() {
		doDone <- c.Do(ctx, key, time.Minute, func(outer context.Context, l *redlock.Lock) error {
			if l != held {
				return errors.New("the owner's Do did not re-enter its Lock")
			}
			innerErr = c.Do(ctx, key, time.Minute, func(inner context.Context, l *redlock.Lock) error {
				close(started)
				<-inner.Done()
				return context.Cause(inner)
			}, owner)
			<-outer.Done()
			// The inner Do's release only gave back its hold: the key
			// is still held under the running outer fn.
			if e.quorumHolders(key) < c.Quorum() {
				return errors.New("released under the outer fn")
			}
			return context.Cause(outer)
		}, owner)
	}()
	<-started
	closeClient(t, c)
	err = <-doDone
	require.ErrorIs(t, err, redlock.ErrClosed)
	require.NotErrorIs(t, err, redlock.ErrNotHeld)
	require.ErrorIs(t, innerErr, redlock.ErrClosed)
	require.NotErrorIs(t, innerErr, redlock.ErrNotHeld)
	require.Equal(t, len(e.direct), e.holders(key, held.Token()), "the Acquire's hold was taken")
	require.NoError(t, held.Release(ctx))
	closeClient(t, c)
	e.requireNoKey(key)
}
