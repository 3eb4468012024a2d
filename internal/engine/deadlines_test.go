package engine

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// firerFunc is a deadline's action.
type firerFunc func()

func (f firerFunc) fire() { f() }

// stopTimer stops d's timer at the test's end.
func stopTimer(t *testing.T, d *deadlines) {
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.timer != nil {
			d.timer.Stop()
		}
	})
}

// checkHeap fails t unless d's heap is a min-heap by deadline whose entries
// know their positions, holding exactly the entries of pending, and unless
// the timer is armed no later than the earliest deadline.
func checkHeap(t *testing.T, d *deadlines, pending map[*timed]bool) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.heap) != len(pending) {
		t.Fatalf("heap of %d entries, %d pending", len(d.heap), len(pending))
	}
	for i, e := range d.heap {
		if e.idx != i {
			t.Fatalf("entry at %d knows itself at %d", i, e.idx)
		}
		if !pending[e] {
			t.Fatalf("entry at %d is not pending", i)
		}
		if i > 0 && e.at.Before(d.heap[(i-1)/2].at) {
			t.Fatalf("entry at %d is earlier than its parent at %d", i, (i-1)/2)
		}
	}
	if len(d.heap) > 0 && (d.armed.IsZero() || d.armed.After(d.heap[0].at)) {
		t.Fatalf("the timer is armed for %v, after the earliest deadline %v", d.armed, d.heap[0].at)
	}
}

// TestDeadlinesHeapRandom: after any sequence of adds and removes the heap
// keeps its invariants (checkHeap), remove reports true exactly for a
// pending entry and marks it out (idx -1), and the timer is never armed
// after the earliest deadline pending. The deadlines are an hour away:
// nothing fires.
func TestDeadlinesHeapRandom(t *testing.T) {
	var d deadlines
	stopTimer(t, &d)
	rng := rand.New(rand.NewPCG(22, 1))
	base := time.Now().Add(time.Hour)
	entries := make([]*timed, 200)
	for i := range entries {
		entries[i] = &timed{idx: -1, f: firerFunc(func() { t.Error("a deadline an hour away fired") })}
	}
	pending := map[*timed]bool{}
	for step := range 5000 {
		e := entries[rng.IntN(len(entries))]
		if pending[e] {
			if !d.remove(e) {
				t.Fatalf("step %d: remove of a pending entry reported false", step)
			}
			if e.idx != -1 {
				t.Fatalf("step %d: a removed entry still has index %d", step, e.idx)
			}
			delete(pending, e)
		} else {
			if rng.IntN(4) == 0 && d.remove(e) {
				t.Fatalf("step %d: remove of an entry not pending reported true", step)
			}
			// Few distinct deadlines: ties too must keep the heap sound.
			e.at = base.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
			d.add(e)
			pending[e] = true
		}
		checkHeap(t, &d, pending)
	}
	// Emptied, the heap takes entries again.
	for e := range pending {
		d.remove(e)
	}
	clear(pending)
	checkHeap(t, &d, pending)
	d.add(entries[0])
	pending[entries[0]] = true
	checkHeap(t, &d, pending)
}

// TestDeadlinesFireOnce: every entry fires exactly once, never before its
// deadline, and only once every entry with an earlier deadline has left the
// heap (deadline order); an entry removed before its deadline never fires,
// and remove reports false once an entry has fired or was removed.
//
// The order is checked among entries added before any was due: a run whose
// adds outlasted the lead (a loaded machine) is made again with twice the
// lead, and the test fails if even the longest lead was too short, rather
// than pass without checking the order.
func TestDeadlinesFireOnce(t *testing.T) {
	for lead := 50 * time.Millisecond; ; lead *= 2 {
		if fireOnce(t, lead) {
			return
		}
		if lead >= 3200*time.Millisecond {
			t.Fatalf("adding the entries outlasted a lead of %v: the order was never checked", lead)
		}
		t.Logf("adding the entries outlasted a lead of %v: again with %v", lead, 2*lead)
	}
}

// fireOnce is one run of TestDeadlinesFireOnce whose entries fall due from
// lead after the start. It reports whether every entry was added within the
// lead, so that the order was checked.
func fireOnce(t *testing.T, lead time.Duration) (orderChecked bool) {
	var d deadlines
	stopTimer(t, &d)
	rng := rand.New(rand.NewPCG(22, 2))
	const n = 200
	entries := make([]*timed, n)
	fired := make([]atomic.Int32, n)
	var early, outOfOrder atomic.Int32
	var left sync.WaitGroup
	start := time.Now()
	removed := map[int]bool{}
	for i := range entries {
		e := &timed{at: start.Add(lead + time.Duration(rng.IntN(100))*time.Millisecond)}
		e.f = firerFunc(func() {
			if time.Now().Before(e.at) {
				early.Add(1)
			}
			d.mu.Lock()
			for _, o := range entries {
				if o.at.Before(e.at) && o.idx >= 0 {
					outOfOrder.Add(1)
				}
			}
			d.mu.Unlock()
			fired[i].Add(1)
			left.Done()
		})
		entries[i] = e
	}
	for i, e := range entries {
		left.Add(1)
		d.add(e)
		if i%5 == 0 && d.remove(e) {
			removed[i] = true
			left.Done()
		}
	}
	addedInTime := time.Since(start) < lead
	done := make(chan struct{})
	go func() { left.Wait(); close(done) }()
	waitClosed(t, done, "every pending deadline firing")
	for i := range entries {
		want := int32(1)
		if removed[i] {
			want = 0
		}
		if got := fired[i].Load(); got != want {
			t.Errorf("entry %d (removed %v) fired %d times", i, removed[i], got)
		}
		if d.remove(entries[i]) {
			t.Errorf("remove of entry %d, fired or removed, reported true", i)
		}
	}
	if early.Load() != 0 {
		t.Errorf("%d entries fired before their deadline", early.Load())
	}
	if addedInTime && outOfOrder.Load() != 0 {
		t.Errorf("%d entries fired while one with an earlier deadline was pending", outOfOrder.Load())
	}
	d.mu.Lock()
	armed, left2 := d.armed, len(d.heap)
	d.mu.Unlock()
	if left2 != 0 || !armed.IsZero() {
		t.Errorf("after everything fired: %d entries left, timer armed for %v", left2, armed)
	}
	return addedInTime
}

