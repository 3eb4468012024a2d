package history

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file is the nemesis's checker (the root package's nemesis_test.go
// runs the nemesis): plain functions over a recorded history, which know
// nothing of the faults, so that TestNemesisChecker can feed them hand-made
// histories of every kind of violation. The chaos suite's checker
// (chaos_checker_test.go) judges one hold per Acquire; this one knows that
// one Lock can be acquired several times (owner re-entry), taken over by a
// newer Lock of its owner, renewed out of sight (KeepAlive), or held by a
// Do whose Lock the caller never sees.
//
// Every recorded instant errs toward a shorter window (a start is read
// before the event, an end after it), so noise can hide a violation of a
// few microseconds but never invent one. The workers may run in several
// processes (procs.go): a process killed mid-run loses its calls in
// flight, whose records are missing, which may hide a violation but never
// invent one, as each start is recorded before its call and each end
// after it.

// Lock is the record of one *redlock.Lock (or of one Do call, whose Lock
// the caller never sees).
//
// A Lock is exclusive, Shared, or a permit (Permits). Per key, any number
// of shared Locks may hold together, or exactly one exclusive Lock (of one
// key or several): a shared Lock's windows must not overlap an exclusive
// Lock's (a shared finding), and two exclusive Locks' must not overlap (an
// exclusion finding; checkExclusion judges both). A
// key of permits holds permits only, at most Permits of them at once, no
// two in one Slot (checkPermits). The windows of every kind are the same:
// the validity the Lock claimed, while it was held.
type Lock struct {
	ID     int
	Client string // the worker that acquired it first, for reports
	// Proc is the worker process it was made in, whose pauses and kill
	// (Record.Pauses, Record.Kills) concern it; "" in a record of one
	// process.
	Proc string
	Key  string
	// Keys are the keys of a Lock of several keys (AcquireAll, DoAll),
	// Key their first; nil for a Lock of one key. A hold of such a Lock
	// is a hold of each of its keys: its windows are on every one.
	Keys  []string
	Owner string // the WithOwner id; "" for a Lock of its own
	// Shared: taken with redlock.Shared, one key, no owner. It has no
	// fence (Fence 0) and writes nothing to the fenced store.
	Shared bool
	// Permits is the n of a Lock taken with redlock.Permits(n), one key,
	// no owner, and 0 for any other: one of the key's n permits, held in
	// Slot (0 to n-1, Lock.Permit). Like a shared Lock, it has no fence
	// and writes nothing.
	Permits int
	Slot    int
	// Fenced: acquired through a Client WithFencing. An exclusive Lock
	// then has a fence and writes to the fenced store.
	Fenced bool
	Fence  uint64 // 0 without fencing, and for a shared Lock or a permit
	// Election: a leadership (Election.Campaign), always fenced: its
	// Fence is its term (checkTerms).
	Election bool
	Do       bool // a Do call: Proofs are the moments its context was live
	// Token is Lock.Token(), what its values on the nodes start with; ""
	// when not recorded (a Do call). TTLs are the TTLs it asked for, its
	// acquire's and each Extend's, in order: what its values lived on the
	// nodes (checkLate).
	Token string
	TTLs  []time.Duration
	// Metadata is what it stored with WithMetadata, which its values on
	// the nodes carry (checkMetadata).
	Metadata string
	// Claims are validities it claimed with what bounds each
	// (checkClaims); nil where the recorder does not know the bounds.
	Claims []Claim

	// Acquires are the calls that returned this Lock: the first, then its
	// owner's re-entries.
	Acquires []Span
	// Releases are the Release calls, whatever they returned.
	Releases []Span
	// Released: one of them returned nil, its deletes confirmed by a
	// quorum. Without one, a renewal sent before the last Proof's Until
	// that landed unconfirmed keeps its values on the nodes up to its TTL
	// past that Until (checkObserved).
	Released bool
	// Proofs are the validity the Lock claimed: from each one's From the
	// Lock said it was held until its Until (Lock.Until read after From, or
	// a Do context seen live). The latest Proof is the claim: an Extend
	// with a shorter TTL shortens it.
	Proofs []Proof
	// Caps are Extends, successful or not: from the start of one, the
	// validity is at most what its TTL gives from there (its writes may
	// have shortened the key's TTL on some nodes), until a later Proof.
	Caps []Proof
	// For a Do: when fn ran, and whether Do returned nil.
	FnStart, FnEnd time.Time
	DoNil          bool
}

