package history

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file judges what a node holds while a run goes on: a value that
// outlives the Locks that wrote it (a write that landed after its Lock's
// Release, a failed attempt's write that its rollback missed) keeps the key
// from everyone for its whole TTL. The rule reads nothing of the value's
// format but two facts a user can see: a value that starts with "!" (a
// Lock's refusal, or an earlier version's tombstone) holds the key for
// nobody (docs/late-writes.md), and a Lock's values hold its Token.

// IsHolder reports whether a lock key's value v holds the key for some
// Lock: every value but one that starts with "!".
func IsHolder(v string) bool { return !strings.HasPrefix(v, "!") }

// Writer is one Lock as the residue rule sees it: the token its values
// hold, and when it ended: its last Release returned, or (a Lock its Client
// closed under it) its values' expiry bound. Ended is zero while the Lock
// may still hold, be renewed or be released.
type Writer struct {
	ID    int // the Lock's ID in the record, for reports
	Token string
	Ended time.Time
	// Owner: a Lock of an owner (WithOwner), whose token is the owner's:
	// the attempts of the owner's other Locks write values that hold it
	// too, and a value that holds it may be one of theirs.
	Owner bool
}

// Sighting is a node's value of a lock key, looked at when the node and
// every path to it had been quiet since Quiet: no fault acting on them, no
// chunk held back on its way, the node up.
type Sighting struct {
	Node       int
	Key, Value string
	TTL        time.Duration
	At, Quiet  time.Time
}

// String describes s for a report.
func (s Sighting) String() string {
	return fmt.Sprintf("node %d: %s=%q (ttl %v)", s.Node, s.Key, s.Value, s.TTL)
}

// Holding returns the writers whose token value holds.
func Holding(value string, writers []Writer) []Writer {
	var out []Writer
	for _, w := range writers {
		if w.Token != "" && strings.Contains(value, w.Token) {
			out = append(out, w)
		}
	}
	return out
}

// Residue judges one sighting. writers are the Locks that wrote s.Key
// (any whose token s.Value may hold), and acquiring is the end of the
// latest acquire call of s.Key, or s.At while one is under way: a value
// no known Lock wrote is an attempt's, which may be in flight until then.
// The value is residue, and Residue returns a finding, when it holds the
// key for some Lock (IsHolder) and, more than bound after the later of
// s.Quiet and the end of every writer it holds (and of the last acquire,
// when it holds none or an owner's token), it is still there: a Lock whose
// Release returned, or an attempt that failed, left it, and nothing will
// take it away before its TTL.
func Residue(s Sighting, writers []Writer, acquiring time.Time, bound time.Duration) (Violation, bool) {
	if !IsHolder(s.Value) {
		return Violation{}, false
	}
	from := s.Quiet
	var held []string
	owner := false
	for _, w := range Holding(s.Value, writers) {
		if w.Ended.IsZero() {
			return Violation{}, false // a live Lock's
		}
		from = Latest(from, w.Ended)
		held = append(held, fmt.Sprintf("lock #%d (ended %s)", w.ID, w.Ended.Format("15:04:05.000000")))
		owner = owner || w.Owner
	}
	whose := strings.Join(held, ", ")
	switch {
	case len(held) == 0:
		from = Latest(from, acquiring)
		whose = fmt.Sprintf("no Lock returned (a failed attempt's: the last acquire of the key ended %s)", acquiring.Format("15:04:05.000000"))
	case owner:
		from = Latest(from, acquiring)
		whose += fmt.Sprintf(", or a failed attempt of their owner (the last acquire of the key ended %s)", acquiring.Format("15:04:05.000000"))
	}
	if s.At.Sub(from) <= bound {
		return Violation{}, false
	}
	return Violation{Kind: "leftovers", Key: s.Key, At: s.At, Detail: fmt.Sprintf(
		"%q: %s at %s, %v after its writers ended and the node was quiet (bound %v): written by %s",
		s.Key, s, s.At.Format("15:04:05.000000"), s.At.Sub(from), bound, whose)}, true
}

// LiveValue is value v of a lock key as its node reads it at its clock's
// now: a key taken shared ("^") or by permits ("#") holds an entry per
// Lock, "deadline=item", and one whose deadline has passed holds nothing
// (docs/shared.md); those are left out, and a value left with no Lock's
// entry is "". Any other value is v.
func LiveValue(v string, now time.Time) string {
	if v == "" || (v[0] != '^' && v[0] != '#') {
		return v
	}
	head, rest := v[:1], v[1:]
	if v[0] == '#' {
		count, entries, ok := strings.Cut(v[1:], ",")
		if !ok {
			return v
		}
		head, rest = "#"+count+",", entries
	}
	var live []string
	held := false
	for _, e := range strings.Split(rest, ",") {
		dl, item, ok := strings.Cut(e, "=")
		ms, err := strconv.ParseInt(dl, 10, 64)
		if !ok || err != nil {
			return v // not a form this reads: judged whole
		}
		if ms > now.UnixMilli() {
			live = append(live, e)
			held = held || !strings.HasPrefix(item, "!")
		}
	}
	if !held {
		return ""
	}
	return head + strings.Join(live, ",")
}
