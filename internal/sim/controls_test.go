package sim

import (
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
	t.Run("late-beyond", func(t *testing.T) {
		// A command held back 3 to 5 s, past a tombstone's two seconds:
		// its copy lands on a key that no longer remembers its Lock, and
		// the residue rule must see the value it leaves, whatever the
		// library does about copies within the bound.
		cfg := Guarded(controlSeed(), 10*time.Minute)
		cfg.Faults = []string{FaultLateBeyond}
		cfg.FaultEvery = time.Second
		cfg.Stop = func(v *history.Verdict) bool { return v.Count("leftovers") > 0 }
		res, _ := runSim(t, cfg)
		if res.Verdict.Count("leftovers") == 0 {
			t.Errorf("no value left by commands landing 3 to 5 s late\n%s", res.Summary(cfg))
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
