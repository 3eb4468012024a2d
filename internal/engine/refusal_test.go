package engine

import (
	"context"
	"errors"
	"strconv"
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

// refusalDelete deletes any generation of prefix's values on key, leaving
// what refuses its writes up to generation gen, and waits for it to
// settle.
func refusalDelete(t *testing.T, e *laneNodes, seq *Lanes, key, prefix string, gen uint64) []Reply {
	t.Helper()
	var dlog replyLog
	spec := deleteSpec(key, prefix, waitLimit, &dlog)
	spec.Op = deleteOp(key, utValue(prefix, 0), 0, gen)
	e.launch(seq, spec)
	reps := dlog.waitN(t, 2, "the delete's replies")
	waitFor(t, "the delete settling", func() bool { return seq.Unsettled() == nil })
	return reps
}

// refusal reads node i's refusals key of prefix's Lock on key: the
// generation it refuses up to and the node-clock millisecond it lives to,
// with its remaining life; ok false when there is none.
func (e *laneNodes) refusal(i int, key, prefix string) (gen, until int64, left time.Duration, ok bool) {
	e.t.Helper()
	rk := refusalsKey(key, utValue(prefix, 0))
	v := e.get(i, rk)
	if v == "" {
		return 0, 0, 0, false
	}
	g, at, found := strings.Cut(strings.TrimPrefix(v, "!"), ":")
	if !strings.HasPrefix(v, "!") || !found {
		e.t.Fatalf("node %d's refusals key holds %q", i, v)
	}
	gen, _ = strconv.ParseInt(g, 10, 64)
	until, _ = strconv.ParseInt(at, 10, 64)
	return gen, until, e.bed.Direct[i].PTTL(context.Background(), rk).Val(), true
}

// TestDeleteLeavesRefusal: a delete sent while a write of the Lock may
// still land (before that write's deadline on the node) leaves on every
// node the Lock's refusals key, whether the write's reply there was lost
// or came, and whether the delete finds the key absent or its own value: a
// copy of a write may land later than its reply says. The refusal lives
// until the write's deadline on that node's clock, which the engine sent
// it, and no longer.
func TestDeleteLeavesRefusal(t *testing.T) {
	e := newLaneNodes(t, 2, true)
	// The write's reply lost, the delete goes once its round is over, at
	// its deadline: a deadline's margin of a second lets it come within.
	e.p.timing.LateSlack = time.Second
	ctx := context.Background()
	for _, absent := range []bool{true, false} {
		name := "key there"
		if absent {
			name = "key absent"
		}
		t.Run(name, func(t *testing.T) {
			key, prefix := "ut:refusal-"+strconv.FormatBool(absent), "utR"+strconv.FormatBool(absent)+"."
			seq := writeLosingFirst(t, e, key, prefix)
			if absent {
				for i := range 2 {
					e.bed.Direct[i].Del(ctx, key) // expired meanwhile
				}
			}
			for _, r := range refusalDelete(t, e, seq, key, prefix, 1) {
				if want := !absent; (r.Status == OK) != want {
					t.Fatalf("the delete on node %d: %+v", r.Node, r)
				}
			}
			for i := range 2 {
				if got := e.lockValue(i, key); got != "" {
					t.Fatalf("node %d holds %q after the delete", i, got)
				}
				gen, until, left, ok := e.refusal(i, key, prefix)
				if !ok {
					t.Fatalf("node %d has no refusal of the Lock's writes", i)
				}
				if want := seq.LateBy(i); gen != 1 || until != want {
					t.Fatalf("node %d's refusal is of generation %d until %d; want 1 until the write's deadline %d", i, gen, until, want)
				}
				if left <= 0 || left > 300*time.Millisecond+2*time.Second {
					t.Fatalf("node %d's refusal lives %v more; want at most the write's wait and the clock's margin", i, left)
				}
			}
		})
	}
}

// TestDeleteAfterDeadlineLeavesNothing: a delete sent once every write of
// the Lock is past its deadline on the node deletes the value and leaves
// nothing else: no copy can land any more. Where the node is one server,
// whose clock was read, the engine sees the deadline passed and sends none
// (the node runs no SET of a refusal: the delete costs what a plain
// token-checked delete does); where its calls may reach another server
// (oneClock false: a Cluster's or Sentinel's client), it sends the
// deadline, and the node's own clock finds it passed.
func TestDeleteAfterDeadlineLeavesNothing(t *testing.T) {
	for _, one := range []bool{true, false} {
		t.Run("oneClock="+strconv.FormatBool(one), func(t *testing.T) {
			e := newLaneNodes(t, 1, true)
			e.p.nodes[0].oneClock = one
			key, prefix := "ut:after-deadline-"+strconv.FormatBool(one), "utA."
			seq := NewLanes(1)
			var wlog, dlog replyLog
			e.launch(seq, writeSpec(key, utValue(prefix, 1), 20*time.Millisecond, &wlog))
			wlog.waitN(t, 1, "the write's reply")
			late := seq.LateBy(0)
			if late == 0 {
				t.Fatal("the write carried no deadline")
			}
			waitFor(t, "the node's clock passing the write's deadline", func() bool {
				now, err := e.bed.Direct[0].Time(context.Background()).Result()
				return err == nil && now.UnixMilli() > late
			})
			// The reading's window: the engine knows the deadline passed
			// once the node's clock is past it by the reading's error.
			time.Sleep(20 * time.Millisecond)
			sets := e.bed.Calls(0, "set")
			e.launch(seq, deleteSpec(key, prefix, waitLimit, &dlog))
			if r := dlog.waitN(t, 1, "the delete's reply")[0]; r.Status != OK {
				t.Fatalf("the delete: %+v", r)
			}
			if _, _, _, ok := e.refusal(0, key, prefix); ok {
				t.Fatal("a delete past every write's deadline left a refusal")
			}
			if got := e.get(0, key); got != "" {
				t.Fatalf("the key holds %q after the delete", got)
			}
			if got, want := e.bed.Calls(0, "set")-sets, map[bool]int{true: 0, false: 1}[one]; got != want {
				t.Fatalf("the delete ran %d SETs on the node; want %d (a refusal set to expire at its past deadline where the engine cannot tell)", got, want)
			}
		})
	}
}

// TestRefusalKeepsLateWriteOut: a write of the Lock held in the network
// past its round; the delete that follows finds the key absent there and
// leaves the refusal, which refuses the write when it lands at last: the
// key is not left behind for the write's TTL. The other node, whose write
// was confirmed, gets one too, its value deleted.
func TestRefusalKeepsLateWriteOut(t *testing.T) {
	e := newLaneNodes(t, 2, true)
	e.p.timing.LateSlack = time.Second // as in TestDeleteLeavesRefusal
	const key, prefix = "ut:refusal-late", "utL."
	seq := NewLanes(2)
	v := utValue(prefix, 1)
	var wlog replyLog
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, time.Second, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	waitFor(t, "the write's calls returning", func() bool { return seq.Unsettled() == nil })

	refusalDelete(t, e, seq, key, prefix, v.gen)
	for i := range 2 {
		if _, _, _, ok := e.refusal(i, key, prefix); !ok || e.get(i, key) != "" {
			t.Fatalf("node %d after the delete: key %q, refusal %v", i, e.get(i, key), ok)
		}
	}
	calls := e.evalshaCalls(0)
	e.proxies[0].ReleaseHeld()
	waitFor(t, "the held write running on the node", func() bool { return e.evalshaCalls(0) > calls })
	if got := e.get(0, key); got != "" {
		t.Fatalf("the write that landed after the delete left %q", got)
	}
}

// TestLateWriteRefusedByItsDeadline: a write held in the network until its
// node's clock passed its deadline changes nothing when it lands, though
// no delete of its Lock ran: the node refuses it ("LATE"), and a copy
// held in a stopped node's socket for hours lands the same way.
func TestLateWriteRefusedByItsDeadline(t *testing.T) {
	e := newLaneNodes(t, 1, false) // the call waits for its reply, however late
	const key, prefix = "ut:late-deadline", "utD."
	seq := NewLanes(1)
	v := utValue(prefix, 1)
	var wlog replyLog
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, 50*time.Millisecond, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	late := seq.LateBy(0)
	waitFor(t, "the node's clock passing the write's deadline", func() bool {
		now, err := e.bed.Direct[0].Time(context.Background()).Result()
		return err == nil && now.UnixMilli() > late
	})
	e.proxies[0].ReleaseHeld()
	rep := wlog.waitN(t, 1, "the late write's reply")[0]
	if rep.Status != Refused || !errors.Is(rep.Err, ErrLate) {
		t.Fatalf("the write that landed past its deadline: %+v; want refused as late", rep)
	}
	if got := e.get(0, key); got != "" {
		t.Fatalf("the late write left %q", got)
	}
}

// TestHeldUpLateReplyKeepsReading: a write held in the network for a
// second and a half, refused as late when it lands, carries back the
// node's clock read at some moment of that wait. That reading is as wide
// as the wait, and the client's own, which it agrees with, is closer: a
// held-up write says nothing wrong of the clock. Kept, the wide reading
// would put the next writes' deadlines, and their refusals' lives, most of
// the wait later (in the nemesis, a permit's refusal outlived its Release
// by over two seconds after a node had been stopped).
func TestHeldUpLateReplyKeepsReading(t *testing.T) {
	e := newLaneNodes(t, 1, false) // the call waits for its reply, however late
	const key, prefix = "ut:late-held", "utH."
	seq := NewLanes(1)
	v := utValue(prefix, 1)
	var wlog replyLog
	before := *e.p.nodes[0].clock.reading.Load()
	caught := e.proxies[0].HoldNext([]byte(v.s))
	e.launch(seq, writeSpec(key, v, 50*time.Millisecond, &wlog))
	waitClosed(t, caught, "the write reaching the proxy")
	time.Sleep(1500 * time.Millisecond)
	e.proxies[0].ReleaseHeld()
	rep := wlog.waitN(t, 1, "the late write's reply")[0]
	if rep.Status != Refused || !errors.Is(rep.Err, ErrLate) {
		t.Fatalf("the write that landed past its deadline: %+v; want refused as late", rep)
	}
	if got := e.p.nodes[0].clock.reading.Load(); got.half > before.half+500*time.Millisecond {
		t.Fatalf("after a write held up 1.5 s, the node's clock reading is within %v (it was within %v): the late reply's wide reading replaced a closer one it agrees with", got.half, before.half)
	}
}

// TestLateReplyCorrectsClock: a node whose clock the client reads wrong
// (here, a reading ten seconds behind, as after a step of the node's
// clock) refuses writes as late; the refusal carries the node's clock,
// which the client takes at once, and the next write is accepted.
func TestLateReplyCorrectsClock(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	n := e.p.nodes[0]
	r := *n.clock.reading.Load()
	r.nodeUs -= (10 * time.Second).Microseconds()
	n.clock.reading.Store(&r)

	seq := NewLanes(1)
	var log1, log2 replyLog
	e.launch(seq, writeSpec("ut:clock-step", utValue("utC.", 1), waitLimit, &log1))
	if rep := log1.waitN(t, 1, "the first write's reply")[0]; rep.Status != Refused || !errors.Is(rep.Err, ErrLate) {
		t.Fatalf("a write carrying a deadline 10 s in the node's past: %+v; want refused as late", rep)
	}
	e.launch(seq, writeSpec("ut:clock-step", utValue("utC.", 2), waitLimit, &log2))
	if rep := log2.waitN(t, 1, "the second write's reply")[0]; rep.Status != OK {
		t.Fatalf("the write after the node's clock was learned again: %+v", rep)
	}
}

// TestOldReadingReadAgain: a Client idle for an hour holds readings of
// its nodes' clocks an hour old, which a write's deadline allows the
// drift of (1 % of its age, capped at 10 s: 100 ms): a write sent with it
// could land that much later, and a delete's refusal would live as long.
// The round reads the clock again first, and the deadline it sends is the
// round's own wait from now, plus a fresh reading's margin of a few
// milliseconds.
func TestOldReadingReadAgain(t *testing.T) {
	e := newLaneNodes(t, 1, true)
	n := e.p.nodes[0]
	r := *n.clock.reading.Load()
	r.mid = r.mid.Add(-time.Hour)
	r.nodeUs -= time.Hour.Microseconds()
	n.clock.reading.Store(&r)

	seq := NewLanes(1)
	var log replyLog
	const wait = 400 * time.Millisecond // a quarter of it for the clock's read
	e.launch(seq, writeSpec("ut:old-reading", utValue("utO.", 1), wait, &log))
	if rep := log.waitN(t, 1, "the write's reply")[0]; rep.Status != OK {
		t.Fatalf("the write: %+v", rep)
	}
	now, err := e.bed.Direct[0].Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ahead := time.Duration(seq.LateBy(0)-now.UnixMilli()) * time.Millisecond; ahead > wait+50*time.Millisecond {
		t.Fatalf("the write's deadline is %v past the node's clock after it answered; want within the round's wait and a fresh reading's margin", ahead)
	}
}

// TestLateMsCapsReadingAge: a write's deadline allows for a reading's
// drift over at most lateAgeCap of its age: an hour-old reading (which
// freshen could not replace in time, on a loaded node) gives a deadline
// 100 ms and the reading's half round trip past the moment, not 36 s. The
// moment itself carries over whole. passed stays conservative: by the
// hour-old reading, a moment a second past that deadline is not known to
// have passed on the node.
// TestLateMsCapsReadingHalf: a reading made over a slow round trip (a
// node stopped for seconds while its clock was read, with a client that
// sets no context deadline) is known only within half that trip, and a
// write's deadline allows at most lateHalfCap of it: the rest would put
// the deadline, and the refusal a delete leaves for it, seconds out (a
// refusal that outlived a nemesis run by 3 to 5 s). The deadline is early
// at worst, a write refused as late, whose reply corrects the reading.
func TestLateMsCapsReadingHalf(t *testing.T) {
	mid := time.Unix(1_700_000_000, 0)
	var c nodeClock
	c.reading.Store(&clockReading{nodeUs: mid.UnixMicro(), mid: mid, half: 4 * time.Second})
	at := mid.Add(time.Second)
	ms, ok := c.lateMs(at, 0.01, time.Millisecond)
	if !ok {
		t.Fatal("no deadline from a known reading")
	}
	want := at.Add(lateHalfCap + 10*time.Millisecond + time.Millisecond).UnixMilli()
	if ms != want {
		t.Fatalf("deadline %v past the moment, want %v", time.Duration(ms-at.UnixMilli())*time.Millisecond, time.Duration(want-at.UnixMilli())*time.Millisecond)
	}
	if c.passed(ms, at.Add(time.Second), 0.01) {
		t.Fatal("passed trusted the reading's capped window")
	}
}

func TestLateMsCapsReadingAge(t *testing.T) {
	mid := time.Unix(1_700_000_000, 0)
	var c nodeClock
	c.reading.Store(&clockReading{nodeUs: mid.UnixMicro(), mid: mid, half: time.Millisecond})
	at := mid.Add(time.Hour)
	ms, ok := c.lateMs(at, 0.01, time.Millisecond)
	if !ok {
		t.Fatal("no deadline from a known reading")
	}
	want := at.Add(time.Millisecond + 100*time.Millisecond + time.Millisecond).UnixMilli()
	if ms != want {
		t.Fatalf("deadline %d, want %d (%v past the moment)", ms, want, time.Duration(ms-at.UnixMilli())*time.Millisecond)
	}
	if c.passed(ms, at.Add(time.Second), 0.01) {
		t.Fatal("passed trusted an hour-old reading within its drift")
	}
	fresh, _ := c.lateMs(mid.Add(time.Second), 0.01, time.Millisecond)
	if want := mid.Add(time.Second + time.Millisecond + 10*time.Millisecond + time.Millisecond).UnixMilli(); fresh != want {
		t.Fatalf("a second-old reading's deadline %d, want %d", fresh, want)
	}
}
