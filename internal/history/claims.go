package history

import (
	"fmt"
	"slices"
	"time"
)

// Two rules on what Redlock's safety argument rests on, which the
// overlaps of holds find only when the faults happen to turn them into two
// holders: a Lock claims no validity beyond what the nodes' clocks allow
// (checkClaims), and no two holders of a key share a fence or a term
// (checkSameFence).

// Claim is one validity a Lock claimed, with what bounds it: the nodes
// keep a value written no earlier than Start for at least TTL by their
// clocks, which may run ahead of the Client's by the drift allowance
// (Record.Drift), so that a claim is valid until Start + TTL − drift at the
// latest. Start is no earlier than the round that set Until began: the
// call's start, or, when the recorder knows more, the last command that
// carried the Lock's token before Until was read (a round reads its start,
// then sends: a validity counted from the round's end is later than any
// such send). TTL is the longest the Lock's calls asked for so far.
type Claim struct {
	Start time.Time
	TTL   time.Duration
	Until time.Time
}

// checkClaims reports, as "validity", a claim whose Until is past its
// Start + TTL − the drift allowance for TTL: a Lock that believes itself
// held after a node whose clock runs fast within the assumption may have
// expired its value, which no overlap shows unless another holder came in
// that moment. Each Lock is reported once, at its first such claim. Not
// judged without Record.Drift.
func checkClaims(v *Verdict, r *Record) {
	if r.Drift == nil {
		return
	}
	for _, l := range r.Locks {
		for _, c := range l.Claims {
			bound := c.Start.Add(c.TTL - r.Drift(c.TTL))
			if c.Until.After(bound) {
				v.add("validity", l.Key, c.Start, "%q: %s claimed validity until %s, %v past what a round begun by %s for %v allows (%s: the TTL less the drift allowance %v)",
					l.Key, l.Describe(), c.Until.Format("15:04:05.000000"), c.Until.Sub(bound), c.Start.Format("15:04:05.000000"), c.TTL,
					bound.Format("15:04:05.000000"), r.Drift(c.TTL))
				break // one finding a Lock
			}
		}
	}
}

// checkSameFence reports two different Locks of one key with one fence,
// whenever they held it: fences strictly increase from holder to holder,
// whatever the order of their calls (docs/fencing.md: each fence is above
// the counter committed on a quorum by the one before, and two quorums
// meet), so an equal fence is one holder's fence not raised. Exclusive
// Locks are "fencing" findings, leaderships (whose fences are their terms)
// "terms" ones; each Lock is named once, beside the first Lock with its
// fence. The successive-holder rules (checkFencing, checkTerms)
// judge the order; this one judges calls that ran at the same time too,
// where neither is the later.
func checkSameFence(v *Verdict, r *Record) {
	type keyFence struct {
		key   string
		fence uint64
	}
	seen := make(map[keyFence]*Lock) // the first Lock (by ID) with the fence
	locks := slices.Clone(r.Locks)
	slices.SortStableFunc(locks, func(a, b *Lock) int { return a.ID - b.ID })
	for _, l := range locks {
		if l.Fence == 0 || l.Do || !l.exclusive() || len(l.Acquires) == 0 {
			continue
		}
		for _, k := range l.AllKeys() {
			kf := keyFence{k, l.Fence}
			o := seen[kf]
			if o == nil {
				seen[kf] = l
				continue
			}
			if o.ID == l.ID {
				continue
			}
			kind := "fencing"
			if o.Election && l.Election {
				kind = "terms"
			}
			v.add(kind, k, l.Acquires[0].End, "%q: %s, acquired %s, and %s, acquired %s, have one fence %d",
				k, o.Describe(), spanText(o.Acquires[0]), l.Describe(), spanText(l.Acquires[0]), l.Fence)
		}
	}
}

func spanText(s Span) string {
	return fmt.Sprintf("[%s, %s]", s.Start.Format("15:04:05.000000"), s.End.Format("15:04:05.000000"))
}
