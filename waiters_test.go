package redlock_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

// slowRetry would make a waiter sleep for seconds between attempts: a test
// that sees it acquire sooner saw it woken.
var slowRetry = redlock.WithRetry(redlock.ExponentialBackoff(3*time.Second, 3*time.Second))

// TestWaitersNeverOverlap: goroutines of two Clients contend for one key
// with a short critical section; no two are ever inside it at once, and
// every one gets its turn.
func TestWaitersNeverOverlap(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	clients := []*redlock.Client{e.client(), e.client()}
	key := newKey(t)
	const perGoroutine, goroutines = 15, 8
	var inside, most atomic.Int32
	var acquired atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		c := clients[g%len(clients)]
		wg.Go(func() {
			for range perGoroutine {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				l, err := c.Acquire(ctx, key, 5*time.Second)
				cancel()
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				acquired.Add(1)
				assert.NoError(t, l.Release(context.Background()))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "two holders inside at once")
	assert.Equal(t, int64(perGoroutine*goroutines), acquired.Load())
}

// failedAttempts counts the failed attempts of a Client's Acquire and
// TryAcquire calls, through its hooks: pass the option to the Client.
func failedAttempts() (redlock.Option, *atomic.Int32) {
	var n atomic.Int32
	return redlock.WithHooks(redlock.Hooks{Attempt: func(a redlock.Event) {
		if a.Err != nil {
			n.Add(1)
		}
	}}), &n
}

// awaitWaiting waits until a waiter whose failed attempts count counts has
// subscribed to key's release channel and been refused again after the
// subscription took effect: it now waits for a release hint (or its
// fallback), and a release is what wakes it.
func (e *env) awaitWaiting(key string, count *atomic.Int32) {
	e.t.Helper()
	e.awaitSubscribers(key, 1)
	require.Eventually(e.t, func() bool { return count.Load() >= 2 }, 10*time.Second, time.Millisecond,
		"the waiter was not refused after subscribing (%d failed attempts)", count.Load())
}

// TestWaitersWokenByRelease: a waiter in another Client (another process)
// acquires as soon as the holder releases, not after its retry wait.
func TestWaitersWokenByRelease(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	counting, failed := failedAttempts()
	holder, waiter := e.client(), e.client(slowRetry, counting)
	ctx := t.Context()
	key := newKey(t)

	h, err := holder.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if assert.NoError(t, err) {
			got <- time.Now()
			assert.NoError(t, l.Release(context.Background()))
		}
	}()
	e.awaitWaiting(key, failed)
	released := time.Now()
	require.NoError(t, h.Release(ctx))
	select {
	case at := <-got:
		t.Logf("acquired %v after the release", at.Sub(released))
		assert.Less(t, at.Sub(released), time.Second, "the waiter was not woken by the release")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
}

// TestWaitersLocalFIFO: within one Client, waiters for a key get it in the
// order they came, each woken by the previous one's Release.
func TestWaitersLocalFIFO(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	first, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, 10*time.Second)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Release(context.Background()))
		})
		time.Sleep(50 * time.Millisecond) // arrive in order
	}
	start := time.Now()
	require.NoError(t, first.Release(ctx))
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
	assert.Less(t, time.Since(start), 2*time.Second, "the waiters were not woken by the releases")
}

