package engine

import (
	"sync"
	"time"
)

// deadlines ends rounds' waits and contexts at their deadlines from one
// timer per Client, instead of a timer and its closure per round. Most
// rounds end long before their deadline, so the timer is armed for the
// earliest deadline pending and, when it fires, merely re-armed for the next
// one if that entry was removed meanwhile: a round costs a heap push and a
// removal under one mutex, and no allocation.
type deadlines struct {
	mu    sync.Mutex // lock order: a leaf, also taken under Lock.mu (docs/internals.md)
	heap  []*timed
	timer *time.Timer
	armed time.Time // when the timer fires; zero while it is not armed
}

// firer is what a deadline does once it has passed.
type firer interface{ fire() }

// timed is one deadline: f.fire runs once at, or soon after, at, unless the
// entry is removed first.
type timed struct {
	at  time.Time
	idx int // position in the heap; -1 when not in it
	f   firer
}

// add schedules t, which must not be pending.
func (d *deadlines) add(t *timed) {
	d.mu.Lock()
	t.idx = len(d.heap)
	d.heap = append(d.heap, t)
	d.up(t.idx)
	if t.idx == 0 && (d.armed.IsZero() || t.at.Before(d.armed)) {
		d.armed = t.at
		if d.timer == nil {
			d.timer = time.AfterFunc(time.Until(t.at), d.fireDue)
		} else {
			d.timer.Reset(time.Until(t.at))
		}
	}
	d.mu.Unlock()
}

// remove unschedules t and reports whether it was still pending: if not, its
// fire has run or is about to.
func (d *deadlines) remove(t *timed) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := t.idx
	if i < 0 || i >= len(d.heap) || d.heap[i] != t { // a timed never added has idx 0
		return false
	}
	last := len(d.heap) - 1
	if i != last {
		d.swap(i, last)
	}
	d.heap[last] = nil
	d.heap = d.heap[:last]
	t.idx = -1
	if i != last {
		d.down(i)
		d.up(i)
	}
	return true
}

// fireDue is the timer's function: it fires every entry that is due, outside
// the mutex, and re-arms the timer for the next one.
func (d *deadlines) fireDue() {
	var due [16]*timed
	for {
		d.mu.Lock()
		now := time.Now()
		k := 0
		for k < len(due) && len(d.heap) > 0 && !d.heap[0].at.After(now) {
			t := d.heap[0]
			last := len(d.heap) - 1
			d.swap(0, last)
			d.heap[last] = nil
			d.heap = d.heap[:last]
			t.idx = -1
			d.down(0)
			due[k] = t
			k++
		}
		more := k == len(due)
		if !more {
			if len(d.heap) > 0 {
				d.armed = d.heap[0].at
				d.timer.Reset(d.armed.Sub(now))
			} else {
				d.armed = time.Time{}
			}
		}
		d.mu.Unlock()
		// Several due at once fire side by side, as their own timers
		// would have: one that blocks (a hook, a contended lock) does not
		// hold back the others' deadlines. The last fires here, unless
		// more are due after this batch.
		for i, t := range due[:k] {
			due[i] = nil
			if i < k-1 || more {
				go t.f.fire()
			} else {
				t.f.fire()
			}
		}
		if !more {
			return
		}
	}
}

func (d *deadlines) swap(i, j int) {
	d.heap[i], d.heap[j] = d.heap[j], d.heap[i]
	d.heap[i].idx, d.heap[j].idx = i, j
}

func (d *deadlines) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !d.heap[i].at.Before(d.heap[parent].at) {
			return
		}
		d.swap(i, parent)
		i = parent
	}
}

func (d *deadlines) down(i int) {
	n := len(d.heap)
	for {
		least := i
		if l := 2*i + 1; l < n && d.heap[l].at.Before(d.heap[least].at) {
			least = l
		}
		if r := 2*i + 2; r < n && d.heap[r].at.Before(d.heap[least].at) {
			least = r
		}
		if least == i {
			return
		}
		d.swap(i, least)
		i = least
	}
}