// Span is one call: Start read before it, End after it returned.
type Span struct{ Start, End time.Time }

// Proof is a claim of validity over [From, Until).
type Proof struct{ From, Until time.Time }

// FenceWrite is one write to the fenced store: Seq is its place in the
// store's own order, At read when the store had decided.
type FenceWrite struct {
	Seq      int
	LockID   int
	Key      string
	Fence    uint64
	At       time.Time
	Accepted bool
}

// LeaseObs is one look at a KeepAlive context: Before and After are
// Lock.Until read before and after At, the moment the context was checked.
type LeaseObs struct {
	LockID        int
	Key           string
	At            time.Time
	Live          bool
	Before, After time.Time
}

// Probe is the end-of-run acquire of a key, once every fault is healed:
// exclusive, Shared, or of all the key's Permits at once (Took the
// slowest, Err the first error).
type Probe struct {
	Key     string
	Shared  bool
	Permits int
	Took    time.Duration
	Err     error
}

// NodeKey is a key found on a node: by an end-of-run scan (Leftovers),
// or as the run went (Seen).
type NodeKey struct {
	Node       int
	Key, Value string
	// Raw is the value as the node holds it and TTL its time to live when
	// the key was found, when the finder read them: they tell which write
	// left the key, and when. At is when it was read, for Seen.
	Raw string
	TTL time.Duration
	At  time.Time
}

func (k NodeKey) String() string {
	s := fmt.Sprintf("node %d: %s=%s", k.Node, k.Key, k.Value)
	if k.Raw != "" {
		s += fmt.Sprintf(" (%q, ttl %v)", k.Raw, k.TTL)
	}
	return s
}

// Record is everything a run recorded, for Check.
type Record struct {
	Locks     []*Lock
	Writes    []FenceWrite
	Leases    []LeaseObs
	Probes    []Probe
	Bound     time.Duration // a probe must succeed within it
	Leftovers []NodeKey     // lock keys found on the nodes after every Client closed
	// Seen are the lock keys' values read off the nodes as the run went,
	// with their time to live (checkLate).
	Seen []NodeKey
	// Slack is how late a lease signal may come before it counts: the
	// documented limit of a timer on a starved CPU. 0 in hand-made histories.
	Slack time.Duration
	// Pauses and Kills are the stops and kills of worker processes
	// (procs.go); KillBound is how long after a killed holder's validity
	// another Lock must have taken its key, and End when the workload
	// stopped (a bound that runs past it is not judged; zero: judge all).
	Pauses    []Pause
	Kills     []Kill
	KillBound time.Duration
	End       time.Time
	// Waits are the calls that may wait for a key (starved.go), Down the
	// intervals in which a node was out of every quorum, of Nodes nodes,
	// and StarvedBound how long beyond a writer's turn and a live writer's
	// wait a shared Acquire may be refused (0: not judged).
	Waits []Wait
	// Observations are the Election.Leader calls that reported a leader
	// or none (checkObserved).
	Observations []Observation
	// Drift is the Clients' allowance for the nodes' clocks over a TTL
	// (redlock's drift factor and constant), by which checkClaims judges
	// the Locks' Claims; nil: not judged.
	Drift        func(ttl time.Duration) time.Duration
	Down         []NodeDown
	Nodes        int
	StarvedBound time.Duration
	// RoundTrips is each node's longest round trip without faults, by
	// node; Busy the intervals in which any fault acted, however
	// lightly, on a node (Proc empty) or on one process's link to it; LatencyRefusals the calls refused as
	// too short for the nodes' latency; and LatencyQuiet how long a quorum
	// of near nodes untouched by faults makes such a refusal a finding
	// (latency.go; 0: not judged).
	RoundTrips      []time.Duration
	Busy            []NodeDown
	LatencyRefusals []LatencyRefusal
	LatencyQuiet    time.Duration
}

