package history

import (
	"slices"
	"time"
)

// This file judges the Clients' latency estimates (the latency rule): a
// Client refuses a TTL too short for the nodes' latency as it learned it
// (ErrNotAcquired naming the latency, the TTL and the fix), and must learn
// a node's latency back down once the node is near again, or a node that
// was far for a while, or stopped, refuses every short TTL long after. A
// refusal is a finding when, over LatencyQuiet before its call and during
// it, a quorum of nodes were near enough that their round trips took at
// most a quarter of the validity the TTL leaves, and no fault touched
// them, or the refused Client's links to them (Busy: a fault on another
// process's link does not slow this one's replies, nor teach its
// estimates anything). Every excuse errs wide: any fault at all on a link
// excuses the node, however lightly it slowed it.

// LatencyRefusal is a call its Client refused because the nodes' latency,
// as it had learned it, left its TTL no validity.
type LatencyRefusal struct {
	Proc string
	TTL  time.Duration
	Span
}

// checkLatency reports a LatencyRefusal made while a quorum of nodes was
// near and quiet (above). Not judged when LatencyQuiet is 0 or the nodes'
// round trips are not known.
func checkLatency(v *Verdict, r *Record) {
	if r.LatencyQuiet <= 0 || len(r.RoundTrips) == 0 || r.Drift == nil {
		return
	}
	quorum := len(r.RoundTrips)/2 + 1
	for _, ref := range r.LatencyRefusals {
		v.LatencyRefusals++
		budget := ref.TTL - r.Drift(ref.TTL)
		window := Interval{ref.Start.Add(-r.LatencyQuiet), ref.End}
		var near []int
		for i, rt := range r.RoundTrips {
			if 4*rt < budget && !r.busyWithin(i, ref.Proc, window) {
				near = append(near, i)
			}
		}
		if len(near) >= quorum {
			v.add("latency", "", ref.Start, "process %s: a TTL of %v refused as too short for the nodes' latency over %s, while nodes %v, a quorum, answered within a quarter of the %v of validity it leaves (round trips %v) and no fault touched them since %v before",
				ref.Proc, ref.TTL, ref.Span.Interval(), near, budget, r.RoundTrips, r.LatencyQuiet)
		}
	}
}

// busyWithin reports whether a fault acted on node, or on process proc's
// link to it (Busy), at any moment of iv.
func (r *Record) busyWithin(node int, proc string, iv Interval) bool {
	return slices.ContainsFunc(r.Busy, func(b NodeDown) bool {
		return b.Node == node && (b.Proc == "" || b.Proc == proc) && !Intersect(b.Interval, iv).Empty()
	})
}
