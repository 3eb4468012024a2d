package redlock_test

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file is the nemesis's checker (nemesis_test.go runs the nemesis): plain
// functions over a recorded history, which know nothing of the faults, so
// that TestNemesisChecker can feed them hand-made histories of every kind of
// violation. The chaos suite's checker (chaos_checker_test.go) judges one
// hold per Acquire; this one knows that one Lock can be acquired several
// times (owner re-entry), taken over by a newer Lock of its owner, renewed
// out of sight (KeepAlive), or held by a Do whose Lock the caller never sees.
//
// All times are readings of this process's clock with Go's monotonic part:
// every client runs in this one process. Every recorded instant errs toward
// a shorter window (a start is read before the event, an end after it), so
// noise can hide a violation of a few microseconds but never invent one.

// nemLock is the record of one *redlock.Lock (or of one Do call, whose Lock
// the caller never sees).
type nemLock struct {
	ID     int
	Client string // the worker that acquired it first, for reports
	Key    string
	Owner  string // the WithOwner id; "" for a Lock of its own
	Fenced bool   // acquired through a Client WithFencing: it has a fence and writes to the fenced store
	Fence  uint64 // 0 without fencing
	Do     bool   // a Do call: Proofs are the moments its context was live

	// Acquires are the calls that returned this Lock: the first, then its
	// owner's re-entries.
	Acquires []span
	// Releases are the Release calls, whatever they returned.
	Releases []span
	// Proofs are the validity the Lock claimed: from each one's From the
	// Lock said it was held until its Until (Lock.Until read after From, or
	// a Do context seen live). The latest proof is the claim: an Extend
	// with a shorter TTL shortens it.
	Proofs []proof
	// Caps are Extends, successful or not: from the start of one, the
	// validity is at most what its TTL gives from there (its writes may
	// have shortened the key's TTL on some nodes), until a later proof.
	Caps []proof
	// For a Do: when fn ran, and whether Do returned nil.
	FnStart, FnEnd time.Time
	DoNil          bool
}

// span is one call: Start read before it, End after it returned.
type span struct{ Start, End time.Time }

// proof is a claim of validity over [From, Until).
type proof struct{ From, Until time.Time }

// interval is a half-open [From, To).
type interval struct{ From, To time.Time }

func (iv interval) empty() bool { return !iv.From.Before(iv.To) }

func (iv interval) String() string {
	return fmt.Sprintf("[%s, %s)", iv.From.Format("15:04:05.000000"), iv.To.Format("15:04:05.000000"))
}

// fenceWrite is one write to the fenced store: Seq is its place in the
// store's own order, At read when the store had decided.
type fenceWrite struct {
	Seq      int
	LockID   int
	Key      string
	Fence    uint64
	At       time.Time
	Accepted bool
}

// leaseObs is one look at a KeepAlive context: Before and After are
// Lock.Until read before and after At, the moment the context was checked.
type leaseObs struct {
	LockID        int
	Key           string
	At            time.Time
	Live          bool
	Before, After time.Time
}

// probe is the end-of-run acquire of a key, once every fault is healed.
type probe struct {
	Key  string
	Took time.Duration
	Err  error
}

// nemRecord is everything a run recorded, for the checker.
type nemRecord struct {
	Locks     []*nemLock
	Writes    []fenceWrite
	Leases    []leaseObs
	Probes    []probe
	Bound     time.Duration // a probe must succeed within it
	Leftovers []nodeKey     // lock keys found on the nodes after every Client closed
	// Slack is how late a lease signal may come before it counts: the
	// documented limit of a timer on a starved CPU. 0 in hand-made histories.
	Slack time.Duration
}

// violation is one finding.
type violation struct {
	Kind   string // exclusion, fencing, lease, lockout, leftovers
	Key    string
	At     time.Time // when it happened, if known, for the timeline
	Detail string
	Holds  []*nemLock // the Locks of an overlap
}

// nemVerdict lists the violations by kind.
type nemVerdict struct {
	found []violation
	// staleRefused counts the writes the store refused that were made
	// outside the writer's windows: fencing at work, which a run must
	// show.
	staleRefused int
}