// Violation is one finding.
type Violation struct {
	Kind   string // one of Kinds
	Key    string
	At     time.Time // when it happened, if known, for the timeline
	Detail string
	Holds  []*Lock // the Locks of an overlap, or of more than n permits at once
}

// Verdict lists the violations by kind.
type Verdict struct {
	Found []Violation
	// StaleRefused counts the stale writes the store refused: made outside
	// the writer's windows, or after a newer holder of the key had
	// written. Fencing at work, which a run must show.
	StaleRefused int
	// OverlapRefused counts, of those, the writes made within the writer's
	// window after a newer holder, or one that held the key at the same
	// time with a higher fence, had written: only two holders at once (an
	// exclusion finding, a node's clock that jumped, say) make one, and its
	// refusal is fencing covering what exclusion lost, which a control
	// that breaks exclusion must show.
	OverlapRefused int
	// StaleAccepted counts the stale writes the store accepted, each a
	// fencing finding, paused holders' or not: what a control that breaks
	// exclusion must show none of.
	StaleAccepted int
	// SharedTogether counts the pairs of shared Locks whose windows on a
	// key overlap: sharing at work, which a run with shared Locks must
	// show, or its finding no reader beside a writer means little.
	SharedTogether int
	// PermitsTogether counts the pairs of permits whose windows on a key
	// overlap, and PermitsFull the times a key's n permits (n >= 2) all
	// came to be held at once: the semaphore at work, and at its bound,
	// which a run with permits must show, or its finding no n+1 holders
	// means little.
	PermitsTogether, PermitsFull int
	// LongReads counts the shared Acquires that waited longer than
	// StarvedBound, which the starved rule judged: a run must show some,
	// or its "starved 0" means little.
	LongReads int
	// ReadsBehindStopped counts the shared Acquires that waited for a key
	// while a writer that waited for it had its process stopped or killed
	// within the last StarvedBound: the readers whose wait the stopped
	// writer's announcement could have drawn out, which the starved rule
	// judges. A run must show some, or its "starved 0" means little; a
	// correct library makes few of them long (LongReads).
	ReadsBehindStopped int
	// PausedOverlaps counts what a holder whose process was stopped did
	// after its validity ended and another Lock held the key: a write to
	// the store (refused if the newer holder had written, or it is a
	// fencing finding), a KeepAlive context seen live, a Do's function
	// running. No lock service can prevent them (procs.go); fencing exists
	// for them. They are not findings.
	PausedOverlaps int
	// LatencyRefusals counts the calls refused as too short for the
	// nodes' latency, which the latency rule judged: a run with far nodes
	// must show some, or its "latency 0" means little.
	LatencyRefusals int
}

func (v *Verdict) add(kind, key string, at time.Time, format string, args ...any) {
	v.Found = append(v.Found, Violation{Kind: kind, Key: key, At: at, Detail: fmt.Sprintf(format, args...)})
}

