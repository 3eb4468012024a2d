package history

import (
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// A released Lock's write that lands on a node after the Release, and
// stays, is a key that nobody holds and nobody can take: the lockout this
// library exists to prevent (docs/late-writes.md). The nemesis reads the
// lock keys off every node as it runs (Record.Seen); checkLate judges what
// it saw against the Locks' Releases.

// LateStay is how long a released Lock's value must have stayed on a node,
// after it was written there, for checkLate to report it: longer than any
// delete that was still on its way could take once the node runs commands
// again (a delete is tried again within 400 ms), so that a write that
// landed before its delete is never reported. Time in which the node was
// cut off (Record.Down, up to each fault's heal) does not count: a 10-minute
// nemesis run saw a value written 107 ms before its node was killed, whose
// delete waited for the node's restart (an AOF load of about a second).
const LateStay = time.Second

// LateMargin is how much later than the Release's return a write must have
// been made, by the node's clock, for checkLate to report it: the nodes'
// clocks drift within the assumption, and a value's time to live is read
// after the value.
const LateMargin = 50 * time.Millisecond

// checkLate reports, as leftovers, each value in r.Seen of a released Lock
// that was written after the Lock's first Release returned and stayed at
// least LateStay: a late write that nothing refused. The moment a value was
// written is bounded from its time to live when seen: no earlier than At +
// TTL − the longest TTL the Lock asked for (a value lives no longer than
// the TTL it was written with), and it had stayed at least the shortest
// TTL − TTL; each bound errs toward no finding. Values of Locks of
// an owner (whose Locks share a token), of shared Locks and permits (whose
// values are not one Lock's) and of Do calls (whose Lock is never seen) are
// not judged.
func checkLate(v *Verdict, r *Record) {
	if len(r.Seen) == 0 {
		return
	}
	byToken := make(map[string]*Lock)
	for _, l := range r.Locks {
		if l.Token != "" && l.Owner == "" && l.exclusive() && !l.Do && len(l.TTLs) > 0 {
			byToken[l.Token] = l
		}
	}
	reported := make(map[*Lock]bool)
	for _, s := range r.Seen {
		l := byToken[valueToken(s.Value)]
		if l == nil || reported[l] || len(l.Releases) == 0 || l.Releases[0].End.IsZero() || s.TTL <= 0 {
			continue
		}
		shortest, longest := l.TTLs[0], l.TTLs[0]
		for _, d := range l.TTLs {
			shortest, longest = min(shortest, d), max(longest, d)
		}
		written := s.At.Add(s.TTL - longest)
		released := l.Releases[0].End
		stayed := shortest - s.TTL
		// A delete on its way to a node cut off (stopped, killed and
		// restarting, its network cut, or the Lock's process alone cut
		// from it) runs once the node is back: the time cut off is no
		// stay.
		up := stayed - r.cutWithin(s.Node, l.Proc, Interval{written, s.At})
		if written.After(released.Add(LateMargin)) && up >= LateStay {
			reported[l] = true
			v.add("leftovers", s.Key, written, "%s: lock #%d (%s), released at %s, written again %v later, seen %v after that",
				s, l.ID, l.Client, released.Format("15:04:05.000000"), written.Sub(released).Round(time.Millisecond),
				(shortest - s.TTL).Round(time.Millisecond))
		}
	}
}

// valueToken is the token of the Lock that wrote a lock key's value (its
// token, its metadata, a dot and a generation), "" for any other value: a
// refusal or an earlier version's tombstone, a shared key, permits.
func valueToken(v string) string {
	token, _, _ := strings.Cut(valuePrefix(v), script.MetaMark)
	token, _, _ = strings.Cut(token, "~")
	return token
}

// valuePrefix is the prefix of the Lock that wrote a lock key's value,
// without its dot, "" for any other value.
func valuePrefix(v string) string {
	if v == "" || strings.ContainsAny(v[:1], "!^#") {
		return ""
	}
	if i := strings.IndexAny(v, "|,"); i >= 0 {
		v = v[:i] // what an owner's takeover replaced; what an earlier version carried
	}
	dot := strings.LastIndexByte(v, '.')
	if dot <= 0 {
		return ""
	}
	return v[:dot]
}

// checkMetadata: a value seen on a node carries the metadata of the Lock
// whose token it holds (WithMetadata), whatever the faults did to it; a
// value of a Lock of an owner (whose Locks share a token) is not judged.
func checkMetadata(v *Verdict, r *Record) {
	byToken := make(map[string]*Lock)
	for _, l := range r.Locks {
		if l.Token != "" && l.Owner == "" {
			byToken[l.Token] = l
		}
	}
	for _, s := range r.Seen {
		l := byToken[valueToken(s.Value)]
		if l == nil {
			continue
		}
		if md := script.Metadata(valuePrefix(s.Value)); md != l.Metadata {
			v.add("metadata", s.Key, s.At, "%s: lock #%d (%s) stored metadata %q, the node's value carries %q", s, l.ID, l.Client, l.Metadata, md)
		}
	}
}

// checkTerms: a leadership's term is higher than that of every leadership
// of its key that was elected (its Campaign returned) before its own
// Campaign began, and is not 0. Terms are fences, which docs/fencing.md
// argues increase from holder to holder: this is that argument's claim for
// the order of election, which a store that refuses lower terms relies on.
func checkTerms(v *Verdict, r *Record) {
	byKey := make(map[string][]*Lock)
	for _, l := range r.Locks {
		if !l.Election || len(l.Acquires) == 0 {
			continue
		}
		if l.Fence == 0 {
			v.add("terms", l.Key, l.Acquires[0].End, "%q: %s was elected without a term", l.Key, l.Describe())
			continue
		}
		byKey[l.Key] = append(byKey[l.Key], l)
	}
	for key, ls := range byKey {
		slices.SortFunc(ls, func(a, b *Lock) int { return a.Acquires[0].End.Compare(b.Acquires[0].End) })
		// top is, of the leaderships elected so far (in the order of
		// their election), the one with the highest term.
		var top *Lock
		j := 0
		for _, l := range ls {
			for ; j < len(ls) && ls[j].Acquires[0].End.Before(l.Acquires[0].Start); j++ {
				if top == nil || ls[j].Fence > top.Fence {
					top = ls[j]
				}
			}
			if top != nil && l.Fence <= top.Fence {
				v.add("terms", key, l.Acquires[0].End, "%q: %s, elected from %s, has a term no higher than that of %s, elected at %s",
					key, l.Describe(), l.Acquires[0].Start.Format("15:04:05.000000"), top.Describe(), top.Acquires[0].End.Format("15:04:05.000000"))
			}
		}
	}
}

// Observation is one Election.Leader call on Key in Span: the leader it
// reported (Term, Value), or None when it reported ErrNoLeader.
type Observation struct {
	Key   string
	Span  Span
	Term  uint64
	Value string
	None  bool
}

// observedSlack is how long after a leadership's last claimed validity
// (or its Release) a quorum may still hold its value for an observer: the
// nodes' keys outlive the holder's validity by the drift allowance, 1 %
// of the TTL and 2 ms (redlock.DefaultDriftFactor), here at most that of
// the longest TTL, 2 s, with room for a late timer.
const observedSlack = 50 * time.Millisecond

// checkObserved: a leader an observer reported was a real leader at some
// time within the observation: a leadership of the key with that term and
// value, elected (its Campaign begun) before the observation ended, and not
// ended (Lock.observableUntil, and observedSlack) before the observation
// began. A term no recorded leadership had is
// excused only while a campaign of the key, begun before, had its process
// killed under it (within its TTL of the kill). A report of no leader is
// not judged: an observer may miss a leader, never invent one.
func checkObserved(v *Verdict, r *Record) {
	byTerm := make(map[string]map[uint64]*Lock)
	for _, l := range r.Locks {
		if !l.Election || len(l.Acquires) == 0 {
			continue
		}
		if byTerm[l.Key] == nil {
			byTerm[l.Key] = make(map[uint64]*Lock)
		}
		byTerm[l.Key][l.Fence] = l
	}
	killed := make(map[string]time.Time)
	for _, k := range r.Kills {
		killed[k.Proc] = k.At
	}
	// inFlight: a campaign of the key whose process was killed before it
	// returned (or before its leadership was recorded) may have been
	// elected, and its value live until its TTL after the kill.
	inFlight := func(o Observation) bool {
		for _, w := range r.Waits {
			if !w.End.IsZero() || w.Shared || !slices.Contains(w.Keys, o.Key) || !w.Start.Before(o.Span.End) {
				continue
			}
			if at, ok := killed[w.Proc]; !ok || o.Span.Start.Before(at.Add(w.TTL+observedSlack+r.Slack)) {
				return true
			}
		}
		return false
	}
	for _, o := range r.Observations {
		if o.None {
			continue
		}
		l := byTerm[o.Key][o.Term]
		if l == nil && inFlight(o) {
			continue
		}
		if l == nil {
			v.add("observers", o.Key, o.Span.End, "%q: an observer reported term %d (value %q) from %s to %s, which no leadership of the key had",
				o.Key, o.Term, o.Value, o.Span.Start.Format("15:04:05.000000"), o.Span.End.Format("15:04:05.000000"))
			continue
		}
		end := l.observableUntil()
		switch {
		case o.Value != l.Metadata:
			v.add("observers", o.Key, o.Span.End, "%q: an observer reported %s with value %q, which it campaigned with %q", o.Key, l.Describe(), o.Value, l.Metadata)
		case o.Span.End.Before(l.Acquires[0].Start):
			v.add("observers", o.Key, o.Span.End, "%q: an observer reported %s from %s to %s, before its campaign began at %s",
				o.Key, l.Describe(), o.Span.Start.Format("15:04:05.000000"), o.Span.End.Format("15:04:05.000000"), l.Acquires[0].Start.Format("15:04:05.000000"))
		case !end.IsZero() && o.Span.Start.After(end.Add(observedSlack+r.Slack)):
			v.add("observers", o.Key, o.Span.End, "%q: an observer reported %s from %s to %s, after its leadership ended at %s",
				o.Key, l.Describe(), o.Span.Start.Format("15:04:05.000000"), o.Span.End.Format("15:04:05.000000"), end.Format("15:04:05.000000"))
		}
	}
}

// observableUntil is until when l's values may stand on a quorum, as an
// observer reads them: its last claimed validity, or its Releases' end;
// and when no Release of it returned nil, also its longest TTL past that
// validity, which a renewal sent before it that landed unconfirmed gives
// its values (an unproven renewal: the holder saw no quorum and ended
// its lease, the nodes kept the key).
func (l *Lock) observableUntil() time.Time {
	var end time.Time
	for _, p := range l.Proofs {
		end = Latest(end, p.Until)
	}
	if !l.Released && !end.IsZero() && len(l.TTLs) > 0 {
		end = end.Add(slices.Max(l.TTLs))
	}
	for _, s := range l.Releases {
		end = Latest(end, s.End)
	}
	return end
}