func (v *nemVerdict) add(kind, key string, at time.Time, format string, args ...any) {
	v.found = append(v.found, violation{Kind: kind, Key: key, At: at, Detail: fmt.Sprintf(format, args...)})
}

func (v *nemVerdict) count(kind string) int {
	n := 0
	for _, f := range v.found {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

// nemKinds are the kinds in the order of the report line.
var nemKinds = []string{"exclusion", "fencing", "lease", "lockout", "leftovers"}

// checkNemesis judges a whole record.
func checkNemesis(r *nemRecord) *nemVerdict {
	v := &nemVerdict{}
	checkExclusion(v, r)
	checkFencing(v, r)
	checkLease(v, r)
	checkLockout(v, r)
	for _, k := range r.Leftovers {
		v.add("leftovers", k.Key, time.Time{}, "%s", k)
	}
	return v
}

// windows returns the intervals in which l's holder may act on the key:
// while l has a hold (an Acquire returned it and not as many Releases have
// started since), within its claimed validity, and before a newer Lock of
// the same owner began to take the key over (takeover, the earliest start
// of such an Acquire; zero if none).
func (l *nemLock) windows(takeover time.Time) []interval {
	held := l.held()
	valid := l.valid()
	var out []interval
	for _, h := range held {
		for _, p := range valid {
			iv := interval{latest(h.From, p.From), earliest(h.To, p.To)}
			if !takeover.IsZero() {
				iv.To = earliest(iv.To, takeover)
			}
			if !iv.empty() {
				out = append(out, iv)
			}
		}
	}
	return out
}

// valid returns when l claimed validity. At any moment the claim is the
// latest proof's Until, lowered by the Extends started since. A Do's
// proofs are the moments its context was live, which only add up; one that
// returned nil claims its function's whole run, as its doc says.
func (l *nemLock) valid() []interval {
	if l.Do {
		ivs := make([]interval, 0, len(l.Proofs)+1)
		for _, p := range l.Proofs {
			ivs = append(ivs, interval{p.From, p.Until})
		}
		if l.DoNil {
			ivs = append(ivs, interval{l.FnStart, l.FnEnd})
		}
		return union(ivs)
	}
	type event struct {
		proof
		cap bool
	}
	evs := make([]event, 0, len(l.Proofs)+len(l.Caps))
	for _, p := range l.Proofs {
		evs = append(evs, event{p, false})
	}
	for _, c := range l.Caps {
		evs = append(evs, event{c, true})
	}
	// At one instant a cap goes first: a proof read then already knows it.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].From.Equal(evs[j].From) {
			return evs[i].cap && !evs[j].cap
		}
		return evs[i].From.Before(evs[j].From)
	})
	var out []interval
	var claim time.Time
	for i, e := range evs {
		switch {
		case !e.cap:
			claim = e.Until
		case e.Until.Before(claim):
			claim = e.Until
		}
		to := claim
		if i+1 < len(evs) {
			to = earliest(to, evs[i+1].From)
		}
		out = append(out, interval{e.From, to})
	}
	return union(out)
}

// held sweeps the Lock's Acquire returns (+1) and Release starts (-1): a
// Release that finds no hold (a second Release) changes nothing.
func (l *nemLock) held() []interval {
	type event struct {
		at time.Time
		d  int
	}
	var evs []event
	for _, a := range l.Acquires {
		evs = append(evs, event{a.End, +1})
	}
	for _, r := range l.Releases {
		evs = append(evs, event{r.Start, -1})
	}
	// At one instant, a release goes first: it shortens the window.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].d < evs[j].d
		}
		return evs[i].at.Before(evs[j].at)
	})
	var out []interval
	n := 0
	var from time.Time
	for _, e := range evs {
		switch {
		case e.d > 0:
			if n == 0 {
				from = e.at
			}
			n++
		case n > 0:
			n--
			if n == 0 {
				out = append(out, interval{from, e.at})
			}
		}
	}
	if n > 0 {
		out = append(out, interval{from, time.Unix(1<<40, 0)})
	}
	return out
}