// TestWaitersLoseRaceKeepSubscription: a woken waiter that loses the race
// to another client goes back to waiting on its one subscription per node.
// The rival talks to the nodes directly and the waiter through the proxies,
// which delay its commands once it waits: the rival, taking the key back
// as soon as it released it, is always ahead of the woken waiter.
func TestWaitersLoseRaceKeepSubscription(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	direct := make([]redis.UniversalClient, len(e.direct))
	for i, d := range e.direct {
		direct[i] = d
	}
	rival, err := redlock.New(direct, redlock.WithNodeTimeout(testNodeTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { e.settle(rival) })
	counting, failed := failedAttempts()
	waiter := e.client(slowRetry, counting)
	ctx := t.Context()
	key := newKey(t)
	subsBefore := make([]int, len(e.direct))
	for i, d := range e.direct {
		subsBefore[i] = nodetest.CommandCalls(t, ctx, d)["subscribe"]
	}

	h, err := rival.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	e.awaitWaiting(key, failed)
	for _, p := range e.proxies {
		p.SetDelay(200 * time.Millisecond)
	}
	lost := 0
	for range 5 {
		// Release and take it straight back: the rival is ahead of the
		// waiter's wake-up, whose attempt is then refused.
		before := failed.Load()
		require.NoError(t, h.Release(ctx))
		h, err = rival.TryAcquire(ctx, key, 10*time.Second)
		if err != nil { // the waiter won this one: then it is done
			h = nil
			break
		}
		require.Eventually(t, func() bool { return failed.Load() > before || len(done) > 0 }, 10*time.Second,
			time.Millisecond, "the waiter did not try again after the release")
		if failed.Load() == before { // it won, and released, before the rival came back
			break
		}
		lost++
	}
	e.resetFaults()
	if h != nil {
		require.NoError(t, h.Release(ctx))
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	t.Logf("the waiter lost %d races", lost)
	require.Positive(t, lost, "the waiter never lost a race: the test saw nothing")
	for i, d := range e.direct {
		assert.Equal(t, 1, nodetest.CommandCalls(t, ctx, d)["subscribe"]-subsBefore[i], "node %d: subscriptions", i)
	}
}

// TestWaitersCrashedHolder: a holder that never releases costs a waiter at
// most its TTL and one capped wait.
func TestWaitersCrashedHolder(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	crashed, waiter := e.client(), e.client()
	ctx := t.Context()
	key := newKey(t)
	const ttl = time.Second

	_, err := crashed.Acquire(ctx, key, ttl)
	require.NoError(t, err)
	start := time.Now()
	l, err := waiter.Acquire(ctx, key, ttl)
	require.NoError(t, err)
	took := time.Since(start)
	t.Logf("acquired %v after the crash", took)
	assert.Less(t, took, ttl+redlock.DefaultRetryMax+300*time.Millisecond)
	require.NoError(t, l.Release(ctx))
}

// TestWaitersCancelled: a waiter whose context ends leaves the queue at
// once, the next one moves up, and the last one out leaves no subscription
// (and, by TestMain's goleak, no goroutine once the Client is closed).
func TestWaitersCancelled(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	h, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(short, key, 10*time.Second)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A waiter queued behind a cancelled one is not stuck behind it.
	queued, cancelQueued := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := c.Acquire(queued, key, 10*time.Second); first <- err }()
	time.Sleep(100 * time.Millisecond)
	second := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		second <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancelQueued()
	require.ErrorIs(t, <-first, context.Canceled)
	require.NoError(t, h.Release(ctx))
	require.NoError(t, <-second)

	channel := "redlock:released:" + key
	require.Eventually(t, func() bool {
		for _, d := range e.direct {
			n, err := d.PubSubNumSub(ctx, channel).Result()
			if err != nil || n[channel] != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "a subscription outlived its waiters")
}

// TestWaitersWithoutPubSub: with an ACL that refuses pub/sub, waiting falls
// back to polling bounded by the holder's TTL and the retry wait, and
// releases still work.
func TestWaitersWithoutPubSub(t *testing.T) {
	s := redistest.StartT(t, 1)[0]
	ctx := t.Context()
	require.NoError(t, s.Client().Do(ctx, "ACL", "SETUSER", "locker", "on", ">pw", "resetchannels", "-@all",
		"+evalsha", "+eval", "+get", "+set", "+pexpire", "+pttl", "+del", "+time", "~lock:*").Err())
	nodes := func() []redis.UniversalClient {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "locker", Password: "pw", ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		return []redis.UniversalClient{rc}
	}
	newClient := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(nodes(), opts...)
		require.NoError(t, err)
		closeAtCleanup(t, c)
		return c
	}
	holder := newClient()
	waiter := newClient(redlock.WithRetry(redlock.ExponentialBackoff(50*time.Millisecond, 100*time.Millisecond)))
	key := "lock:" + newKey(t)

	h, err := holder.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	require.NoError(t, h.Release(ctx), "the release script must not fail on a refused PUBLISH")
	select {
	case err := <-got:
		require.NoError(t, err)
		assert.Less(t, time.Since(released), time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired without pub/sub")
	}
}

func TestAcquireWaits(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)

	// While held: Acquire gives up when ctx ends, with both causes.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(short, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A limited retry policy gives up on its own.
	limited, err := redlock.New(e.nodes, redlock.WithNodeTimeout(testNodeTimeout), redlock.WithRetry(redlock.LimitRetry(redlock.ExponentialBackoff(time.Millisecond, 5*time.Millisecond), 3)))
	require.NoError(t, err)
	t.Cleanup(func() { e.settle(limited) })
	_, err = limited.Acquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	// Acquire gets the lock once it is released.
	got := make(chan *redlock.Lock, 1)
	go func() {
		l2, err := c.Acquire(ctx, key, time.Minute)
		assert.NoError(t, err)
		got <- l2
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, l.Release(ctx))
	l2 := <-got
	require.NotNil(t, l2)
	require.NoError(t, l2.Release(ctx))
}

// awaitSubscribers waits until every node counts n subscribers of key's
// release channel: the waiters of n Clients watch it.
func (e *env) awaitSubscribers(key string, n int64) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for _, d := range e.direct {
			subs, err := d.PubSubNumSub(context.Background(), "redlock:released:"+key).Result()
			if err != nil || subs["redlock:released:"+key] != n {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the waiters did not subscribe")
}

// commandTotals sums each command's calls over every node.
func (e *env) commandTotals() map[string]int {
	e.t.Helper()
	out := make(map[string]int)
	for _, d := range e.direct {
		for k, v := range nodetest.CommandCalls(e.t, context.Background(), d) {
			out[k] += v
		}
	}
	return out
}

// monitor watches every node (MONITOR, on connections of its own) and
// returns a function that stops watching and returns how many times the
// nodes ran each command meanwhile: an EVALSHA as "evalsha <hash>", a
// command of a script as "lua <COMMAND> <first key>".
func (e *env) monitor() func() map[string]int {
	e.t.Helper()
	var mu sync.Mutex
	calls := make(map[string]int)
	var conns []net.Conn
	var wg sync.WaitGroup
	evalsha := regexp.MustCompile(`"evalsha" "([0-9a-f]{40})"`)
	lua := regexp.MustCompile(`\[\d+ lua\] "(\w+)"(?: "([^"]*)")?`)
	for _, s := range e.servers {
		conn, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
		require.NoError(e.t, err)
		conns = append(conns, conn)
		rd := bufio.NewReader(conn)
		_, err = conn.Write([]byte("MONITOR\r\n"))
		require.NoError(e.t, err)
		line, err := rd.ReadString('\n')
		require.NoError(e.t, err)
		require.Equal(e.t, "+OK\r\n", line)
		wg.Go(func() {
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return
				}
				mu.Lock()
				if m := evalsha.FindStringSubmatch(line); m != nil {
					calls["evalsha "+m[1]]++
				} else if m := lua.FindStringSubmatch(line); m != nil {
					calls["lua "+strings.ToUpper(m[1])+" "+m[2]]++
				}
				mu.Unlock()
			}
		})
	}
	return func() map[string]int {
		time.Sleep(50 * time.Millisecond) // the monitors' last lines
		for _, c := range conns {
			_ = c.Close()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return calls
	}
}

// TestHandoverOneRound: when the next waiter is an Acquire of the same
// Client, Release hands it the key in the same round: one script per node
// for the release and the acquire together, no announcement, and the
// waiter's own token on every node, valid for its own TTL.
func TestHandoverOneRound(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 4*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond) // its attempt after subscribing was refused: it waits

	before := e.commandTotals()
	watch := e.monitor()
	start := time.Now()
	require.NoError(t, a.Release(ctx))
	var b *redlock.Lock
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	require.NotNil(t, b)
	e.awaitHolders(key, b.Token()) // the rounds return at a quorum
	after := e.commandTotals()
	ran := watch()
	for k, v := range after {
		if v != before[k] {
			t.Logf("%s: %d", k, v-before[k])
		}
	}
	for k, v := range ran {
		t.Logf("monitor: %s: %d", k, v)
	}
	// The waiter's entry in the key's waiting room is renewed every 250 ms
	// and taken out once it holds (announce.go): apart from those, one
	// script per node, the handover, which neither deletes the key nor
	// announces a release.
	announce, handover := "evalsha "+string(scriptSHA(t, "announce.lua")), "evalsha "+string(scriptSHA(t, "handover.lua"))
	assert.Equal(t, 3, ran[handover], "the handover: one script per node")
	for k, v := range ran {
		if strings.HasPrefix(k, "evalsha ") && k != handover && k != announce {
			t.Errorf("%d calls of another script (%s): release and acquire took more than one script per node", v, k)
		}
	}
	assert.Zero(t, ran["lua DEL "+key], "a handover deleted the key")
	assert.Zero(t, after["publish"]-before["publish"], "a handover announced a release")
	assert.WithinRange(t, b.Until(), start.Add(3*time.Second), start.Add(4*time.Second))

	require.NoError(t, b.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
	assert.NoError(t, a.Release(ctx), "a later Release of the handed-over lock reports the first one's outcome")
}

// TestHandoverStreakAcrossClients: while a waiter of another Client
// (another process) watches the key, a Client hands the key to its own
// waiters at most three times in a row; the next Release announces it and
// the waiters of both Clients contend, so the other Client's waiter gets
// its chance after each streak.
func TestHandoverStreakAcrossClients(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	mine, other := e.client(slowRetry), e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := mine.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var order []string
	var published []int // announcements so far, at each acquisition
	take := func(c *redlock.Client, name string) {
		l, err := c.Acquire(ctx, key, 10*time.Second)
		if !assert.NoError(t, err) {
			return
		}
		mu.Lock()
		order = append(order, name)
		published = append(published, e.commandTotals()["publish"])
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		assert.NoError(t, l.Release(context.Background()))
	}
	for range 5 {
		wg.Go(func() { take(mine, "mine") })
	}
	e.awaitSubscribers(key, 1)
	wg.Go(func() { take(other, "other") })
	e.awaitSubscribers(key, 2)
	time.Sleep(200 * time.Millisecond) // every waiter has been refused and waits

	before := e.commandTotals()
	require.NoError(t, a.Release(ctx))
	wg.Wait()
	t.Logf("order after the first release: %v", order)
	require.Len(t, order, 6)
	assert.Equal(t, []string{"mine", "mine", "mine"}, order[:3], "the first releases hand over within the Client")
	assert.Equal(t, before["publish"], published[2], "a release of the streak was announced")
	assert.GreaterOrEqual(t, published[3]-before["publish"], 3, "the release after the streak was not announced on every node")
	assert.Contains(t, order, "other")
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestHandoverWithoutQuorum: another holder's value replaced the leaving
// holder's on a majority of nodes (a's had expired there, say): the waiter
// is not handed a lock it would hold on one node, its value there is rolled
// back, the Release reports what the nodes said, and the waiter takes the
// key once the other holder's value expires.
func TestHandoverWithoutQuorum(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry)
	ctx := t.Context()
	key := newKey(t)

	a, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitHolders(key, a.Token())
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, key, 4*time.Second)
		assert.NoError(t, err)
		got <- l
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond)
	for _, i := range []int{0, 1} {
		require.NoError(t, e.direct[i].Set(ctx, key, "intruder.1", 700*time.Millisecond).Err())
	}

	released := time.Now()
	err = a.Release(ctx)
	require.ErrorIs(t, err, redlock.ErrNotHeld)
	for _, ne := range nodeErrors(err) {
		// Node 2 took the waiter's value and refuses the delete; the answer
		// of node 1, which the delete round may not wait for then, counts.
		assert.ErrorIs(t, ne, redlock.ErrHeldByOther, "node %d: the intruder's value, said by the node", ne.Node)
	}
	var b *redlock.Lock
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never acquired")
	}
	assert.Greater(t, time.Since(released), 500*time.Millisecond, "acquired while the intruder held a majority")
	e.awaitHolders(key, b.Token())
	require.NoError(t, b.Release(ctx))
	e.eventuallyNoKey(key, 5*time.Second)
}

