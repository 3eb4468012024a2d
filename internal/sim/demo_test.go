package sim

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/history"
)

var demoFault = flag.String("demo.fault", "", "the fault kinds, comma-separated")
var demoHot = flag.Bool("demo.hot", false, "hot rounds")
var demoSeeds = flag.Int("demo.seeds", 10, "seeds")
var demoDur = flag.Duration("demo.dur", 10*time.Minute, "")

func TestDemo(t *testing.T) {
	for seed := uint64(1); seed <= uint64(*demoSeeds); seed++ {
		cfg := Handovers(seed, *demoDur)
		cfg.Faults = strings.Split(*demoFault, ",")
		cfg.FaultEvery = 500 * time.Millisecond
		cfg.Hot = *demoHot
		cfg.Stop = func(v *history.Verdict) bool { return v.Count("leftovers")+v.Count("lockout")+v.Count("exclusion") > 0 }
		res, _ := runSim(t, cfg)
		fmt.Fprintf(os.Stderr, "seed %d: %s\n", seed, res.Summary(cfg))
		for _, f := range res.Verdict.Found {
			fmt.Fprintf(os.Stderr, "  FOUND %s: %s\n", f.Kind, f.Detail)
			break
		}
		if res.Violations() > 0 {
			return
		}
	}
}
