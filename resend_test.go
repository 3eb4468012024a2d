package redlock_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/history"
)

// A write that left the client may land on its node later than anything
// the client sent after it: go-redis sends a command again on a new
// connection when the first one is reset with the command's bytes still in
// the network (HoldNextReset), and the first copy still arrives; TCP
// delivers late. The tests below each hold one of a Lock's writes that
// way, let the Lock be released or rolled back, and then let the held copy
// land: no value of a released Lock, or of a failed attempt, may stay on a
// node (docs/late-writes.md). Each runs with go-redis's defaults and with
// ContextTimeoutEnabled, its call alone on the node and in a batch of
// calls that met there (internal/engine/batch.go).

// sendModes are how a call reaches its node: alone, or in a batch (a
// go-redis pipeline) with other calls.
var sendModes = []struct {
	name    string
	batched bool
}{{"lone", false}, {"batched", true}}

// resendTTL is the TTL of the Locks whose writes are held: long next to
// the tests, as the lockout it would cause is.
const resendTTL = 20 * time.Second

// forEachResend runs f for each client configuration and send mode, on
// three fresh nodes with a warm Client.
func forEachResend(t *testing.T, f func(t *testing.T, e *env, c *redlock.Client, batched bool)) {
	for _, cfg := range clientConfigs {
		for _, m := range sendModes {
			t.Run(cfg.name+"/"+m.name, func(t *testing.T) {
				e := newEnv(t, 3, cfg.o)
				c := e.client()
				require.NoError(t, c.Warm(t.Context()))
				f(t, e, c, m.batched)
			})
		}
	}
}

// busy keeps node i's flights full while it runs, so that most calls made
// to it meanwhile wait and go out together, in batches: the node answers
// delay late, and eight loops of other Locks keep it busy. It returns once
// the node's average flight is that long (a flight stops counting at four
// times the average), and the returned func stops it; it may be called
// twice.
func busy(t *testing.T, e *env, c *redlock.Client, i int, delay time.Duration) (stop func()) {
	t.Helper()
	e.proxies[i].SetDelay(delay)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("%s:busy:%d", newKey(t), g)
			for ctx.Err() == nil {
				l, err := c.TryAcquire(ctx, key, 5*time.Second)
				if err == nil {
					_ = l.Release(context.Background())
				}
			}
		}()
	}
	// Long enough for the node's average flight to reach the delay.
	time.Sleep(300 * time.Millisecond)
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			e.proxies[i].SetDelay(0)
		})
	}
}

// arm arms node i's proxy to hold the next chunk that carries pattern,
// batched with other calls (it holds "evalsha" more than once) or alone as
// asked, and with reset to reset the client's connection under it. A call
// that goes out otherwise is not held: see caughtSoon.
func arm(e *env, i int, pattern []byte, batched, reset bool) <-chan struct{} {
	pattern = bytes.Clone(pattern)
	return e.proxies[i].HoldNextMatch(func(b []byte) bool {
		return bytes.Contains(b, pattern) && batched == (bytes.Count(b, []byte("evalsha")) > 1)
	}, reset)
}

// caughtSoon reports whether caught closes within the node timeout and a
// margin, the longest a round's write may wait to go out. When it does
// not, node i's call went out in the other shape; the catch is disarmed,
// for the test to try again with another key.
func caughtSoon(e *env, i int, caught <-chan struct{}) bool {
	select {
	case <-caught:
		return true
	case <-time.After(testNodeTimeout + 500*time.Millisecond):
		e.proxies[i].ReleaseHeld()
		return false
	}
}

