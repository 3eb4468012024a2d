package redlock

// A fence is a hybrid of a per-key counter and the nodes' clocks, both read
// by the acquire script in one atomic step with taking the key. Each node
// contributes its reading, the larger of its counter and its clock in
// microseconds since the Unix epoch, and the fence is one more than the
// highest reading of the quorum that confirmed. The counter alone makes
// fences increase while counters survive (docs/fencing.md has the
// argument); the clock part is what a node whose counter was lost (a
// restart without persistence, FLUSHALL, eviction, a failover to a replica
// that lacked it, or the counter's own expiry after the horizon) still
// contributes: a value above every fence issued before the loss, as long as
// the clocks of the nodes agree to within the time since. The clock only
// ever raises a fence.
//
// Fences are near 1.8e15 today (microseconds since 1970) and grow by about
// 3.2e13 a year: far inside a signed 64-bit column, and below 2^53, so the
// scripts compare them exactly as Lua numbers until the year 2255.

// fenceReading is one node's contribution to a fence: the larger of its
// counter and its clock (seconds and microseconds, as TIME gives them).
func fenceReading(counter, sec, usec int64) int64 {
	return max(counter, sec*1_000_000+usec)
}

// fenceAbove returns the fence for a quorum whose readings are given: one
// more than the highest.
func fenceAbove(readings ...int64) uint64 {
	var highest int64
	for _, r := range readings {
		highest = max(highest, r)
	}
	return uint64(highest) + 1
}
