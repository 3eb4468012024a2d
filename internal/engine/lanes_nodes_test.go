package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/testbed"
)

// laneNodes is a node set over n real redis-servers, each behind a fault
// proxy (internal/testbed), with direct clients to see what the servers
// hold. Rounds are launched on it directly, with Lanes of the test's.
type laneNodes struct {
	t       *testing.T
	p       *Set
	bed     *testbed.Bed
	proxies []*faultproxy.Proxy
}

// newLaneNodes starts n servers. bounded says whether the lock clients end
// a call at its context's deadline (ContextTimeoutEnabled); otherwise a
// call is held until its reply comes, or go-redis's ReadTimeout, set long:
// the clients are unboundable, as a Cluster or Ring client is.
// The connections are open and the scripts loaded before a test injects a
// fault.
func newLaneNodes(t *testing.T, n int, bounded bool) *laneNodes {
	t.Helper()
	bed := testbed.Start(t, n)
	e := &laneNodes{t: t, bed: bed, proxies: bed.Proxies}
	clients := bed.Clients(func(o *redis.Options) {
		o.ContextTimeoutEnabled = bounded
		o.ReadTimeout = 10 * time.Second
	})
	if !bounded {
		for i, c := range clients {
			clients[i] = unboundable{c.(*redis.Client)}
		}
	}
	p, err := NewSet(clients, Config{Scripts: testScripts, Sources: testSources, KeyLife: testKeyLife, Timing: testTiming})
	require.NoError(t, err)
	require.NoError(t, p.Warm(t.Context(), func(i int, _ string, err error) error { return err }))
	t.Cleanup(func() {
		bed.ResetFaults()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		p.Life.Shut()
		select {
		case <-p.Life.Idle():
		case <-ctx.Done():
			t.Error("the background work did not end")
		}
	})
	e.p = p
	return e
}

// unboundable is a client the Set cannot bound (bound.go): not a
// *redis.Client, as a Cluster or Ring client without ContextTimeoutEnabled.
type unboundable struct{ *redis.Client }

// launch sends spec's round, as a public call of the Client would.
func (e *laneNodes) launch(seq *Lanes, spec Spec) *round {
	e.t.Helper()
	require.NoError(e.t, e.p.Life.BeginCall())
	defer e.p.Life.EndCall()
	r := e.p.Launch(context.Background(), seq, spec)
	require.NotNil(e.t, r)
	return r
}

// get returns key's value on node i, "" when absent.
func (e *laneNodes) get(i int, key string) string { return e.bed.Get(i, key) }

// lockValue is what node i holds under key, "" for nothing or a tombstone,
// which every lock reads as an absent key.
func (e *laneNodes) lockValue(i int, key string) string {
	if v := e.get(i, key); !strings.HasPrefix(v, "!") {
		return v
	}
	return ""
}

// evalshaCalls is how many EVALSHA commands node i has run.
func (e *laneNodes) evalshaCalls(i int) int { return e.bed.Calls(i, "evalsha") }

// waitFor fails t unless cond holds within waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// replyLog records the replies a round's note sees, retries included.
type replyLog struct {
	mu      sync.Mutex
	replies []Reply
}

func (l *replyLog) note(r Reply) {
	l.mu.Lock()
	l.replies = append(l.replies, r)
	l.mu.Unlock()
}

func (l *replyLog) get() []Reply {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.replies)
}

// waitN waits for at least n replies and returns them.
func (l *replyLog) waitN(t *testing.T, n int, what string) []Reply {
	t.Helper()
	waitFor(t, what, func() bool { return len(l.get()) >= n })
	return l.get()
}

// utValue is generation gen of a Lock whose prefix is prefix.
func utValue(prefix string, gen uint64) value {
	return value{prefixArg: prefix, holderArg: prefix, gen: gen, s: prefix + strconv.FormatUint(gen, 10)}
}

// writeSpec is an acquire of v on key, waited for up to wait, for 10 s.
func writeSpec(key string, v value, wait time.Duration, log *replyLog) Spec {
	return Spec{Effect: Write, Op: acquireOp(key, v, int64(10_000)), Wait: wait, TTL: 10 * time.Second, Note: log.note}
}

