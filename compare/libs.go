package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/pingfloor"
)

// A contender is one library (or the floor) under test. Each gets its own
// go-redis clients, built with the same options, so one library's stranded
// connections never starve another's pool.
type contender struct {
	name string
	// singleNode: the library locks on one Redis only; it runs in the
	// scenarios with one node.
	singleNode bool
	// floor: not a lock at all but the round-trip floor; it takes part in the
	// uncontended and many-keys scenarios only.
	floor bool
	// experiment: a minimal lock written here, without deadlines, to show
	// what the commands themselves cost; healthy nodes, no contention.
	experiment bool
	// correct: an experiment that is a correct lock (min-setnx-del's DEL
	// is not), which runs on the network group's links too, beside the
	// libraries: the least a lock pays there.
	correct bool
	// allKeys: redlock's AcquireAll over this many keys, in the uncontended
	// scenarios only, to price a Lock of several keys against Acquire.
	allKeys int
	// ceiling: not a lock across nodes but what bounds a workload's
	// throughput (ceilings.go); it takes part in the scenarios of that one
	// kind only.
	ceiling bool
	only    kind
	open    func(clients []*redis.Client, sc *scenario) (locker, error)
}

// locker is what a workload needs from a library. Handles are pointers, so
// boxing them in an interface allocates nothing that the library itself does
// not.
type locker interface {
	// lock takes key. When contended it waits and retries the library's
	// default way; otherwise one attempt is expected to succeed.
	lock(ctx context.Context, key string) (any, error)
	unlock(ctx context.Context, h any) error
	// close ends the library's background work; the clients are closed by
	// the caller afterwards.
	close(ctx context.Context) error
}

const (
	nameBare       = "floor-bare"
	namePipe       = "floor-pipelined"
	nameBatched    = "ceiling-batched-scripts"
	nameMutex      = "ceiling-mutex"
	nameFloor      = "floor-ctx"
	nameMinScript  = "min-setnx-script"
	nameMinPlain   = "min-setnx-del"
	nameMinScripts = "min-script-script"
	nameMinDead    = "min-deadline"
	nameRedlock    = "redlock"
	nameRedlockCtx = "redlock-ctxtimeout"
	nameRedsync    = "redsync"
	nameRedsyncFF  = "redsync-failfast"
	nameRedislock  = "redislock"
	nameRedlockAll = "redlock-acquireall-%d"
	floorTimeout   = 50 * time.Millisecond // as redlock's default per-node deadline for a 10s TTL
	contendedRetry = 5 * time.Millisecond  // redislock's backoff bounds when contended: redlock's defaults
	contendedMax   = 200 * time.Millisecond
)

func contenders() []contender {
	return []contender{
		{name: nameBare, floor: true, open: openBare},
		{name: nameFloor, floor: true, open: openFloor},
		{name: namePipe, ceiling: true, only: manyKeys, open: openPipeFloor},
		{name: nameBatched, ceiling: true, only: manyKeys, open: openBatchedScripts},
		{name: nameMutex, ceiling: true, only: contention, open: openMutex},
		{name: nameRedlock, open: openRedlock},
		{name: nameRedlockCtx, open: openRedlockCtx},
		{name: nameRedsync, open: openRedsync(false)},
		{name: nameRedsyncFF, open: openRedsync(true)},
		{name: nameRedislock, singleNode: true, open: openRedislock},
		{name: fmt.Sprintf(nameRedlockAll, 1), allKeys: 1, open: openRedlockAll(1)},
		{name: fmt.Sprintf(nameRedlockAll, 8), allKeys: 8, open: openRedlockAll(8)},
		{name: nameMinPlain, experiment: true, open: openMinimal(releaseDel)},
		{name: nameMinScript, experiment: true, correct: true, open: openMinimal(releaseScript)},
		{name: nameMinScripts, experiment: true, correct: true, open: openMinimal(acquireScriptReleaseScript)},
		{name: nameMinDead, experiment: true, correct: true, open: openMinimal(deadlines)},
	}
}

// ---- redlock: its defaults (per-node deadline 50ms for a 10s TTL; jittered
// exponential backoff 5ms..200ms when contended).

type redlockLocker struct{ c *redlock.Client }

func openRedlock(clients []*redis.Client, _ *scenario) (locker, error) {
	nodes := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		nodes[i] = c
	}
	c, err := redlock.New(nodes)
	if err != nil {
		return nil, err
	}
	return redlockLocker{c}, nil
}