// union merges overlapping intervals.
func union(ivs []interval) []interval {
	ivs = slices.DeleteFunc(slices.Clone(ivs), interval.empty)
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].From.Before(ivs[j].From) })
	var out []interval
	for _, iv := range ivs {
		if n := len(out); n > 0 && !iv.From.After(out[n-1].To) {
			out[n-1].To = latest(out[n-1].To, iv.To)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// takeovers returns, per Lock, the moment a newer Lock of its owner began
// to take the key over: the start of the first Acquire of a different Lock
// with the same owner and key that returned after this Lock's first did.
func takeovers(locks []*nemLock) map[*nemLock]time.Time {
	type ownerKey struct{ key, owner string }
	groups := make(map[ownerKey][]*nemLock)
	for _, l := range locks {
		if l.Owner != "" && len(l.Acquires) > 0 {
			k := ownerKey{l.Key, l.Owner}
			groups[k] = append(groups[k], l)
		}
	}
	out := make(map[*nemLock]time.Time)
	for _, g := range groups {
		sort.Slice(g, func(i, j int) bool { return g[i].Acquires[0].End.Before(g[j].Acquires[0].End) })
		// From the newest back, a run of equal returns at a time: each
		// gets the earliest start among the Locks that returned later.
		var first time.Time
		for i := len(g) - 1; i >= 0; {
			j := i
			for j > 0 && g[j-1].Acquires[0].End.Equal(g[i].Acquires[0].End) {
				j--
			}
			for _, l := range g[j : i+1] {
				if !first.IsZero() {
					out[l] = first
				}
			}
			for _, l := range g[j : i+1] {
				if s := l.Acquires[0].Start; first.IsZero() || s.Before(first) {
					first = s
				}
			}
			i = j - 1
		}
	}
	return out
}

// checkExclusion reports every pair of different Locks of one key whose
// windows overlap. A pair with a Do in it is a lease finding (the Do's
// window is its context's word), counted when the overlap exceeds the
// slack; any other pair is an exclusion finding.
func checkExclusion(v *nemVerdict, r *nemRecord) {
	over := takeovers(r.Locks)
	type held struct {
		l  *nemLock
		iv interval
	}
	byKey := make(map[string][]held)
	for _, l := range r.Locks {
		for _, iv := range l.windows(over[l]) {
			byKey[l.Key] = append(byKey[l.Key], held{l, iv})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		hs := byKey[key]
		sort.Slice(hs, func(i, j int) bool { return hs[i].iv.From.Before(hs[j].iv.From) })
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if !b.iv.From.Before(a.iv.To) {
					break // b and every later one start after a ends
				}
				if a.l == b.l {
					continue
				}
				ov := interval{b.iv.From, earliest(a.iv.To, b.iv.To)}
				kind := "exclusion"
				if a.l.Do || b.l.Do {
					if ov.To.Sub(ov.From) <= r.Slack {
						continue
					}
					kind = "lease"
				}
				v.add(kind, key, ov.From, "%q: %s holds %s and %s holds %s: both in %s (%v)", key,
					a.l.describe(), a.iv, b.l.describe(), b.iv, ov, ov.To.Sub(ov.From))
				v.found[len(v.found)-1].Holds = []*nemLock{a.l, b.l}
			}
		}
	}
}

func (l *nemLock) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock #%d of %s", l.ID, l.Client)
	if l.Do {
		b.WriteString(" (Do)")
	}
	if l.Owner != "" {
		fmt.Fprintf(&b, " (owner %s, %d acquires)", l.Owner, len(l.Acquires))
	}
	if l.Fence != 0 {
		fmt.Fprintf(&b, " (fence %d)", l.Fence)
	}
	return b.String()
}