// Count returns how many violations of kind v lists.
func (v *Verdict) Count(kind string) int {
	n := 0
	for _, f := range v.Found {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

// Kinds are the kinds in the order of the report line.
var Kinds = []string{"exclusion", "shared", "permits", "fencing", "lease", "lockout", "leftovers", "starved", "latency"}

// Check judges a whole record.
func Check(r *Record) *Verdict {
	v := &Verdict{}
	hs := newHolds(r)
	checkExclusion(v, r, hs)
	checkPermits(v, r)
	checkFencing(v, r, hs)
	checkLease(v, r, hs)
	checkLockout(v, r)
	checkKilled(v, r)
	checkStarved(v, r)
	checkLatency(v, r)
	checkLate(v, r)
	checkMetadata(v, r)
	checkTerms(v, r)
	checkSameFence(v, r)
	checkClaims(v, r)
	checkObserved(v, r)
	for _, k := range r.Leftovers {
		v.add("leftovers", k.Key, time.Time{}, "%s", k)
	}
	return v
}

// exclusive reports whether l holds its keys alone: neither shared nor a
// permit. Only such a Lock has a fence and writes.
func (l *Lock) exclusive() bool { return !l.Shared && l.Permits == 0 }

// AllKeys returns the keys l holds: Keys, or Key alone.
func (l *Lock) AllKeys() []string {
	if len(l.Keys) > 0 {
		return l.Keys
	}
	return []string{l.Key}
}

// windows returns the intervals in which l's holder may act on the key:
// while l has a hold (an Acquire returned it and not as many Releases have
// started since), within its claimed validity, and before a newer Lock of
// the same owner began to take the key over (takeover, the earliest start
// of such an Acquire; zero if none).
func (l *Lock) windows(takeover time.Time) []Interval {
	held := l.held()
	valid := l.valid()
	var out []Interval
	for _, h := range held {
		for _, p := range valid {
			iv := Intersect(h, p)
			if !takeover.IsZero() {
				iv.To = Earliest(iv.To, takeover)
			}
			if !iv.Empty() {
				out = append(out, iv)
			}
		}
	}
	return out
}

// valid returns when l claimed validity. At any moment the claim is the
// latest Proof's Until, lowered by the Extends started since. A Do's
// proofs are the moments its context was live, which only add up; one that
// returned nil claims its function's whole run, as its doc says.
func (l *Lock) valid() []Interval {
	if l.Do {
		ivs := make([]Interval, 0, len(l.Proofs)+1)
		for _, p := range l.Proofs {
			ivs = append(ivs, Interval{p.From, p.Until})
		}
		if l.DoNil {
			ivs = append(ivs, Interval{l.FnStart, l.FnEnd})
		}
		return Union(ivs)
	}
	type event struct {
		Proof
		cap bool
	}
	evs := make([]event, 0, len(l.Proofs)+len(l.Caps))
	for _, p := range l.Proofs {
		evs = append(evs, event{p, false})
	}
	for _, c := range l.Caps {
		evs = append(evs, event{c, true})
	}
	// At one instant a cap goes first: a Proof read then already knows it.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].From.Equal(evs[j].From) {
			return evs[i].cap && !evs[j].cap
		}
		return evs[i].From.Before(evs[j].From)
	})
	var out []Interval
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
			to = Earliest(to, evs[i+1].From)
		}
		out = append(out, Interval{e.From, to})
	}
	return Union(out)
}

// held sweeps the Lock's Acquire returns (+1) and Release starts (-1): a
// Release that finds no hold (a second Release) changes nothing.
func (l *Lock) held() []Interval {
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
	var out []Interval
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
				out = append(out, Interval{from, e.at})
			}
		}
	}
	if n > 0 {
		out = append(out, Interval{from, time.Unix(1<<40, 0)})
	}
	return out
}

// takeovers returns, per Lock, the moment a newer Lock of its owner began
// to take the key over: the start of the first Acquire of a different Lock
// with the same owner and key that returned after this Lock's first did.
//
// Or earlier, when another Lock of the owner acquired at the same time
// (their first Acquires overlap) and released first: on each node the
// later writer took the other's value over, whichever returned first, and
// a Release drops what its Lock took over (docs/owners.md: a takeover ends
// the earlier Lock; the order is the nodes', not the returns'). Such a
// Lock's window ends where that Release began. A Lock of the owner that
// returned before this one's Acquire began could not write after it, and
// its Release never ends this one.
func takeovers(locks []*Lock) map[*Lock]time.Time {
	type ownerKey struct{ key, owner string }
	groups := make(map[ownerKey][]*Lock)
	for _, l := range locks {
		if l.Owner != "" && len(l.Acquires) > 0 {
			k := ownerKey{l.Key, l.Owner}
			groups[k] = append(groups[k], l)
		}
	}
	out := make(map[*Lock]time.Time)
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
		for _, l := range g {
			for _, o := range g {
				if at, ok := releasedAlongside(l, o); ok && (out[l].IsZero() || at.Before(out[l])) {
					out[l] = at
				}
			}
		}
	}
	return out
}