// deleteSpec deletes any generation of prefix's values on key, each try
// bounded by CallTimeout, and leaves what refuses its writes up to
// generation 9 (the tests write fewer).
func deleteSpec(key, prefix string, CallTimeout time.Duration, log *replyLog) Spec {
	return Spec{Effect: Delete, Op: deleteOp(key, utValue(prefix, 0), 0, 9), Wait: waitLimit, CallTimeout: CallTimeout, Note: log.note}
}

// TestLaneDeleteWaitsForWrite: a delete queued on a node behind a write of
// the same lock whose round is still on is not sent before the write
// returned, so it cannot be overtaken by it: the write lands, then the
// delete removes it.
func TestLaneDeleteWaitsForWrite(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	const key = "ut:waits"
	seq := NewLanes(1)
	v := utValue("utW.", 1)
	var wlog, dlog replyLog
	caught := e.proxies[0].HoldNext([]byte(v.s))
	w := e.launch(seq, writeSpec(key, v, waitLimit, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	d := e.launch(seq, deleteSpec(key, "utW.", waitLimit, &dlog))

	l := laneState(seq, 0)
	if l.current != &w.jobs[0] || !slices.Equal(l.queue, []*job{&d.jobs[0]}) {
		t.Fatalf("the delete does not wait behind the write: current is the write %v, queue %v", l.current == &w.jobs[0], l.queue)
	}
	if got := seq.Unsettled(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("unsettled with a write held in the network: %v", got)
	}
	e.proxies[0].ReleaseHeld()
	reps := dlog.waitN(t, 1, "the delete's reply")
	if reps[0].Status != OK {
		t.Fatalf("the delete ran before the write landed: %+v", reps[0])
	}
	e.requireWrittenThenGone(t, seq, &wlog, key)
}

// TestLaneGoesOnWithoutOverWrite: a lane does not wait for a write whose
// round is over: the delete queued behind it runs while the write is still
// in the network (unsettled keeps marking the node); the write, landing
// after the delete, is refused (by the delete's refusal, or past its
// deadline by itself), and nothing is left to delete again.
func TestLaneGoesOnWithoutOverWrite(t *testing.T) {
	e := newLaneNodes(t, 1, false) // the write's call is held until its reply comes
	const key = "ut:goes-on"
	seq := NewLanes(1)
	v := utValue("utG.", 1)
	var wlog, dlog replyLog
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, 200*time.Millisecond, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	e.launch(seq, deleteSpec(key, "utG.", waitLimit, &dlog))

	reps := dlog.waitN(t, 1, "the delete running once the write's round is over")
	if e.proxies[0].HeldCount() != 1 {
		t.Fatal("the write left the network before the delete ran")
	}
	if reps[0].Status != Refused || !errors.Is(reps[0].Err, errKeyAbsent) {
		t.Fatalf("the delete's reply: %+v; want the key absent", reps[0])
	}
	l := laneState(seq, 0)
	if l.strandedWrites != 1 {
		t.Fatalf("strandedWrites %d; want the write the lane went on without", l.strandedWrites)
	}
	if got := seq.Unsettled(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("unsettled while go-redis still holds a write: %v", got)
	}

	e.proxies[0].ReleaseHeld() // the write lands after the delete
	if got := wlog.waitN(t, 1, "the late write's reply"); got[0].Status != Refused || !errors.Is(got[0].Err, errLater) && !errors.Is(got[0].Err, ErrLate) {
		t.Fatalf("the write that landed after the delete: %+v; want refused, by the delete's refusal or its deadline", got[0])
	}
	if got := e.get(0, key); got != "" {
		t.Fatalf("the key is %q after the late write; want it absent", got)
	}
	waitFor(t, "the lane settling", func() bool { return seq.Unsettled() == nil })
	if got := dlog.get(); len(got) != 1 {
		t.Fatalf("the delete was sent again: %+v; the refused write left nothing to delete", got)
	}
}

// requireWrittenThenGone checks the end of a write followed by a delete on
// node 0: the write was confirmed, the key is gone, and the lane settles.
func (e *laneNodes) requireWrittenThenGone(t *testing.T, seq *Lanes, wlog *replyLog, key string) {
	t.Helper()
	if got := wlog.get(); len(got) != 1 || got[0].Status != OK {
		t.Fatalf("the write's reply: %+v", got)
	}
	if got := e.lockValue(0, key); got != "" {
		t.Fatalf("the key is %q after the delete", got)
	}
	waitFor(t, "the lane settling", func() bool { return seq.Unsettled() == nil })
}

// TestLaneDropsObsoleteCalls: behind a write whose round is over, a queued
// write whose own round is over is not sent (errNotSent), and of the
// deletes queued only the last is sent (the earlier ones are superseded):
// a stalled node costs the lock one call at a time.
func TestLaneDropsObsoleteCalls(t *testing.T) {
	e := newLaneNodes(t, 1, false)
	const key = "ut:drops"
	seq := NewLanes(1)
	v := utValue("utD.", 1)
	var wlog, w2log replyLog
	dlogs := make([]replyLog, 3)
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, 300*time.Millisecond, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	e.launch(seq, writeSpec(key, utValue("utD.", 2), 10*time.Millisecond, &w2log))
	for i := range dlogs {
		e.launch(seq, deleteSpec(key, "utD.", waitLimit, &dlogs[i]))
	}

	last := dlogs[2].waitN(t, 1, "the last delete")
	if last[0].Status != Refused || !errors.Is(last[0].Err, errKeyAbsent) {
		t.Fatalf("the last delete: %+v; want sent, the key absent", last[0])
	}
	if got := w2log.get(); len(got) != 1 || got[0].Err != errNotSent {
		t.Fatalf("the write whose round was over: %+v; want not sent", got)
	}
	for i := range 2 {
		if got := dlogs[i].get(); len(got) != 1 || got[0].Err != errSuperseded {
			t.Fatalf("delete %d, with a later one queued: %+v; want superseded", i, got)
		}
	}
	if e.proxies[0].HeldCount() != 1 || e.lockValue(0, key) != "" {
		t.Fatal("a dropped write reached the node")
	}
}

// TestLaneDeleteRetried: a delete that gets no reply is tried again, with
// backoff, counted in PendingCleanups and unsettled meanwhile, until the
// node answers and the key is gone.
func TestLaneDeleteRetried(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	const key = "ut:retried"
	seq := NewLanes(1)
	v := utValue("utR.", 1)
	var wlog, dlog replyLog
	e.launch(seq, writeSpec(key, v, waitLimit, &wlog))
	if got := wlog.waitN(t, 1, "the write"); got[0].Status != OK {
		t.Fatalf("the write: %+v", got[0])
	}
	e.proxies[0].SetBlackhole(true)
	e.launch(seq, deleteSpec(key, "utR.", 100*time.Millisecond, &dlog))
	reps := dlog.waitN(t, 2, "a second try of the delete")
	for _, r := range reps {
		if r.Status != Unknown {
			t.Fatalf("a reply through the blackhole: %+v", r)
		}
	}
	if n := e.p.nodes[0].pendingCleanups.Load(); n != 1 {
		t.Fatalf("PendingCleanups %d while the delete waits for another try; want 1", n)
	}
	if got := seq.Unsettled(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("unsettled while the delete is retried: %v", got)
	}
	e.proxies[0].SetBlackhole(false)
	waitFor(t, "the delete confirmed", func() bool {
		reps := dlog.get()
		return reps[len(reps)-1].Status == OK
	})
	if got := e.lockValue(0, key); got != "" {
		t.Fatalf("the key is %q after the delete was confirmed", got)
	}
	waitFor(t, "the lane settling", func() bool { return seq.Unsettled() == nil })
	if n := e.p.nodes[0].pendingCleanups.Load(); n != 0 {
		t.Fatalf("PendingCleanups %d after the delete was confirmed", n)
	}
}

// TestLaneDeleteNotRetriedPastExpiry: a delete without a reply is not tried
// again on a node where no write of the lock was ever sent: no key of ours
// can be there once its try is over, and the lane settles.
func TestLaneDeleteNotRetriedPastExpiry(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	seq := NewLanes(1)
	var dlog replyLog
	e.proxies[0].SetBlackhole(true)
	e.launch(seq, deleteSpec("ut:not-retried", "utN.", 100*time.Millisecond, &dlog))
	waitFor(t, "the lane settling", func() bool { return seq.Unsettled() == nil })
	if got := dlog.get(); len(got) != 1 || got[0].Status != Unknown {
		t.Fatalf("the delete's tries: %+v; want one, without a reply", got)
	}
	if n := e.p.nodes[0].pendingCleanups.Load(); n != 0 {
		t.Fatalf("PendingCleanups %d", n)
	}
}
