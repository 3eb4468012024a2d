package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// callKey marks a call's context with a label, which every event of the
// call must carry.
type callKey struct{}

// hookLog records each event a Client's hooks are told, by hook, in order.
type hookLog struct {
	mu     sync.Mutex
	events []hooked
}

type hooked struct {
	hook string
	ev   redlock.Event
}

func (h *hookLog) hooks() redlock.Hooks {
	rec := func(name string) func(redlock.Event) {
		return func(ev redlock.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, hooked{name, ev})
		}
	}
	return redlock.Hooks{
		Attempt: rec("attempt"), Done: rec("done"), NodeError: rec("node-error"), Rollback: rec("rollback"),
		CleanupRetry: rec("cleanup-retry"), CleanupAbandoned: rec("cleanup-abandoned"), Renewal: rec("renewal"),
		LockLost: rec("lock-lost"), CampaignStarted: rec("campaign-started"), Elected: rec("elected"),
		LeadershipEnded: rec("leadership-ended"), LeaderObserved: rec("leader-observed"),
	}
}

// all returns the events recorded so far.
func (h *hookLog) all() []hooked {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hooked(nil), h.events...)
}

// count returns how many events hook was told of.
func (h *hookLog) count(hook string) int {
	n := 0
	for _, ev := range h.all() {
		if ev.hook == hook {
			n++
		}
	}
	return n
}

// TestEventContext: every event carries the context of the call it
// belongs to, without its cancellation: a refused TryAcquire's attempt,
// refusals and rollback; KeepAlive's renewals and its lock's loss, which
// run in the background; a Release's node timeout, its retried delete, and
// the delete Close gave up later.
func TestEventContext(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	var h hookLog
	c, err := redlock.New(e.nodes, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithCleanupTimeout(300*time.Millisecond),
		redlock.WithHooks(h.hooks()))
	require.NoError(t, err)
	require.NoError(t, c.Warm(t.Context()))
	other := e.client()
	label := map[string]string{}
	call := func(name string) (context.Context, string, context.CancelFunc) {
		key := newKey(t) + ":" + name
		label[key] = name
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), callKey{}, name))
		return ctx, key, cancel
	}

	// A refused TryAcquire: its attempt, the refusals and the rollback.
	try, tryKey, cancelTry := call("try")
	held, err := other.TryAcquire(t.Context(), tryKey, time.Minute)
	require.NoError(t, err)
	_, err = c.TryAcquire(try, tryKey, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, held.Release(t.Context()))

	// KeepAlive's renewals, then the loss of its lock.
	keep, keepKey, cancelKeep := call("keep")
	l, err := c.Acquire(keep, keepKey, 900*time.Millisecond)
	require.NoError(t, err)
	kctx := l.KeepAlive(keep)
	require.Eventually(t, func() bool { return h.count("renewal") >= 1 }, 5*time.Second, 10*time.Millisecond)
	for i := range 2 {
		require.NoError(t, e.direct[i].Del(t.Context(), keepKey).Err())
	}
	select {
	case <-kctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not found lost")
	}
	_ = l.Release(keep)

	// A Release whose node does not answer: retried, then given up by Close.
	rel, relKey, cancelRel := call("release")
	l, err = c.Acquire(rel, relKey, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(relKey, l.Token())
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(rel))
	cancelRel() // the retries go on without the call's cancellation
	require.Eventually(t, func() bool { return h.count("cleanup-retry") >= 1 }, 5*time.Second, 10*time.Millisecond)
	cctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.ErrorIs(t, c.Close(cctx), redlock.ErrCleanupAbandoned)
	e.resetFaults()
	cancelTry()
	cancelKeep()

	for _, hook := range []string{"attempt", "done", "node-error", "rollback", "renewal", "lock-lost", "cleanup-retry", "cleanup-abandoned"} {
		assert.Positive(t, h.count(hook), "no %s event", hook)
	}
	for _, ev := range h.all() {
		want, ok := label[ev.ev.Key]
		if !ok {
			continue
		}
		require.NotNil(t, ev.ev.Context, "%s of %s: no context", ev.hook, want)
		assert.Equal(t, want, ev.ev.Context.Value(callKey{}), "%s of the %s call: another call's context", ev.hook, want)
		assert.NoError(t, ev.ev.Context.Err(), "%s of the %s call: the caller's cancellation came along", ev.hook, want)
	}
}