// releasedAlongside reports when o, another Lock of l's owner whose first
// Acquire ran at the same time as l's, began the Release that deleted its
// values (the one that ended its last hold), if it did.
func releasedAlongside(l, o *Lock) (time.Time, bool) {
	if o == l || len(o.Releases) < len(o.Acquires) {
		return time.Time{}, false
	}
	a, b := l.Acquires[0], o.Acquires[0]
	if !b.Start.Before(a.End) || !a.Start.Before(b.End) {
		return time.Time{}, false
	}
	return o.Releases[len(o.Acquires)-1].Start, true
}

// checkExclusion reports every pair of different Locks of one key whose
// windows overlap, unless both are shared (readers hold together, which
// SharedTogether counts) or both permits (checkPermits judges them): a
// shared Lock overlapping an exclusive one (a reader beside a writer) is a
// shared finding; an exclusive Lock overlapping another or a permit, or a
// shared one overlapping a permit, an exclusion finding. A pair with a Do
// in it is a lease finding (the Do's window is its context's word),
// counted when the overlap exceeds the slack, and not at all when the Do's
// process was stopped then (a paused holder's overlap, procs.go).
func checkExclusion(v *Verdict, r *Record, hs *holds) {
	for _, o := range Overlaps(hs.all) {
		a, b, both := o.A.Holder, o.B.Holder, o.Both
		if a.Shared && b.Shared {
			v.SharedTogether++
			continue
		}
		if a.Permits > 0 && b.Permits > 0 {
			continue
		}
		kind := "exclusion"
		if (a.Shared || b.Shared) && a.Permits == 0 && b.Permits == 0 {
			kind = "shared"
		}
		if a.Do || b.Do {
			if both.Len() <= r.Slack {
				continue
			}
			if r.pausedDo([]*Lock{a, b}, both) {
				v.PausedOverlaps++
				continue
			}
			kind = "lease"
		}
		v.add(kind, o.A.Key, both.From, "%q: %s holds %s and %s holds %s: both in %s (%v)", o.A.Key,
			a.Describe(), o.A.Interval, b.Describe(), o.B.Interval, both, both.Len())
		v.Found[len(v.Found)-1].Holds = []*Lock{a, b}
	}
}