// ---- redlock on clients of its own with ContextTimeoutEnabled, as its
// README recommends: go-redis then ends a call at its context's deadline, and
// redlock makes one node's call on the caller's goroutine instead of a
// worker's. The other libraries do not change with that option the same way,
// so this row is redlock's alone (with -ctx-timeout it equals redlock's).

type redlockCtxLocker struct {
	redlockLocker
	own []*redis.Client
}

func openRedlockCtx(clients []*redis.Client, sc *scenario) (locker, error) {
	own := make([]*redis.Client, len(clients))
	for i, c := range clients {
		o := *c.Options()
		o.ContextTimeoutEnabled = true
		own[i] = redis.NewClient(&o)
	}
	l, err := openRedlock(own, sc)
	if err != nil {
		return nil, err
	}
	return redlockCtxLocker{l.(redlockLocker), own}, nil
}

func (r redlockCtxLocker) close(ctx context.Context) error {
	err := r.redlockLocker.close(ctx)
	for _, c := range r.own {
		_ = c.Close()
	}
	return err
}

func (r redlockLocker) lock(ctx context.Context, key string) (any, error) {
	return r.c.Acquire(ctx, key, ttl)
}

func (r redlockLocker) unlock(ctx context.Context, h any) error {
	return h.(*redlock.Lock).Release(ctx)
}

// close closes the Client. The deletes it gives up on a faulted node (a
// blackholed one, whose proxy is closed first) are the scenario's, not the
// harness's failure: their keys expire with their TTL.
func (r redlockLocker) close(ctx context.Context) error {
	if err := r.c.Close(ctx); !errors.Is(err, redlock.ErrCleanupAbandoned) {
		return err
	}
	return nil
}

// ---- redlock's AcquireAll over n keys: the key and n-1 others derived
// from it, built once per key so that the measured call allocates only
// what AcquireAll does.

type redlockAllLocker struct {
	redlockLocker
	n    int
	mu   sync.Mutex
	sets map[string][]string
}

func openRedlockAll(n int) func([]*redis.Client, *scenario) (locker, error) {
	return func(clients []*redis.Client, sc *scenario) (locker, error) {
		l, err := openRedlock(clients, sc)
		if err != nil {
			return nil, err
		}
		return &redlockAllLocker{redlockLocker: l.(redlockLocker), n: n, sets: map[string][]string{}}, nil
	}
}

func (r *redlockAllLocker) lock(ctx context.Context, key string) (any, error) {
	r.mu.Lock()
	keys, ok := r.sets[key]
	if !ok {
		keys = []string{key}
		for i := 1; i < r.n; i++ {
			keys = append(keys, fmt.Sprintf("%s:%d", key, i))
		}
		r.sets[key] = keys
	}
	r.mu.Unlock()
	return r.c.AcquireAll(ctx, keys, ttl)
}

// ---- redsync: its defaults (32 tries 50..250ms apart, a per-attempt deadline
// of 5% of the expiry, waiting for every node), with the same expiry as the
// others, optionally with WithFailFast(true). A Mutex is made per lock, as
// redsync's README does; it cannot be shared by goroutines.

type redsyncLocker struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func openRedsync(failFast bool) func([]*redis.Client, *scenario) (locker, error) {
	return func(clients []*redis.Client, _ *scenario) (locker, error) {
		pools := make([]redsyncredis.Pool, len(clients))
		for i, c := range clients {
			pools[i] = goredis.NewPool(c)
		}
		opts := []redsync.Option{redsync.WithExpiry(ttl)}
		if failFast {
			opts = append(opts, redsync.WithFailFast(true))
		}
		return redsyncLocker{rs: redsync.New(pools...), opts: opts}, nil
	}
}

func (r redsyncLocker) lock(ctx context.Context, key string) (any, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (r redsyncLocker) unlock(ctx context.Context, h any) error {
	ok, err := h.(*redsync.Mutex).UnlockContext(ctx)
	if err == nil && !ok {
		err = errNotReleased
	}
	return err
}

func (redsyncLocker) close(context.Context) error { return nil }

// ---- redislock: single node; no retry by default, redlock's backoff bounds
// when contended (its ExponentialBackoff keeps state, so one per call).

type redislockLocker struct {
	c         *redislock.Client
	contended bool
}

func openRedislock(clients []*redis.Client, sc *scenario) (locker, error) {
	if len(clients) != 1 {
		return nil, fmt.Errorf("redislock runs on one node, not %d", len(clients))
	}
	return redislockLocker{c: redislock.New(clients[0]), contended: sc.kind == contention}, nil
}

func (r redislockLocker) lock(ctx context.Context, key string) (any, error) {
	var opt *redislock.Options
	if r.contended {
		opt = &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(contendedRetry, contendedMax)}
		// Without a deadline Obtain would give up after one TTL; the others
		// wait until ctx ends.
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Hour)
			defer cancel()
		}
	}
	return r.c.Obtain(ctx, key, ttl, opt)
}