// soon reports whether cond holds within d, polled every millisecond:
// require.Eventually for a test that tries again when it does not.
func soon(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// tries bounds how many times a test tries for its call to go out in the
// shape it needs: under load a batch forms most times, not every time.
const tries = 20

// landHeld lets node i's held chunks go and waits until the node ran
// every call in them. Nothing else may be sending to the node meanwhile.
func landHeld(t *testing.T, e *env, i int) {
	t.Helper()
	n := 0
	for _, h := range e.proxies[i].Held() {
		n += bytes.Count(h, []byte("evalsha"))
	}
	require.Positive(t, n, "node %d holds no call", i)
	before := e.calls(i, "evalsha")
	e.proxies[i].ReleaseHeld()
	require.Eventually(t, func() bool { return e.calls(i, "evalsha") >= before+n },
		10*time.Second, time.Millisecond, "the held calls did not all run on node %d", i)
}

// noValueOf fails if any node keeps a value of token's Lock under key for
// the next moment: the held copy, landed, must have been refused (a
// tombstone is no holder).
func noValueOf(t *testing.T, e *env, key, token string) {
	t.Helper()
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		for i := range e.direct {
			if e.value(i, key) == token {
				raw := e.bed.Get(i, key)
				pttl := e.direct[i].PTTL(context.Background(), key).Val()
				require.Failf(t, "a released Lock's value stays", "node %d holds %q, %v left", i, raw, pttl)
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestResendAfterRelease (resend case 1): node 2's acquire write is
// held and its connection reset; go-redis sends it again, the copy
// succeeds, the Lock holds on all three nodes and is released. Then the
// held copy lands: it must find what refuses it.
func TestResendAfterRelease(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		resendAfterRelease(t, e, c, batched, nil, func(key string, l *redlock.Lock) {
			gone(t, e, key, l.Token())
		}, func(key string, l *redlock.Lock) {
			noValueOf(t, e, key, l.Token())
		})
	})
}

// TestResendAfterReleaseWithMetadata: TestResendAfterRelease for a Lock
// with holder metadata, which its values carry: the longer value is
// refused as the shorter one is.
func TestResendAfterReleaseWithMetadata(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		opts := []redlock.AcquireOption{redlock.WithMetadata("host web-3 pid 42, ~|:!.")}
		resendAfterRelease(t, e, c, batched, opts, func(key string, l *redlock.Lock) {
			gone(t, e, key, l.Token())
		}, func(key string, l *redlock.Lock) {
			require.Equal(t, l.Token(), holderOf(l.Token()+"m"+strings.Repeat("A", 8)+".1"), "holderOf reads no metadata")
			noValueOf(t, e, key, l.Token())
		})
	})
}

// TestResendAfterSharedRelease: TestResendAfterRelease for a shared
// Lock, whose value on a node is an entry among the readers' (the
// simulator saw a shared Lock's copy accepted 1.3 s after its Release,
// with other Locks taking the key in between; not reproduced here).
func TestResendAfterSharedRelease(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		resendAfterRelease(t, e, c, batched, []redlock.AcquireOption{redlock.Shared()}, nil, func(key string, l *redlock.Lock) {
			noLiveEntryOf(t, e, key, l.Token())
		})
	})
}

// resendAfterRelease holds node 2's acquire write of a Lock taken with
// opts and resets its connection, releases the Lock (then calls released,
// if set), waits for the deletes, lets the held copy land and calls check.
// It tries new keys until the write goes out in the shape asked.
func resendAfterRelease(t *testing.T, e *env, c *redlock.Client, batched bool, opts []redlock.AcquireOption,
	released, check func(key string, l *redlock.Lock)) {
	t.Helper()
	ctx := t.Context()
	stop := func() {}
	if batched {
		stop = busy(t, e, c, 2, 15*time.Millisecond)
		defer stop()
	}
	for try := 0; ; try++ {
		require.Less(t, try, tries, "node 2's write never went out as asked (batched %v)", batched)
		key := newKey(t)
		caught := arm(e, 2, []byte(key), batched, true)
		l, err := c.Acquire(ctx, key, resendTTL, opts...)
		require.NoError(t, err)
		if !caughtSoon(e, 2, caught) {
			require.NoError(t, l.Release(ctx))
			continue
		}
		require.NoError(t, l.Release(ctx))
		if released != nil {
			released(key, l)
		}
		stop()
		quiet(t, c) // the Release's or rollback's deletes are done
		landHeld(t, e, 2)
		check(key, l)
		return
	}
}