// Describe names l for a report.
func (l *Lock) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock #%d of %s", l.ID, l.Client)
	if l.Do {
		b.WriteString(" (Do)")
	}
	if l.Shared {
		b.WriteString(" (shared)")
	}
	if l.Permits > 0 {
		fmt.Fprintf(&b, " (permit, slot %d of %d)", l.Slot, l.Permits)
	}
	if len(l.Keys) > 0 {
		fmt.Fprintf(&b, " (keys %s)", strings.Join(l.Keys, ", "))
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
//   - an exclusive Lock of a fenced Client has a fence, not 0, and a
//     shared Lock or a permit has none (0), fenced Client or not;
//   - a shared Lock or a permit makes no write;
//   - a stale write, made by a Lock after a newer holder of the key had
//     written (one whose first Acquire started after the writer's first
//     returned), is refused: fencing exists for it. Outside the writer's
//     windows (its validity had ended, or it was released or taken over)
//     that is the stalled holder's case; within them, the two held the key
//     at once, which checkExclusion reports, and the store must still
//     refuse the older one;
//   - a write made within the writer's window, before any newer holder
//     wrote, is accepted, unless a Lock that held the key at the same
//     time wrote a higher fence (two holders whose Acquires ran at once,
//     which checkExclusion reports);
//   - a fenced Lock whose first Acquire started after another's first
//     returned has a higher fence.
//
// A write made outside the writer's windows, after another Lock held the
// key meanwhile, by a writer whose process was stopped since it acquired,
// is a paused holder's overlap (PausedOverlaps), judged by the same rules.
func checkFencing(v *Verdict, r *Record, hs *holds) {
	byID := make(map[int]*Lock)
	for _, l := range r.Locks {
		byID[l.ID] = l
		switch {
		case l.Do || len(l.Acquires) == 0:
		case !l.exclusive() && l.Fence != 0:
			v.add("fencing", l.Key, l.Acquires[0].End, "%q: %s has a fence", l.Key, l.Describe())
		case l.exclusive() && l.Fenced && l.Fence == 0:
			v.add("fencing", l.Key, l.Acquires[0].End, "%q: %s of a fenced Client has no fence", l.Key, l.Describe())
		}
	}
	writes := slices.Clone(r.Writes)
	sort.Slice(writes, func(i, j int) bool { return writes[i].Seq < writes[j].Seq })
	newest := make(map[string]*Lock) // per key, the writer so far whose first Acquire started last
	top := make(map[string]*Lock)    // per key, the writer of the highest fence the store accepted
	for _, w := range writes {
		l := byID[w.LockID]
		if l == nil || len(l.Acquires) == 0 {
			v.add("fencing", w.Key, w.At, "%q: a write of lock #%d, which no Acquire returned", w.Key, w.LockID)
			continue
		}
		if !l.exclusive() {
			v.add("fencing", w.Key, w.At, "%q: a write of %s, which has no fence", w.Key, l.Describe())
			continue
		}
		within := slices.ContainsFunc(hs.of[l], func(iv Interval) bool { return iv.Contains(w.At) })
		n := newest[w.Key]
		superseded := n != nil && n.Acquires[0].Start.After(l.Acquires[0].End)
		if !within && r.paused(l.Proc, Interval{l.Acquires[0].End, w.At}) && hs.heldByOther(w.Key, l, hs.meantime(l, w.At)) {
			v.PausedOverlaps++
		}
		// The store refused l for the fence of top, which held the key
		// at the same time as l: their Acquires ran at once, so neither
		// is the newer, and the refusal is the store's part in an
		// overlap that checkExclusion reports.
		beside := func() bool {
			t := top[w.Key]
			return t != nil && t != l && slices.ContainsFunc(hs.of[t], func(a Interval) bool {
				return slices.ContainsFunc(hs.of[l], func(b Interval) bool { return !Intersect(a, b).Empty() })
			})
		}
		switch {
		case !w.Accepted && (!within || superseded || beside()):
			v.StaleRefused++
			if within {
				v.OverlapRefused++
			}
		case w.Accepted && superseded:
			v.StaleAccepted++
			how := "after"
			if within {
				how = "within its claimed validity (the two held the key at once), after"
			}
			v.add("fencing", w.Key, w.At, "%q: store accepted a stale write of %s at %s, %s %s wrote",
				w.Key, l.Describe(), w.At.Format("15:04:05.000000"), how, n.Describe())
		case !w.Accepted && within:
			v.add("fencing", w.Key, w.At, "%q: store refused a write of %s at %s, within its validity",
				w.Key, l.Describe(), w.At.Format("15:04:05.000000"))
		}
		if n == nil || l.Acquires[0].Start.After(n.Acquires[0].Start) {
			newest[w.Key] = l
		}
		if t := top[w.Key]; w.Accepted && (t == nil || w.Fence >= t.Fence) {
			top[w.Key] = l
		}
	}
	// Successive holders: sweep the Locks by the start of their first
	// Acquire, keeping the highest fence of those whose first Acquire had
	// returned by then.
	byKey := make(map[string][]*Lock)
	for _, l := range r.Locks {
		if l.Fence != 0 && !l.Do && len(l.Acquires) > 0 {
			for _, k := range l.AllKeys() {
				byKey[k] = append(byKey[k], l)
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		ls := byKey[key]
		byEnd := slices.Clone(ls)
		sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].Acquires[0].End.Before(byEnd[j].Acquires[0].End) })
		sort.Slice(ls, func(i, j int) bool { return ls[i].Acquires[0].Start.Before(ls[j].Acquires[0].Start) })
		var top *Lock
		next := 0
		for _, b := range ls {
			for ; next < len(byEnd) && !byEnd[next].Acquires[0].End.After(b.Acquires[0].Start); next++ {
				if top == nil || byEnd[next].Fence > top.Fence {
					top = byEnd[next]
				}
			}
			if top != nil && top != b && b.Fence <= top.Fence {
				v.add("fencing", key, b.Acquires[0].End, "%q: %s acquired by %s, then %s got fence %d, not above",
					key, top.Describe(), top.Acquires[0].End.Format("15:04:05.000000"), b.Describe(), b.Fence)
			}
		}
	}
}

