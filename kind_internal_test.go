package redlock

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// opSink keeps the ops TestOpBuildersKeepOpsOffTheHeap builds.
var opSink engine.Op

// TestOpBuildersKeepOpsOffTheHeap: building a Lock's op, whatever its kind,
// allocates less per call than one op's size: the op itself stays off the
// heap, and only boxed arguments (a value's string, a count) are
// allocated. An op handed through the kind interface by pointer escapes
// (two allocations of an op's size per acquire and release, found by
// benchstat on BenchmarkAcquireRelease); address is a function for that
// reason.
func TestOpBuildersKeepOpsOffTheHeap(t *testing.T) {
	v := script.Value{Prefix: "tok.", Holder: "tok.", Gen: 3, S: "tok.3"}
	ttl, horizon := any(int64(10_000)), any(int64(60_000))
	opSize := uint64(unsafe.Sizeof(engine.Op{}))
	for name, l := range map[string]*Lock{
		"exclusive": {key: "k", fenceKey: "k:fence", kind: exclusiveKind{}},
		"shared":    {key: "k", kind: sharedKind{}},
		"permit":    {key: "k", kind: permitKind{}, permitArg: int64(3), slotArg: int64(1), pref: -1},
		"all":       {key: "a", keys: []string{"a", "b"}, keysAndCounters: []string{"a", "b", "a:fence", "b:fence"}, kind: allKind{}},
	} {
		for op, build := range map[string]func(){
			"acquire":        func() { opSink = l.kind.acquireOp(l, v, ttl, nil) },
			"acquire fenced": func() { opSink = l.kind.acquireOp(l, v, ttl, horizon) },
			"extend":         func() { opSink = l.kind.extendOp(l, v, ttl, 7, horizon) },
			"restore":        func() { opSink = l.kind.restoreOp(l, v, ttl) },
			"delete":         func() { opSink = l.kind.deleteOp(l, v, 0, 3) },
		} {
			const runs = 10_000
			build()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				build()
			}
			runtime.ReadMemStats(&after)
			if per := (after.TotalAlloc - before.TotalAlloc) / runs; per >= opSize {
				t.Errorf("%s %s: %d bytes allocated per op built, an op is %d: it escapes", name, op, per, opSize)
			}
		}
	}
}