// noLiveEntryOf fails if any node's value of key holds a live entry of
// token's shared Lock for the next moment (noValueOf for shares).
func noLiveEntryOf(t *testing.T, e *env, key, token string) {
	t.Helper()
	deadline := time.Now().Add(300 * time.Millisecond)
	for {
		for i := range e.direct {
			raw := e.bed.Get(i, key)
			if strings.Contains(history.LiveValue(raw, time.Now()), token) {
				pttl := e.direct[i].PTTL(context.Background(), key).Val()
				require.Failf(t, "a released shared Lock's entry stays", "node %d holds %q, %v left", i, raw, pttl)
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestResendOfRestore (resend case 2): node 2 lost the key; an Extend
// confirmed by the other two puts it back there in the background (the
// restore), whose write is held and its connection reset. The Lock is
// released; then the held restore lands.
func TestResendOfRestore(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		ctx := t.Context()
		stop := func() {}
		if batched {
			stop = busy(t, e, c, 2, 15*time.Millisecond)
			defer stop()
		}
		for try := 0; ; try++ {
			require.Less(t, try, tries, "node 2's restore never went out as asked (batched %v)", batched)
			key := newKey(t)
			l, err := c.Acquire(ctx, key, resendTTL)
			require.NoError(t, err)
			e.awaitHolders(key, l.Token())
			require.NoError(t, e.direct[2].Del(ctx, key).Err())
			caught := arm(e, 2, scriptSHA(t, "restore.lua"), batched, true)
			// Nodes 0 and 1 answer late, so that the Extend hears node 2
			// before its quorum: only a node heard to have lost the key is
			// restored.
			for i := range 2 {
				e.proxies[i].SetDelay(100 * time.Millisecond)
			}
			require.NoError(t, l.Extend(ctx, resendTTL))
			for i := range 2 {
				e.proxies[i].SetDelay(0)
			}
			if !caughtSoon(e, 2, caught) {
				require.NoError(t, l.Release(ctx))
				continue
			}
			require.NoError(t, l.Release(ctx))
			gone(t, e, key, l.Token())
			stop()
			quiet(t, c) // the Release's or rollback's deletes are done
			landHeld(t, e, 2)
			noValueOf(t, e, key, l.Token())
			return
		}
	})
}

// TestResendOfBatch (resend case 3): 24 Acquires at once meet on node 2
// and go out in batches; the first batch is held and its connection
// reset, go-redis sends the whole batch again. Every Lock is released;
// then the held batch lands.
func TestResendOfBatch(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, cfg.o)
			c := e.client()
			ctx := t.Context()
			require.NoError(t, c.Warm(ctx))
			base := newKey(t)
			stop := busy(t, e, c, 2, 15*time.Millisecond)
			defer stop()
			caught := e.proxies[2].HoldNextReset([]byte(base+":"), 2)
			locks := make([]*redlock.Lock, 24)
			var wg sync.WaitGroup
			for i := range locks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := c.Acquire(ctx, fmt.Sprintf("%s:%d", base, i), resendTTL)
					assert.NoError(t, err)
					locks[i] = l
				}()
			}
			wg.Wait()
			waitClosed(t, caught, "no batch of the Acquires was caught on node 2")
			stop()
			held := e.proxies[2].Held()
			require.Len(t, held, 1)
			t.Logf("the held batch has %d calls", bytes.Count(held[0], []byte("evalsha")))
			for _, l := range locks {
				require.NotNil(t, l)
				require.NoError(t, l.Release(ctx))
			}
			quiet(t, c)
			landHeld(t, e, 2)
			for i, l := range locks {
				noValueOf(t, e, fmt.Sprintf("%s:%d", base, i), l.Token())
			}
		})
	}
}

// TestResendOfFailedAttempt (resend case 4): another holder has nodes 0
// and 1; a TryAcquire's write to node 2 is held and its connection reset,
// go-redis sends it again and it succeeds there. The attempt fails and
// rolls back; then the held copy lands.
func TestResendOfFailedAttempt(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		ctx := t.Context()
		stop := func() {}
		if batched {
			stop = busy(t, e, c, 2, 15*time.Millisecond)
			defer stop()
		}
		for try := 0; ; try++ {
			require.Less(t, try, tries, "node 2's write never went out as asked (batched %v)", batched)
			key := newKey(t)
			for i := range 2 {
				require.NoError(t, e.direct[i].Set(ctx, key, "someone-else.1", time.Minute).Err())
			}
			caught := arm(e, 2, []byte(key), batched, true)
			l, err := c.TryAcquire(ctx, key, resendTTL)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			require.Nil(t, l)
			if !caughtSoon(e, 2, caught) {
				continue
			}
			token := holderOfWritten(t, e, 2, key)
			gone(t, e, key, token) // the rollback, of the copy sent again
			stop()
			quiet(t, c) // the Release's or rollback's deletes are done
			landHeld(t, e, 2)
			noValueOf(t, e, key, token)
			for i := range e.direct {
				v := e.value(i, key)
				assert.True(t, v == "" || v == "someone-else", "node %d holds %q", i, v)
			}
			return
		}
	})
}

// holderOfWritten is the token of the Lock whose write node i's proxy
// holds, read from the held chunk: a failed attempt's Lock is never
// returned.
func holderOfWritten(t *testing.T, e *env, i int, key string) string {
	t.Helper()
	held := e.proxies[i].Held()
	require.NotEmpty(t, held)
	// The command line: ... $len key $len value ...; the value follows the
	// key.
	at := bytes.Index(held[0], []byte(key+"\r\n"))
	require.GreaterOrEqual(t, at, 0)
	rest := held[0][at+len(key)+2:]
	_, rest, _ = bytes.Cut(rest, []byte("\r\n")) // the value's length
	v, _, _ := bytes.Cut(rest, []byte("\r\n"))
	return holderOf(string(v))
}