// TestElectionEvents: the hooks are told, in order and with the context
// of the call that started each, of the campaigns, their elections with
// their terms, the ends of the leaderships with their causes (a
// resignation, a loss), and the leaders an observer reports; the log says
// the same.
func TestElectionEvents(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	key := newKey(t)
	var ha, hb, ho hookLog
	var logs syncBuffer
	a := election(t, e.client(redlock.WithHooks(ha.hooks()),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))), key, 2*time.Second)
	b := election(t, e.client(redlock.WithHooks(hb.hooks())), key, 2*time.Second)
	o := election(t, e.client(redlock.WithHooks(ho.hooks())), key, 2*time.Second)
	ctx := t.Context()
	actx := context.WithValue(ctx, callKey{}, "a")
	bctx := context.WithValue(ctx, callKey{}, "b")
	octx, stop := context.WithCancel(context.WithValue(ctx, callKey{}, "o"))
	defer stop()

	la, err := a.Campaign(actx, "host-a")
	require.NoError(t, err)
	seen := o.Observe(octx)
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer did not see a")
	}
	elected := make(chan *redlock.Leadership, 1)
	go func() {
		lb, err := b.Campaign(bctx, "host-b")
		assert.NoError(t, err)
		elected <- lb
	}()
	require.Eventually(t, func() bool { return hb.count("campaign-started") == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, la.Resign(ctx))
	lb := <-elected
	require.NotNil(t, lb)
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer did not see b")
	}
	// b's leadership is lost: its key deleted on a majority of nodes.
	for i := range 2 {
		require.NoError(t, e.direct[i].Del(ctx, key).Err())
	}
	select {
	case <-lb.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("b's leadership was not found lost")
	}
	require.Eventually(t, func() bool { return ha.count("leadership-ended") == 1 && hb.count("leadership-ended") == 1 },
		5*time.Second, time.Millisecond)
	stop()
	for range seen {
	}
	_ = lb.Resign(ctx)

	election := func(h *hookLog, who string) []string {
		var out []string
		for _, ev := range h.all() {
			switch ev.hook {
			case "campaign-started", "elected", "leadership-ended", "leader-observed":
			default:
				continue
			}
			assert.Equal(t, key, ev.ev.Key, ev.hook)
			assert.Equal(t, who, ev.ev.Context.Value(callKey{}), "%s: not the context of the call that started it", ev.hook)
			s := ev.hook
			if ev.ev.Term > 0 {
				s += fmt.Sprintf(" %d", ev.ev.Term)
			}
			switch {
			case ev.ev.Err == nil:
			case errors.Is(ev.ev.Err, redlock.ErrReleased):
				s += " resigned"
			case errors.Is(ev.ev.Err, redlock.ErrLockLost):
				s += " lost"
			default:
				s += " " + ev.ev.Err.Error()
			}
			out = append(out, s)
		}
		return out
	}
	ta, tb := la.Term(), lb.Term()
	require.Greater(t, tb, ta)
	assert.Equal(t, []string{"campaign-started", fmt.Sprintf("elected %d", ta), fmt.Sprintf("leadership-ended %d resigned", ta)}, election(&ha, "a"))
	assert.Equal(t, []string{"campaign-started", fmt.Sprintf("elected %d", tb), fmt.Sprintf("leadership-ended %d lost", tb)}, election(&hb, "b"))
	assert.Equal(t, []string{fmt.Sprintf("leader-observed %d", ta), fmt.Sprintf("leader-observed %d", tb)}, election(&ho, "o"))
	for _, ev := range hb.all() {
		if ev.hook == "elected" {
			assert.Positive(t, ev.ev.Elapsed, "elected: the campaign's duration")
		}
	}

	out := logs.String()
	for _, want := range []string{`msg="redlock: campaign"`, `msg="redlock: elected"`, fmt.Sprintf("term=%d", ta),
		`level=INFO msg="redlock: leadership ended"`} {
		assert.Contains(t, out, want)
	}
}

// TestReleaseQuietWhereNothingOfOurs: a Release's delete on a node that
// holds nothing of the Lock's (a node the Lock never took, which another
// holder has or where the key is gone; a shared Lock's node where other
// readers stay) did its work there: no hook or log line reports it as a
// node that did not confirm. A node that does not answer still is.
func TestReleaseQuietWhereNothingOfOurs(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	var h hookLog
	var logs syncBuffer
	c := e.client(redlock.WithHooks(h.hooks()),
		redlock.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	other := e.client()
	ctx := t.Context()

	// A shared Lock that node 0 refused: another holder's value is there.
	shared := newKey(t) + ":shared"
	x, err := other.TryAcquire(ctx, shared, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(shared, x.Token())
	for i := 1; i < 3; i++ {
		require.NoError(t, e.direct[i].Del(ctx, shared).Err())
	}
	r, err := c.TryAcquire(ctx, shared, time.Minute, redlock.Shared())
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))

	// Readers together: one's Release leaves the other's entries.
	readers := newKey(t) + ":readers"
	r1, err := other.TryAcquire(ctx, readers, time.Minute, redlock.Shared())
	require.NoError(t, err)
	r2, err := c.TryAcquire(ctx, readers, time.Minute, redlock.Shared())
	require.NoError(t, err)
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r1.Release(ctx))

	// A Lock whose key is gone from node 0.
	gone := newKey(t) + ":gone"
	l, err := c.TryAcquire(ctx, gone, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(gone, l.Token())
	require.NoError(t, e.direct[0].Del(ctx, gone).Err())
	require.NoError(t, l.Release(ctx))
	quiet(t, c)

	for _, ev := range h.all() {
		if ev.hook == "node-error" {
			assert.NotEqual(t, "delete", ev.ev.Op, "a delete reported on node %d: %v", ev.ev.Node, ev.ev.Err)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		assert.False(t, strings.Contains(line, "did not confirm") && strings.Contains(line, "op=delete"), "logged: %s", line)
	}

	// A node that does not answer a delete may hold the value: reported.
	silent := newKey(t) + ":silent"
	l, err = c.TryAcquire(ctx, silent, time.Minute)
	require.NoError(t, err)
	e.awaitHolders(silent, l.Token())
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool {
		for _, ev := range h.all() {
			if ev.hook == "node-error" && ev.ev.Op == "delete" && ev.ev.Node == 2 && errors.Is(ev.ev.Err, redlock.ErrNoReply) {
				return true
			}
		}
		return false
	}, 10*time.Second, 10*time.Millisecond, "the silent node's delete was not reported")
	assert.Contains(t, logs.String(), "op=delete")
	e.resetFaults()
}