// checkFencing judges the fences, and the fenced store by the timeline
// rather than by the store's own rule (which the store applies under the
// recorder's mutex, so re-checking it could never fail):
//   - a Lock of a fenced Client has a fence, not 0;
//   - a stale write, made by a Lock outside its windows (its validity had
//     ended, or it was released or taken over) after a newer holder of the
//     key had written (one whose first Acquire started after the writer's
//     first returned), is refused: fencing exists for it;
//   - a write made within the writer's window is accepted;
//   - a fenced Lock whose first Acquire started after another's first
//     returned has a higher fence.
func checkFencing(v *nemVerdict, r *nemRecord) {
	byID := make(map[int]*nemLock)
	for _, l := range r.Locks {
		byID[l.ID] = l
		if l.Fenced && !l.Do && len(l.Acquires) > 0 && l.Fence == 0 {
			v.add("fencing", l.Key, l.Acquires[0].End, "%q: %s of a fenced Client has no fence", l.Key, l.describe())
		}
	}
	over := takeovers(r.Locks)
	writes := slices.Clone(r.Writes)
	sort.Slice(writes, func(i, j int) bool { return writes[i].Seq < writes[j].Seq })
	newest := make(map[string]*nemLock) // per key, the writer so far whose first Acquire started last
	for _, w := range writes {
		l := byID[w.LockID]
		if l == nil || len(l.Acquires) == 0 {
			v.add("fencing", w.Key, w.At, "%q: a write of lock #%d, which no Acquire returned", w.Key, w.LockID)
			continue
		}
		within := false
		for _, iv := range l.windows(over[l]) {
			if !w.At.Before(iv.From) && w.At.Before(iv.To) {
				within = true
				break
			}
		}
		n := newest[w.Key]
		superseded := n != nil && n.Acquires[0].Start.After(l.Acquires[0].End)
		switch {
		case !w.Accepted && !within:
			v.staleRefused++
		case w.Accepted && !within && superseded:
			v.add("fencing", w.Key, w.At, "%q: store accepted a stale write of %s at %s, after %s wrote",
				w.Key, l.describe(), w.At.Format("15:04:05.000000"), n.describe())
		case !w.Accepted && within:
			v.add("fencing", w.Key, w.At, "%q: store refused a write of %s at %s, within its validity",
				w.Key, l.describe(), w.At.Format("15:04:05.000000"))
		}
		if n == nil || l.Acquires[0].Start.After(n.Acquires[0].Start) {
			newest[w.Key] = l
		}
	}
	// Successive holders: sweep the Locks by the start of their first
	// Acquire, keeping the highest fence of those whose first Acquire had
	// returned by then.
	byKey := make(map[string][]*nemLock)
	for _, l := range r.Locks {
		if l.Fence != 0 && !l.Do && len(l.Acquires) > 0 {
			byKey[l.Key] = append(byKey[l.Key], l)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ls := byKey[key]
		byEnd := slices.Clone(ls)
		sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].Acquires[0].End.Before(byEnd[j].Acquires[0].End) })
		sort.Slice(ls, func(i, j int) bool { return ls[i].Acquires[0].Start.Before(ls[j].Acquires[0].Start) })
		var top *nemLock
		next := 0
		for _, b := range ls {
			for ; next < len(byEnd) && !byEnd[next].Acquires[0].End.After(b.Acquires[0].Start); next++ {
				if top == nil || byEnd[next].Fence > top.Fence {
					top = byEnd[next]
				}
			}
			if top != nil && top != b && b.Fence <= top.Fence {
				v.add("fencing", key, b.Acquires[0].End, "%q: %s acquired by %s, then %s got fence %d, not above",
					key, top.describe(), top.Acquires[0].End.Format("15:04:05.000000"), b.describe(), b.Fence)
			}
		}
	}
}

// checkLease reports a KeepAlive context seen live at or after the Lock's
// Until (both readings around the look, the later of them) by more than the
// slack. A Do's findings come from checkExclusion.
func checkLease(v *nemVerdict, r *nemRecord) {
	for _, o := range r.Leases {
		until := latest(o.Before, o.After)
		if o.Live && o.At.Sub(until) > r.Slack {
			v.add("lease", o.Key, o.At, "%q: lock #%d's KeepAlive context live at %s, %v after Until %s",
				o.Key, o.LockID, o.At.Format("15:04:05.000000"), o.At.Sub(until), until.Format("15:04:05.000000"))
		}
	}
}

// checkLockout reports a key that could not be acquired within the bound
// once the faults were healed.
func checkLockout(v *nemVerdict, r *nemRecord) {
	for _, p := range r.Probes {
		if p.Err != nil || p.Took > r.Bound {
			v.add("lockout", p.Key, time.Time{}, "%q: acquire after healing took %v (bound %v): %v", p.Key, p.Took.Round(time.Millisecond), r.Bound, p.Err)
		}
	}
}
