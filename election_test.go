package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/redlock-go/redlock"
)

// termStore is a fenced store on a node of its own reach: a write carries
// its writer's term and is refused below the highest term written.
var termStore = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

func termWrite(t *testing.T, rc *redis.Client, key string, term uint64) bool {
	t.Helper()
	ok, err := termStore.Run(context.Background(), rc, []string{key}, term).Int()
	require.NoError(t, err)
	return ok == 1
}

// TestElectionOneLeaderAtATime: three Clients campaign, lead a few
// milliseconds and resign, for two seconds. No two leaderships overlap
// while both contexts are live, and terms increase in the order of
// election.
func TestElectionOneLeaderAtATime(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	key := newKey(t)
	type term struct {
		from, to time.Time
		term     uint64
	}
	var mu sync.Mutex
	var terms []term
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var g errgroup.Group
	for i := range 3 {
		c := e.client()
		el, err := c.Election(key, 2*time.Second)
		require.NoError(t, err)
		g.Go(func() error {
			for ctx.Err() == nil {
				ld, err := el.Campaign(ctx, fmt.Sprintf("campaigner-%d", i))
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				from := time.Now()
				if ld.Value() != fmt.Sprintf("campaigner-%d", i) {
					return fmt.Errorf("leadership value %q", ld.Value())
				}
				time.Sleep(5 * time.Millisecond)
				to := time.Now()
				live := ld.Context().Err() == nil
				if err := ld.Resign(context.Background()); err != nil {
					return err
				}
				if live {
					mu.Lock()
					terms = append(terms, term{from, to, ld.Term()})
					mu.Unlock()
				}
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	require.Greater(t, len(terms), 10, "too few leaderships to judge")
	slices.SortFunc(terms, func(a, b term) int { return a.from.Compare(b.from) })
	for i := 1; i < len(terms); i++ {
		assert.True(t, terms[i].from.After(terms[i-1].to), "leaderships %d and %d overlap", i-1, i)
		assert.Greater(t, terms[i].term, terms[i-1].term, "terms must increase in the order of election")
	}
	t.Logf("%d leaderships in 2 s", len(terms))
}

// TestElectionResignWakesNext: a campaigner waiting behind a leader with
// a 10 s TTL leads within a second of the leader's Resign: the release
// wakes it, no poll at the TTL.
func TestElectionResignWakesNext(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	key := newKey(t)
	a, err := e.client().Election(key, 10*time.Second)
	require.NoError(t, err)
	b, err := e.client().Election(key, 10*time.Second)
	require.NoError(t, err)
	ctx := t.Context()
	la, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	elected := make(chan *redlock.Leadership, 1)
	go func() {
		lb, err := b.Campaign(ctx, "b")
		assert.NoError(t, err)
		elected <- lb
	}()
	time.Sleep(300 * time.Millisecond) // b waits behind a
	select {
	case <-elected:
		t.Fatal("b led while a did")
	default:
	}
	resigned := time.Now()
	require.NoError(t, la.Resign(ctx))
	assert.ErrorIs(t, context.Cause(la.Context()), redlock.ErrReleased)
	lb := <-elected
	require.NotNil(t, lb)
	took := time.Since(resigned)
	t.Logf("b led %v after a resigned", took)
	assert.Less(t, took, time.Second, "b was not woken by the release")
	assert.Greater(t, lb.Term(), la.Term())
	require.NoError(t, lb.Resign(ctx))
}

// TestElectionFailoverAndStaleTerm: leader A is cut off from every node
// (its process as good as dead or paused); B, campaigning on direct
// connections, leads once A's key expires: within the TTL and a second,
// and only after A's own context ended. A's write with its term, sent
// after B's, is refused by the fenced store.
func TestElectionFailoverAndStaleTerm(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	key := newKey(t)
	const ttl = time.Second
	a, err := e.client().Election(key, ttl)
	require.NoError(t, err)
	b, err := e.directClient().Election(key, ttl)
	require.NoError(t, err)
	ctx := t.Context()
	la, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	store := newKey(t) + ":store"
	require.True(t, termWrite(t, e.direct[0], store, la.Term()))

	var aEnded time.Time
	aDone := make(chan struct{})
	go func() {
		<-la.Context().Done()
		aEnded = time.Now()
		close(aDone)
	}()
	time.Sleep(ttl / 2)
	cut := time.Now()
	for _, p := range e.proxies {
		p.SetBlackhole(true)
	}
	lb, err := b.Campaign(ctx, "b")
	require.NoError(t, err)
	elected := time.Now()
	<-aDone
	t.Logf("failover: b led %v after a was cut off (ttl %v); a's context ended %v after the cut, cause %v",
		elected.Sub(cut), ttl, aEnded.Sub(cut), context.Cause(la.Context()))
	assert.Less(t, elected.Sub(cut), ttl+time.Second, "failover took longer than the TTL and a second")
	assert.True(t, aEnded.Before(elected), "a's context ended after b led")
	assert.ErrorIs(t, context.Cause(la.Context()), redlock.ErrLockLost)
	assert.Greater(t, lb.Term(), la.Term())

	require.True(t, termWrite(t, e.direct[0], store, lb.Term()))
	assert.False(t, termWrite(t, e.direct[0], store, la.Term()), "the deposed leader's write was not refused by term")
	for _, p := range e.proxies {
		p.SetBlackhole(false)
	}
	require.NoError(t, lb.Resign(ctx))
}

// TestElectionRunLeadsAgain: Run's leader loses its leadership (its key
// deleted on every node, as a majority restarted empty would): its
// context ends with ErrLockLost, and Run campaigns and leads again with a
// higher term, until its context ends. The bug of trigger.dev #3428: a
// renewer that stopped after one failed extend and never campaigned again.
func TestElectionRunLeadsAgain(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	key := newKey(t)
	el, err := e.client().Election(key, time.Second)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var terms []uint64
	var causes []error
	done := make(chan error, 1)
	go func() {
		done <- el.Run(ctx, "runner", func(lctx context.Context, ld *redlock.Leadership) error {
			terms = append(terms, ld.Term())
			if len(terms) == 1 {
				for _, d := range e.direct {
					require.NoError(t, d.Del(context.Background(), key).Err())
				}
			} else {
				cancel()
			}
			<-lctx.Done()
			causes = append(causes, context.Cause(lctx))
			return nil
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not lead twice")
	}
	require.Len(t, terms, 2)
	assert.Greater(t, terms[1], terms[0])
	assert.ErrorIs(t, causes[0], redlock.ErrLockLost)
	assert.ErrorIs(t, causes[1], context.Canceled)
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestElectionRunEnds: lead's error ends Run with it, lead returning nil
// while it leads ends Run with nil, and each resigns.
func TestElectionRunEnds(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	el, err := c.Election(key, 5*time.Second)
	require.NoError(t, err)
	boom := errors.New("boom")
	err = el.Run(t.Context(), "", func(context.Context, *redlock.Leadership) error { return boom })
	require.ErrorIs(t, err, boom)
	e.eventuallyNoKey(key, 5*time.Second)
	calls := 0
	require.NoError(t, el.Run(t.Context(), "", func(context.Context, *redlock.Leadership) error { calls++; return nil }))
	assert.Equal(t, 1, calls)
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestElectionInvalid: bad input is ErrInvalidArgument and takes nothing.
func TestElectionInvalid(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	_, err := c.Election("", time.Second)
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
	_, err = c.Election(key, -time.Second)
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
	el, err := c.Election(key, time.Second)
	require.NoError(t, err)
	_, err = el.Campaign(t.Context(), "bad\x00value")
	assert.ErrorIs(t, err, redlock.ErrInvalidArgument)
	assert.ErrorIs(t, el.Run(t.Context(), "", nil), redlock.ErrInvalidArgument)
	e.requireNoKey(key)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = el.Campaign(ctx, "v")
	assert.ErrorIs(t, err, redlock.ErrNotAcquired)
	assert.ErrorIs(t, err, context.Canceled)
	e.requireNoKey(key)
}