func (r redislockLocker) unlock(ctx context.Context, h any) error {
	return h.(*redislock.Lock).Release(ctx)
}

func (redislockLocker) close(context.Context) error { return nil }

// ---- the floor: the least any Redlock implementation can do per
// Acquire+Release: two parallel PING fan-outs (one for acquire, one for
// release), each returning once a quorum has answered. The per-node deadline
// and the background completion of late nodes mirror redlock's defaults; on
// links the deadline is longer by the slowest link's round trip, as a lock
// that knew its network would set it (at 50 ms, over 60 ms links, every
// fan-out would fail).

type floorLocker struct{ f *pingfloor.Floor }

func openFloor(clients []*redis.Client, sc *scenario) (locker, error) {
	return floorLocker{pingfloor.New(clients, floorTimeout+sc.slowestLink())}, nil
}

func (f floorLocker) lock(ctx context.Context, _ string) (any, error) {
	return nil, f.f.FanOut(ctx)
}

func (f floorLocker) unlock(ctx context.Context, _ any) error { return f.f.FanOut(ctx) }

// close waits for the PINGs still running after their fan-out returned.
func (f floorLocker) close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		f.f.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ---- the bare floor: two fan-outs of one fresh goroutine per node sending
// PING, the caller waiting on a channel for a quorum; nothing else. With slow
// nodes it runs on the fast ones only (it has no deadline), with the quorum
// of the whole set: the floor of the fast quorum.

type bareLocker struct{ b *pingfloor.Bare }

func openBare(clients []*redis.Client, sc *scenario) (locker, error) {
	return bareLocker{pingfloor.NewBare(clients[sc.slow:], len(clients)/2+1)}, nil
}

func (f bareLocker) lock(context.Context, string) (any, error) { return nil, f.b.FanOut() }
func (f bareLocker) unlock(context.Context, any) error         { return f.b.FanOut() }
func (bareLocker) close(context.Context) error                 { return nil }

// ---- minimal locks: the least a correct lock sends, each fan-out one fresh
// goroutine per node and a channel, like the bare floor, no deadlines, no
// rollback. Acquire is SET NX PX with a random token (or, in
// min-script-script, a script like redlock's); release is either the
// token-checked delete script (the least a correct release sends on Redis 7,
// which has no compare-and-delete command) or a plain DEL (not correct: it
// would delete another holder's key; it shows what the script round costs).

var (
	minReleaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	// minAcquireScript does what redlock's acquire.lua does when the key is
	// absent: GET, then SET PX.
	minAcquireScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

	// minDeadlineAcquireScript and minDeadlineReleaseScript are the least
	// a lock sends that refuses every late copy of its writes by a deadline
	// on the node's clock (docs/late-writes.md): an acquire carries the
	// node-clock millisecond after which it changes nothing (ARGV[3]) and
	// is refused by the lock's own refusal key (KEYS[2]); a release
	// deletes its value and, while a copy of its acquire may still land,
	// leaves that refusal until the deadline (PXAT): one key a lock, so no
	// cap. No waiting room, generations, fences or chains: redlock's fast
	// paths without what its other features need, the price of the
	// property alone.
	minDeadlineAcquireScript = redis.NewScript(`local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[3]) then return 0 end
local r = redis.call('MGET', KEYS[1], KEYS[2])
if r[1] or r[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)
	minDeadlineReleaseScript = redis.NewScript(`local n = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then n = redis.call('DEL', KEYS[1]) end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) <= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '!', 'PXAT', ARGV[2])