// TestHandoverWaiterCancelled: waiters whose contexts end at random moments,
// some while a Release hands them the key, leave no key behind and never
// hold at once.
func TestHandoverWaiterCancelled(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	key := newKey(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside := 0
	for g := range 6 {
		wg.Go(func() {
			for i := range 30 {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(1+(g*7+i*3)%9)*time.Millisecond)
				l, err := c.Acquire(ctx, key, 5*time.Second)
				cancel()
				if err != nil {
					assert.ErrorIs(t, err, redlock.ErrNotAcquired)
					continue
				}
				mu.Lock()
				inside++
				assert.Equal(t, 1, inside, "two holders at once")
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				inside--
				mu.Unlock()
				assert.NoError(t, l.Release(context.Background()))
			}
		})
	}
	wg.Wait()
	e.settle(c)
	e.requireNoKey(key)
}

// TestHandoverToWaiterThatGaveUp: the waiter's context ends while a
// Release is handing it the key (the handover scripts are held back on
// their way to the nodes). The Release still succeeds, the waiter's Acquire
// fails with its context's error, and the key it was handed is deleted, not
// left for its TTL.
func TestHandoverToWaiterThatGaveUp(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client(slowRetry, redlock.WithNodeTimeout(3*time.Second))
	ctx := t.Context()
	key := newKey(t)
	sum := sha1.Sum([]byte(nodetest.ScriptSource(t, "handover.lua")))

	a, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		l, err := c.Acquire(wctx, key, time.Minute)
		if err == nil {
			_ = l.Release(context.Background())
		}
		failed <- err
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond)

	for _, p := range e.proxies {
		p.HoldNext([]byte(hex.EncodeToString(sum[:])))
	}
	released := make(chan error, 1)
	go func() { released <- a.Release(context.Background()) }()
	require.Eventually(t, func() bool {
		for _, p := range e.proxies {
			if p.HeldCount() == 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the handover was not sent")
	cancel()
	time.Sleep(50 * time.Millisecond) // the waiter has seen its context end
	for _, p := range e.proxies {
		p.ReleaseHeld()
	}
	require.NoError(t, <-released)
	err = <-failed
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.ErrorIs(t, err, context.Canceled)
	e.eventuallyNoKey(key, 5*time.Second)
}