// TestRollbackNotStarved (resend case 5): with calls batched on node 1,
// the node drops its replies for 60 ms. A failed attempt wrote there
// meanwhile; its rollback must reach the node within about a second of the
// node answering again, not once go-redis gives up on the connections the
// lost replies held (its ReadTimeout, 5 s by default).
func TestRollbackNotStarved(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, cfg.o)
			c, err := redlock.New(e.nodes) // the default node timeout: the setting
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			ctx := t.Context()
			require.NoError(t, c.Warm(ctx))
			stop := busy(t, e, c, 1, 0)
			defer stop()
			for try := 0; ; try++ {
				require.Less(t, try, tries, "the attempt's write never reached node 1")
				key := newKey(t)
				for _, i := range []int{0, 2} {
					require.NoError(t, e.direct[i].Set(ctx, key, "someone-else.1", time.Minute).Err())
				}
				// Node 1 drops replies from the attempt's write on, for 60
				// ms: the write and the rollback's tombstone after it land,
				// their replies are lost, and so are those of the busy
				// calls meanwhile. Turned on before the write instead, the
				// drop would keep it waiting behind busy calls whose
				// replies never come, until the node's flights count as
				// stalled (4 times their average): on a loaded machine
				// past the write's 50 ms, every try (CI, 172c531).
				started := e.proxies[1].DropRepliesFrom(func(b []byte) bool { return bytes.Contains(b, []byte(key)) })
				_, err = c.TryAcquire(ctx, key, resendTTL)
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				// On a loaded machine the write may still miss its deadline
				// unsent.
				reached := soon(2*time.Second, func() bool { return e.bed.Get(1, key) != "" })
				select {
				case <-started:
					time.Sleep(60 * time.Millisecond)
				default:
					reached = false
				}
				e.proxies[1].SetDropReplies(false)
				if !reached {
					// The replies the node dropped meanwhile left the
					// client's connections to it held, up to the cleanup
					// timeout each: a next try before they are free would
					// find no connection for its write either, every time.
					recovered(t, e, 1)
					continue
				}
				answering := time.Now()
				require.Eventually(t, func() bool { return e.value(1, key) == "" },
					10*time.Second, time.Millisecond, "the rollback never reached node 1")
				took := time.Since(answering)
				t.Logf("the rollback reached node 1 %v after it answered again", took)
				assert.Less(t, took, 2*time.Second, "the rollback waited for connections the lost replies held")
				return
			}
		})
	}
}

// recovered waits until a call through the client's pool to node i goes
// out and is answered within the default node timeout, as the test's
// writes must: the connections that lost replies held are free again.
func recovered(t *testing.T, e *env, i int) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), redlock.DefaultNodeTimeoutMax)
		defer cancel()
		return e.nodes[i].Ping(ctx).Err() == nil
	}, 20*time.Second, 10*time.Millisecond, "node %d's pool never had a connection free", i)
}

// TestHotKeyKeepsTombstone (resend case 6): Lock A's write to node 2 is
// held; A holds on nodes 0 and 1 and is released, its tombstone on node
// 2. Lock B takes the key over the tombstone and is released. Then A's
// held write lands: what B left must still refuse it.
func TestHotKeyKeepsTombstone(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		ctx := t.Context()
		stop := func() {}
		if batched {
			stop = busy(t, e, c, 2, 15*time.Millisecond)
			defer stop()
		}
		for try := 0; ; try++ {
			require.Less(t, try, tries, "A's write to node 2 never went out as asked (batched %v)", batched)
			key := newKey(t)
			caught := arm(e, 2, []byte(key), batched, false)
			a, err := c.TryAcquire(ctx, key, resendTTL)
			require.NoError(t, err)
			if !caughtSoon(e, 2, caught) {
				require.NoError(t, a.Release(ctx))
				continue
			}
			stop()
			require.NoError(t, a.Release(ctx))
			// A's write to node 2 is past its round: its lane moved on to
			// the Release's delete, which the write may land after.
			time.Sleep(testNodeTimeout + 100*time.Millisecond)
			gone(t, e, key, a.Token())
			b, err := c.Acquire(ctx, key, resendTTL)
			require.NoError(t, err)
			e.awaitHolders(key, b.Token())
			require.NoError(t, b.Release(ctx))
			gone(t, e, key, b.Token())
			landHeld(t, e, 2)
			noValueOf(t, e, key, a.Token())
			return
		}
	})
}

