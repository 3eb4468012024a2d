package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// checkPermits judges the permits (Locks with Permits), key by key, by the
// same windows as every Lock's (a permit has no owner: nothing takes it
// over):
//   - at no instant do more than n permits hold the key, n the least
//     Permits among them: one finding each time their number rises above
//     n, naming the holders at that instant;
//   - two permits whose windows overlap hold different slots, and were
//     taken with the same n: one finding per such pair.
//
// checkExclusion judges a permit beside a Lock that is not one. A Do's
// window here ends Slack earlier, as its context's signal may come that
// late (checkExclusion allows a Do the same slack). As there, a finding
// with a Do among its holders is a lease finding, or a paused holder's
// overlap if the Do's process was stopped then; any other is a permits
// finding.
func checkPermits(v *Verdict, r *Record) {
	var ws []Window[*Lock]
	for _, l := range r.Locks {
		if l.Permits == 0 {
			continue
		}
		for _, iv := range l.windows(time.Time{}) {
			if l.Do {
				iv.To = iv.To.Add(-r.Slack)
			}
			if !iv.Empty() {
				ws = append(ws, Window[*Lock]{Key: l.Key, Holder: l, Interval: iv})
			}
		}
	}
	kind := func(ls []*Lock) string {
		if slices.ContainsFunc(ls, func(l *Lock) bool { return l.Do }) {
			return "lease"
		}
		return "permits"
	}

	for _, o := range Overlaps(ws) {
		a, b, both := o.A.Holder, o.B.Holder, o.Both
		var what string
		switch {
		case a.Permits != b.Permits:
			what = "permits of different counts"
		case a.Slot == b.Slot:
			what = fmt.Sprintf("one slot, %d", a.Slot)
		default:
			v.PermitsTogether++
			continue
		}
		holds := []*Lock{a, b}
		if r.pausedDo(holds, both) {
			v.PausedOverlaps++
			continue
		}
		v.add(kind(holds), o.A.Key, both.From, "%q: %s holds %s and %s holds %s: %s, both in %s (%v)", o.A.Key,
			a.Describe(), o.A.Interval, b.Describe(), o.B.Interval, what, both, both.Len())
		v.Found[len(v.Found)-1].Holds = holds
	}

	byKey := make(map[string][]Window[*Lock])
	for _, w := range ws {
		byKey[w.Key] = append(byKey[w.Key], w)
	}
	type edge struct {
		at time.Time
		d  int // +1 a window starts, -1 it ends
		w  Window[*Lock]
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		var edges []edge
		for _, w := range byKey[key] {
			edges = append(edges, edge{w.From, +1, w}, edge{w.To, -1, w})
		}
		// At one instant, ends go first: a window that ends when another
		// starts does not share that instant with it.
		slices.SortStableFunc(edges, func(a, b edge) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.d - b.d
		})
		live := make(map[*Lock]Interval) // a Lock's windows are disjoint: one at a time
		over, full := false, false
		for i := 0; i < len(edges); {
			at := edges[i].at
			for ; i < len(edges) && edges[i].at.Equal(at); i++ {
				if e := edges[i]; e.d > 0 {
					live[e.w.Holder] = e.w.Interval
				} else if live[e.w.Holder] == e.w.Interval {
					delete(live, e.w.Holder)
				}
			}
			n := 0 // the least count among the holders
			for l := range live {
				if n == 0 || l.Permits < n {
					n = l.Permits
				}
			}
			switch {
			case len(live) > n:
				holds := slices.SortedFunc(maps.Keys(live), func(a, b *Lock) int { return a.ID - b.ID })
				switch {
				case over:
				case r.pausedDo(holds, Interval{at, at.Add(1)}):
					v.PausedOverlaps++
				default:
					parts := make([]string, len(holds))
					for j, l := range holds {
						parts[j] = fmt.Sprintf("%s holds %s", l.Describe(), live[l])
					}
					v.add(kind(holds), key, at, "%q: %d permits of %d hold at once at %s: %s", key, len(holds), n,
						at.Format("15:04:05.000000"), strings.Join(parts, "; "))
					v.Found[len(v.Found)-1].Holds = holds
				}
				over, full = true, true
			case len(live) == n && n >= 2:
				if !full {
					v.PermitsFull++
				}
				over, full = false, true
			default:
				over, full = false, false
			}
		}
	}
}
