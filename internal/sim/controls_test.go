package sim

import (
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/history"
)

// The controls: runs beyond the assumptions, each of which must find what
// the checker claims to catch, as the nemesis's do. Each stops at its
// first finding, within simulated time; its seed is printed, and
// -sim.seed replays it.

// exclusiveOnly is a run of exclusive Locks alone on three keys, where two
// holders meet soonest.
func exclusiveOnly(seed uint64, faults []string, every, guard time.Duration) Config {
	return Config{
		Seed: seed, Duration: 10 * time.Minute, Nodes: 5, Slots: 3, Workers: 6, Keys: 3,
		Latency: 200 * time.Microsecond, Guard: guard, Faults: faults, FaultEvery: every,
		Think: 100 * time.Millisecond, ResidueBound: 2 * time.Second,
	}
}

func controlSeed() uint64 {
	if *simSeed != 0 {
		return *simSeed
	}
	return uint64(time.Now().UnixNano()%1_000_000) + 1000
}

func TestSimControls(t *testing.T) {
	t.Run("unguarded-restart-empty", func(t *testing.T) {
		// No restart guard, nodes restarted empty: a node that held A's
		// key votes for B at once.
		cfg := exclusiveOnly(controlSeed(), []string{FaultRestartEmpty}, 200*time.Millisecond, 0)
		cfg.Stop = func(v *history.Verdict) bool { return v.Count("exclusion") > 0 }
		res, _ := runSim(t, cfg)
		if res.Verdict.Count("exclusion") == 0 {
			t.Errorf("no two holders in %v without the restart guard\n%s", res.Simulated, res.Summary(cfg))
		}
		logFirst(t, res, "exclusion")
	})
	t.Run("clock-beyond", func(t *testing.T) {
		// A node's clock steps forward 1 to 6 s, one node every 10 to 80
		// ms: over one hold a majority may have stepped, beyond the
		// drift assumption. The restart guard is on (no node restarts).
		// Two holders, and the fenced store refusing the older one's
		// writes made within its own claim, accepting no stale write.
		cfg := exclusiveOnly(controlSeed(), []string{FaultClockBeyond}, 45*time.Millisecond, MaxTTL)
		cfg.Stop = func(v *history.Verdict) bool { return v.Count("exclusion") > 0 && v.OverlapRefused > 0 }
		res, _ := runSim(t, cfg)
		v := res.Verdict
		if v.Count("exclusion") == 0 || v.OverlapRefused == 0 || v.StaleAccepted > 0 {
			t.Errorf("clocks beyond the assumption: exclusion %d, stale writes refused within the writer's claim %d (want > 0), accepted %d (want 0)\n%s",
				v.Count("exclusion"), v.OverlapRefused, v.StaleAccepted, res.Summary(cfg))
		}
		logFirst(t, res, "exclusion")
	})
	t.Run("clock-back-beyond", func(t *testing.T) {
		// Commands held back 3 to 5 s, while nodes' clocks step back 6 to
		// 10 s, beyond the drift assumption: a copy whose deadline had
		// passed, and whose Lock's delete left no refusal, reaches a node
		// whose clock reads before that deadline again, and lands
		// (docs/late-writes.md, what a clock step does); and an entry of a
		// shared key or permits, which expires by the node's clock, lives
		// on for the size of the step. The late-write rule (a released
		// Lock's value "written again") or the residue rule (a value that
		// outlives every Lock that wrote it: an owner's, a shared Lock's,
		// a failed attempt's, which the late-write rule does not judge)
		// must see what they leave.
		// No restart guard: it is timed by the nodes' clocks, which step
		// back here.
		cfg := Guarded(controlSeed(), 10*time.Minute)
		cfg.Guard = 0
		cfg.Faults = []string{FaultLateBeyond, FaultLateBeyond, FaultClockBackBeyond}
		cfg.FaultEvery = 300 * time.Millisecond
		late := func(v *history.Verdict) bool {
			return slices.ContainsFunc(v.Found, func(f history.Violation) bool { return f.Kind == "leftovers" })
		}
		cfg.Stop = late
		res, _ := runSim(t, cfg)
		if !late(res.Verdict) {
			t.Errorf("no value left by commands landing 3 to 5 s late on nodes whose clocks stepped back\n%s", res.Summary(cfg))
		}
		logFirst(t, res, "leftovers")
	})
}

// logFirst logs the run's first finding of kind, with its trace.
func logFirst(t *testing.T, res *Result, kind string) {
	t.Helper()
	for _, f := range res.Verdict.Found {
		if f.Kind == kind {
			t.Logf("found in %v: %s: %s", res.Simulated.Round(time.Millisecond), f.Kind, f.Detail)
			return
		}
	}
	t.Logf("no %s finding", kind)
}