end
return n`)
)

// minDeadlineWindow is how long after it is sent the minimal deadline
// lock's acquire may still change a node: the per-node deadline, as
// redlock's for the TTL of the harness.
const minDeadlineWindow = floorTimeout

type minRelease int

const (
	releaseScript minRelease = iota
	releaseDel
	acquireScriptReleaseScript // acquire with a script too, as redlock does
	deadlines                  // acquire and release with minDeadline*Script
)

type minimalLocker struct {
	nodes   []*redis.Client
	release minRelease
	// skew is each node's clock less the harness's, in milliseconds, read
	// once at open (deadlines only).
	skew []int64
	// window is how long after it is sent an acquire may still change a
	// node (deadlines only): minDeadlineWindow, and on links longer by the
	// slowest one's round trip, as floor-ctx's deadline is; at 50 ms an
	// acquire over a 60 ms link would land past its deadline every time.
	window time.Duration
}

type minimalLock struct {
	key, token string
	deadline   []int64 // each node's deadline of the acquire (deadlines only)
}

func openMinimal(release minRelease) func([]*redis.Client, *scenario) (locker, error) {
	return func(clients []*redis.Client, sc *scenario) (locker, error) {
		m := &minimalLocker{nodes: clients, release: release, window: minDeadlineWindow + sc.slowestLink()}
		if release == deadlines {
			for _, c := range clients {
				// Read twice, the second on a warm connection: the first
				// pays its set-up, three round trips over a link.
				var skew int64
				for range 2 {
					before := time.Now()
					now, err := c.Time(context.Background()).Result()
					if err != nil {
						return nil, err
					}
					mid := before.Add(time.Since(before) / 2)
					skew = now.UnixMilli() - mid.UnixMilli()
				}
				m.skew = append(m.skew, skew)
			}
		}
		return m, nil
	}
}

// refusalKey is the key that refuses the late writes of the lock whose
// token is token.
func refusalKey(key, token string) string { return key + ":!" + token }

func (m *minimalLocker) fanOut(call func(c *redis.Client) bool) bool {
	return m.fanOutIndexed(func(_ int, c *redis.Client) bool { return call(c) })
}

func (m *minimalLocker) fanOutIndexed(call func(i int, c *redis.Client) bool) bool {
	out := make(chan bool, len(m.nodes))
	for i, c := range m.nodes {
		go func() { out <- call(i, c) }()
	}
	q, ok := len(m.nodes)/2+1, 0
	for pending := len(m.nodes); pending > 0 && ok < q && ok+pending >= q; pending-- {
		if <-out {
			ok++
		}
	}
	return ok >= q
}

func (m *minimalLocker) lock(ctx context.Context, key string) (any, error) {
	l := &minimalLock{key: key, token: rand.Text()}
	set := func(_ int, c *redis.Client) bool { return c.SetNX(ctx, key, l.token, ttl).Val() }
	switch m.release {
	case acquireScriptReleaseScript:
		set = func(_ int, c *redis.Client) bool {
			n, _ := minAcquireScript.Run(ctx, c, []string{key}, l.token, ttl.Milliseconds()).Int()
			return n == 1
		}
	case deadlines:
		sent := time.Now().Add(m.window).UnixMilli()
		l.deadline = make([]int64, len(m.nodes))
		for i := range m.nodes {
			l.deadline[i] = sent + m.skew[i]
		}
		set = func(i int, c *redis.Client) bool {
			n, _ := minDeadlineAcquireScript.Run(ctx, c, []string{key, refusalKey(key, l.token)}, l.token, ttl.Milliseconds(), l.deadline[i]).Int()
			return n == 1
		}
	}
	if !m.fanOutIndexed(set) {
		return nil, errNotAcquired
	}
	return l, nil
}

func (m *minimalLocker) unlock(ctx context.Context, h any) error {
	l := h.(*minimalLock)
	var ok bool
	switch m.release {
	case releaseDel:
		ok = m.fanOut(func(c *redis.Client) bool { return c.Del(ctx, l.key).Val() == 1 })
	case deadlines:
		ok = m.fanOutIndexed(func(i int, c *redis.Client) bool {
			n, _ := minDeadlineReleaseScript.Run(ctx, c, []string{l.key, refusalKey(l.key, l.token)}, l.token, l.deadline[i]).Int()
			return n == 1
		})
	default:
		ok = m.fanOut(func(c *redis.Client) bool {
			n, _ := minReleaseScript.Run(ctx, c, []string{l.key}, l.token).Int()
			return n == 1
		})
	}
	if !ok {
		return errNotReleased
	}
	return nil
}

func (*minimalLocker) close(context.Context) error { return nil }

var (
	errNotReleased = errors.New("unlock reported no quorum")
	errNotAcquired = errors.New("lock reported no quorum")
)