// gone waits until no node holds token's value under key: its Release
// reached every node. It does not wait for the client to be quiet, which
// a write held in the network keeps busy until go-redis gives up on it.
func gone(t *testing.T, e *env, key, token string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for i := range e.direct {
			if e.value(i, key) == token {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the Release of %s did not reach every node", token)
}

// TestRollbackPastAnotherHolder (resend case 6, the refusing node): a
// TryAcquire's write to node 2 is held while B holds the key there and on
// node 0; the attempt fails and rolls back, finding B's value on node 2.
// B is released; then the held write lands: B's release must have kept
// what refuses it.
func TestRollbackPastAnotherHolder(t *testing.T) {
	forEachResend(t, func(t *testing.T, e *env, c *redlock.Client, batched bool) {
		ctx := t.Context()
		other := e.client()
		require.NoError(t, other.Warm(ctx))
		stop := func() {}
		if batched {
			stop = busy(t, e, c, 2, 15*time.Millisecond)
			defer stop()
		}
		for try := 0; ; try++ {
			require.Less(t, try, tries, "the write to node 2 never went out as asked (batched %v)", batched)
			key := newKey(t)
			e.proxies[1].SetBlackhole(true)
			b, err := other.TryAcquire(ctx, key, resendTTL)
			require.NoError(t, err)
			e.gaveUp(other, 1)
			e.proxies[1].SetBlackhole(false)
			caught := arm(e, 2, []byte(key), batched, false)
			_, err = c.TryAcquire(ctx, key, resendTTL)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			if !caughtSoon(e, 2, caught) {
				require.NoError(t, b.Release(ctx))
				continue
			}
			stop()
			token := holderOfWritten(t, e, 2, key)
			gone(t, e, key, token) // the rollback ran on node 1
			e.gaveUp(c, 2)         // and on node 2, where it found B's value
			require.NoError(t, b.Release(ctx))
			gone(t, e, key, b.Token())
			landHeld(t, e, 2)
			noValueOf(t, e, key, token)
			return
		}
	})
}

// TestLateWriteOutlivesShortExtend: a Lock taken for 20 s whose write to
// node 2 is held is extended for 300 ms and released; its tombstone there
// must refuse the held write for as long as that write would keep the key
// (its 20 s TTL, up to the bound), not for the last Extend's 300 ms. The
// simulator found it (seed 7): a copy of the acquire landed 1.35 s after a
// tombstone of 178 ms had gone and held the key its 8.6 s.
func TestLateWriteOutlivesShortExtend(t *testing.T) {
	for _, cfg := range clientConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			e := newEnv(t, 3, cfg.o)
			c := e.client()
			ctx := t.Context()
			require.NoError(t, c.Warm(ctx))
			key := newKey(t)
			caught := e.proxies[2].HoldNextReset([]byte(key), 1)
			l, err := c.TryAcquire(ctx, key, resendTTL)
			require.NoError(t, err)
			waitClosed(t, caught, "node 2's write was not caught")
			require.NoError(t, l.Extend(ctx, 300*time.Millisecond))
			require.NoError(t, l.Release(ctx))
			quiet(t, c)
			time.Sleep(time.Second) // past a tombstone of the Extend's 300 ms
			landHeld(t, e, 2)
			noValueOf(t, e, key, l.Token())
		})
	}
}

// TestDeleteRetriesOutliveShortTTL: a Lock of a short TTL taken right
// after another's Release lives its own TTL on every node, nothing carried
// from the Lock before (an earlier design's tombstones made such a value
// live until their entries were due, 2 s, and its deletes had to be tried
// that long), so a node cut off from its Release holds nothing once it is
// back after that TTL.
func TestDeleteRetriesOutliveShortTTL(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(redlock.WithNodeTimeout(100 * time.Millisecond))
	ctx := t.Context()
	key := newKey(t)
	first, err := c.TryAcquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))
	const ttl = 300 * time.Millisecond
	l, err := c.TryAcquire(ctx, key, ttl)
	require.NoError(t, err)
	for i, d := range e.direct {
		left, err := d.PTTL(ctx, key).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, left, ttl, "node %d: the value lives longer than its Lock's TTL", i)
	}
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx))
	time.Sleep(ttl + 200*time.Millisecond)
	e.resetFaults()
	for i, d := range e.direct {
		n, err := d.Exists(ctx, key).Result()
		require.NoError(t, err)
		require.Zero(t, n, "node %d holds the released Lock's value", i)
	}
}
