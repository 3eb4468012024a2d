package engine

import (
	"context"
	"strings"
	"testing"
	"time"
)

// writeLosingFirst sends generation 1 of prefix's Lock to key on both of
// e's two nodes, the first node's reply lost (the write lands), and waits
// until both calls returned.
func writeLosingFirst(t *testing.T, e *laneNodes, key, prefix string) *Lanes {
	t.Helper()
	seq := NewLanes(2)
	var wlog replyLog
	e.proxies[0].SetDropReplies(true)
	e.launch(seq, writeSpec(key, utValue(prefix, 1), 300*time.Millisecond, &wlog))
	waitFor(t, "the write's calls returning", func() bool { return seq.Unsettled() == nil })
	e.proxies[0].SetDropReplies(false)
	for i := range 2 {
		if got := e.get(i, key); got != prefix+"1" {
			t.Fatalf("node %d holds %q; want the write landed", i, got)
		}
	}
	return seq
}

// tombDelete deletes any generation of prefix's values on key, leaving
// what refuses its writes up to generation tomb, and waits for it to
// settle.
func tombDelete(t *testing.T, e *laneNodes, seq *Lanes, key, prefix string, tomb uint64) []Reply {
	t.Helper()
	var dlog replyLog
	spec := deleteSpec(key, prefix, waitLimit, &dlog)
	spec.Op = deleteOp(key, utValue(prefix, 0), 0, tomb)
	e.launch(seq, spec)
	reps := dlog.waitN(t, 2, "the delete's replies")
	waitFor(t, "the delete settling", func() bool { return seq.Unsettled() == nil })
	return reps
}

// TestDeleteLeavesTomb: a delete round leaves a tombstone on every node,
// whether the write's reply there was lost or came, and whether the delete
// finds the key absent or ours: a copy of a write may land later than its
// reply says. The engine sends the op's arguments as they are, the same
// to every node.
func TestDeleteLeavesTomb(t *testing.T) {
	e := newLaneNodes(t, 2, true)
	ctx := context.Background()

	t.Run("key absent", func(t *testing.T) {
		const key, prefix = "ut:tomb-absent", "utT1."
		seq := writeLosingFirst(t, e, key, prefix)
		for i := range 2 {
			e.bed.Direct[i].Del(ctx, key) // expired meanwhile
		}
		tombDelete(t, e, seq, key, prefix, 1)
		for i := range 2 {
			if got := e.get(i, key); got != tombstoneOf(prefix, 1) {
				t.Fatalf("node %d holds %q; want the tombstone %q", i, got, tombstoneOf(prefix, 1))
			}
			if ttl := e.bed.Direct[i].PTTL(ctx, key).Val(); ttl <= 0 || ttl > tombstoneTTL {
				t.Fatalf("the tombstone on node %d lives %v; want at most %v", i, ttl, tombstoneTTL)
			}
		}
	})
	t.Run("key there", func(t *testing.T) {
		const key, prefix = "ut:tomb-there", "utT2."
		seq := writeLosingFirst(t, e, key, prefix)
		for _, r := range tombDelete(t, e, seq, key, prefix, 1) {
			if r.Status != OK {
				t.Fatalf("the delete on node %d: %+v; want the key deleted", r.Node, r)
			}
		}
		for i := range 2 {
			if got := e.get(i, key); got != tombstoneOf(prefix, 1) {
				t.Fatalf("node %d holds %q after the delete; want the tombstone %q", i, got, tombstoneOf(prefix, 1))
			}
		}
	})
}

// TestTombKeepsLateWriteOut: a write of the Lock held in the network past
// its round; the delete that follows finds the key absent there and leaves
// a tombstone, which refuses the write when it lands at last: the key is
// not left behind for the write's TTL. The other node, whose write was
// confirmed, gets one too, in place of its value.
func TestTombKeepsLateWriteOut(t *testing.T) {
	e := newLaneNodes(t, 2, true)
	const key, prefix = "ut:tomb-late", "utL."
	seq := NewLanes(2)
	v := utValue(prefix, 1)
	var wlog replyLog
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, 200*time.Millisecond, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	waitFor(t, "the write's calls returning", func() bool { return seq.Unsettled() == nil })

	tombDelete(t, e, seq, key, prefix, v.gen)
	for i := range 2 {
		if got := e.get(i, key); got != tombstoneOf(prefix, v.gen) {
			t.Fatalf("node %d holds %q after the delete; want the tombstone", i, got)
		}
	}
	calls := e.evalshaCalls(0)
	e.proxies[0].ReleaseHeld()
	waitFor(t, "the held write running on the node", func() bool { return e.evalshaCalls(0) > calls })
	if got := e.get(0, key); !strings.HasPrefix(got, "!") {
		t.Fatalf("the write that landed after the delete left %q", got)
	}
}