// checkLease reports a KeepAlive context seen live at or after the Lock's
// Until (both readings around the look, the later of them) by more than the
// slack, unless the Lock's process was stopped between that Until and the
// look: its timer could not fire (a paused holder's overlap if another
// Lock held the key meanwhile). A Do's findings come from checkExclusion.
func checkLease(v *Verdict, r *Record, hs *holds) {
	for _, o := range r.Leases {
		until := Latest(o.Before, o.After)
		if o.Live && o.At.Sub(until) > r.Slack {
			if l := hs.byID[o.LockID]; l != nil && r.paused(l.Proc, Interval{until, o.At}) {
				if hs.heldByOther(o.Key, l, Interval{until, o.At}) {
					v.PausedOverlaps++
				}
				continue
			}
			v.add("lease", o.Key, o.At, "%q: lock #%d's KeepAlive context live at %s, %v after Until %s",
				o.Key, o.LockID, o.At.Format("15:04:05.000000"), o.At.Sub(until), until.Format("15:04:05.000000"))
		}
	}
}

// checkLockout reports a key that could not be acquired, exclusive,
// shared or all its permits, within the bound once the faults were healed.
func checkLockout(v *Verdict, r *Record) {
	for _, p := range r.Probes {
		if p.Err != nil || p.Took > r.Bound {
			what := "acquire"
			switch {
			case p.Shared:
				what = "shared acquire"
			case p.Permits > 0:
				what = fmt.Sprintf("acquire of its %d permits", p.Permits)
			}
			v.add("lockout", p.Key, time.Time{}, "%q: %s after healing took %v (bound %v): %v", p.Key, what, p.Took.Round(time.Millisecond), r.Bound, p.Err)
		}
	}
}

// Counts is the number of violations of each kind, in the order of Kinds,
// then those of the kinds Kinds does not list (terms, validity, ...) that
// were found, by name.
func (v *Verdict) Counts() string {
	parts := make([]string, len(Kinds))
	for i, k := range Kinds {
		parts[i] = fmt.Sprintf("%s %d", k, v.Count(k))
	}
	other := make(map[string]int)
	for _, f := range v.Found {
		if !slices.Contains(Kinds, f.Kind) {
			other[f.Kind]++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(other)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, other[k]))
	}
	return strings.Join(parts, ", ")
}

// Describe lists the first max findings.
func (v *Verdict) Describe(max int) string {
	var b strings.Builder
	for i, f := range v.Found {
		if i == max {
			fmt.Fprintf(&b, "... and %d more\n", len(v.Found)-max)
			break
		}
		fmt.Fprintf(&b, "%s: %s\n", f.Kind, f.Detail)
	}
	return b.String()
}
