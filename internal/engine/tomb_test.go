package engine

import (
	"context"
	"strings"
	"testing"
	"time"
)

// unsureOnFirst sends generation 1 of prefix's Lock to key on both of e's
// two nodes, the first node's reply lost (the write lands), and waits until
// both calls returned: lane 0 is unsure, lane 1 is not.
func unsureOnFirst(t *testing.T, e *laneNodes, key, prefix string) *Lanes {
	t.Helper()
	seq := NewLanes(2)
	var wlog replyLog
	e.proxies[0].SetDropReplies(true)
	e.launch(seq, writeSpec(key, utValue(prefix, 1), 300*time.Millisecond, &wlog))
	waitFor(t, "the write's calls returning", func() bool { return seq.Unsettled() == nil })
	e.proxies[0].SetDropReplies(false)
	if !seq.IsUnsure(0) || seq.IsUnsure(1) {
		t.Fatalf("unsure: %v, %v; want the node whose reply was lost only", seq.IsUnsure(0), seq.IsUnsure(1))
	}
	for i := range 2 {
		if got := e.get(i, key); got != prefix+"1" {
			t.Fatalf("node %d holds %q; want the write landed", i, got)
		}
	}
	return seq
}

// tombDelete deletes any generation of prefix's values on key, leaving a
// tombstone against generation tomb (0: none), and waits for it to settle.
func tombDelete(t *testing.T, e *laneNodes, seq *Lanes, key, prefix string, tomb uint64) []Reply {
	t.Helper()
	var dlog replyLog
	spec := deleteSpec(key, prefix, waitLimit, &dlog)
	spec.Tomb, spec.TombMs = tomb, tombstoneTTL.Milliseconds()
	e.launch(seq, spec)
	reps := dlog.waitN(t, 2, "the delete's replies")
	waitFor(t, "the delete settling", func() bool { return seq.Unsettled() == nil })
	return reps
}

// TestDeleteTombOnlyWhereUnsure: a delete round with tomb leaves a
// tombstone only on a node where a write of the Lock got no reply, whether
// it finds the key absent or ours; not where the write's reply came, and not
// without tomb.
func TestDeleteTombOnlyWhereUnsure(t *testing.T) {
	e := newLaneNodes(t, 2, true)
	ctx := context.Background()

	t.Run("key absent", func(t *testing.T) {
		const key, prefix = "ut:tomb-absent", "utT1."
		seq := unsureOnFirst(t, e, key, prefix)
		for i := range 2 {
			e.bed.Direct[i].Del(ctx, key) // expired meanwhile
		}
		tombDelete(t, e, seq, key, prefix, 1)
		if got := e.get(0, key); got != tombstoneOf(prefix, 1) {
			t.Fatalf("the unsure node holds %q; want the tombstone %q", got, tombstoneOf(prefix, 1))
		}
		if ttl := e.bed.Direct[0].PTTL(ctx, key).Val(); ttl <= 0 || ttl > tombstoneTTL {
			t.Fatalf("the tombstone lives %v; want at most %v", ttl, tombstoneTTL)
		}
		if got := e.get(1, key); got != "" {
			t.Fatalf("the node whose reply came holds %q; want nothing", got)
		}
	})
	t.Run("key there", func(t *testing.T) {
		// Where the write's reply was lost, an earlier write of the Lock
		// may still be in the network although this one landed: the delete
		// leaves a tombstone in its place. Where the reply came, it
		// deletes.
		const key, prefix = "ut:tomb-there", "utT2."
		seq := unsureOnFirst(t, e, key, prefix)
		for _, r := range tombDelete(t, e, seq, key, prefix, 1) {
			if r.Status != OK {
				t.Fatalf("the delete on node %d: %+v; want the key deleted", r.Node, r)
			}
		}
		if got := e.get(0, key); got != tombstoneOf(prefix, 1) {
			t.Fatalf("the unsure node holds %q after the delete; want the tombstone %q", got, tombstoneOf(prefix, 1))
		}
		if got := e.get(1, key); got != "" {
			t.Fatalf("the node whose reply came holds %q after the delete; want nothing", got)
		}
	})
	t.Run("no tomb", func(t *testing.T) {
		const key, prefix = "ut:tomb-none", "utT3."
		seq := unsureOnFirst(t, e, key, prefix)
		e.bed.Direct[0].Del(ctx, key)
		tombDelete(t, e, seq, key, prefix, 0)
		for i := range 2 {
			if got := e.get(i, key); got != "" {
				t.Fatalf("node %d holds %q after a delete without tomb; want nothing", i, got)
			}
		}
	})
}

// TestTombKeepsLateWriteOut: a write of the Lock held in the network past
// its round leaves its node unsure; the delete that follows finds the key
// absent there and leaves a tombstone, which refuses the write when it
// lands at last: the key is not left behind for the write's TTL. The other
// node, whose write was confirmed, is deleted and gets no tombstone.
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
	if !seq.IsUnsure(0) || seq.IsUnsure(1) {
		t.Fatalf("unsure: %v, %v; want the node whose write is held only", seq.IsUnsure(0), seq.IsUnsure(1))
	}

	tombDelete(t, e, seq, key, prefix, v.gen)
	if got := e.get(1, key); got != "" {
		t.Fatalf("the node whose write was confirmed holds %q after the delete", got)
	}
	if got := e.get(0, key); got != tombstoneOf(prefix, v.gen) {
		t.Fatalf("the node whose write is held holds %q; want the tombstone", got)
	}

	calls := e.evalshaCalls(0)
	e.proxies[0].ReleaseHeld()
	waitFor(t, "the held write running on the node", func() bool { return e.evalshaCalls(0) > calls })
	if got := e.get(0, key); !strings.HasPrefix(got, "!") {
		t.Fatalf("the write that landed after the delete left %q", got)
	}
}