// TestDeadlinesRearm: an entry earlier than the one the timer is armed for
// re-arms it (it does not wait for the later one); once the earliest entry
// is removed the timer, firing for nothing, is re-armed for the next; and
// after the heap emptied, a new entry arms the timer again.
func TestDeadlinesRearm(t *testing.T) {
	var d deadlines
	stopTimer(t, &d)
	fire := func() (*timed, chan struct{}) {
		ch := make(chan struct{})
		return &timed{f: firerFunc(func() { close(ch) })}, ch
	}
	late, lateFired := fire()
	late.at = time.Now().Add(time.Hour)
	d.add(late)
	soon, soonFired := fire()
	soon.at = time.Now().Add(10 * time.Millisecond)
	d.add(soon)
	waitClosed(t, soonFired, "an entry earlier than the armed one")
	if !d.remove(late) || IsClosed(lateFired) {
		t.Fatal("the hour-away entry is not pending")
	}

	first, firstFired := fire()
	first.at = time.Now().Add(30 * time.Millisecond)
	second, secondFired := fire()
	second.at = time.Now().Add(60 * time.Millisecond)
	d.add(first)
	d.add(second)
	d.remove(first)
	waitClosed(t, secondFired, "the entry after a removed earliest one")
	if IsClosed(firstFired) {
		t.Fatal("a removed entry fired")
	}

	again, againFired := fire()
	again.at = time.Now().Add(10 * time.Millisecond)
	d.add(again)
	waitClosed(t, againFired, "an entry added after the heap emptied")
}

// TestDeadlinesFireDue: fireDue fires every entry that is due, more than its batch
// of 16 included, and no entry that is not; it leaves the others in the
// heap with the timer armed for the earliest; entries due together fire
// side by side, so one that blocks holds back none of the others.
func TestDeadlinesFireDue(t *testing.T) {
	for _, due := range []int{5, 16, 40} {
		t.Run(strconv.Itoa(due)+" due", func(t *testing.T) {
			var d deadlines
			stopTimer(t, &d)
			// The timer exists but fires nothing on its own, and is armed
			// so far back that add leaves it alone: fireDue is called here.
			d.timer = time.AfterFunc(time.Hour, func() {})
			d.armed = time.Now().Add(-24 * time.Hour)
			now := time.Now()
			release := make(chan struct{})
			var fired sync.WaitGroup
			var count atomic.Int32
			for i := range due {
				e := &timed{at: now.Add(-time.Duration(due-i) * time.Millisecond)}
				blocks := i == 0 || i == due-1 || i == 15
				fired.Add(1)
				e.f = firerFunc(func() {
					count.Add(1)
					fired.Done()
					if blocks {
						<-release
					}
				})
				d.add(e)
			}
			future := []*timed{{at: now.Add(2 * time.Hour)}, {at: now.Add(time.Hour)}}
			for _, e := range future {
				e.f = firerFunc(func() { t.Error("an entry not due fired") })
				d.add(e)
			}
			ran := make(chan struct{})
			go func() { d.fireDue(); close(ran) }()
			all := make(chan struct{})
			go func() { fired.Wait(); close(all) }()
			select {
			case <-all:
			case <-time.After(waitLimit):
				close(release)
				t.Fatalf("with %d due, only %d fired while some blocked: one that blocks held back the others", due, count.Load())
			}
			close(release)
			waitClosed(t, ran, "fireDue returning")
			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.heap) != 2 || d.heap[0] != future[1] || !d.armed.Equal(future[1].at) {
				t.Fatalf("after fireDue: %d entries left, armed for %v; want the 2 not due, armed for the earliest", len(d.heap), d.armed)
			}
		})
	}
}

// TestDeadlinesRemoveNeverAdded: removing a timed that was never added (its
// zero idx is 0) reports false and leaves the pending entry at the heap's
// top alone.
func TestDeadlinesRemoveNeverAdded(t *testing.T) {
	var d deadlines
	pending := &timed{at: time.Now().Add(time.Hour), f: firerFunc(func() {})}
	d.add(pending)
	t.Cleanup(func() { d.remove(pending); d.timer.Stop() })
	if d.remove(&timed{}) {
		t.Fatal("remove of a timed never added reported it pending")
	}
	if len(d.heap) != 1 || d.heap[0] != pending || pending.idx != 0 {
		t.Fatal("remove of a timed never added took another entry off the heap")
	}
}
