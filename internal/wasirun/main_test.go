package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildChooser builds testdata/chooser for wasip1.
func buildChooser(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "chooser.wasm")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/chooser")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestMain runs wasirun itself when the test runs its own binary as it
// (runChooser): each run a process of its own, as the simulator's are.
func TestMain(m *testing.M) {
	if os.Getenv("WASIRUN_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// runChooser runs bin under seed and returns what it printed; cache keeps
// its compiled code between runs.
func runChooser(t *testing.T, bin, cache string, seed uint64) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-seed", fmt.Sprint(seed), "-cache", cache, bin)
	cmd.Env = append(os.Environ(), "WASIRUN_TEST_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wasirun: %v\n%s", err, out)
	}
	return string(out)
}

// TestSameSeedSameRun: what a program leaves to the runtime and the host
// comes out the same under one seed, and otherwise under another, so that
// the seed, not the host, decides it.
func TestSameSeedSameRun(t *testing.T) {
	bin, cache := buildChooser(t), t.TempDir()
	first := runChooser(t, bin, cache, 1)
	for range 2 {
		if again := runChooser(t, bin, cache, 1); again != first {
			t.Fatalf("seed 1 twice:\n%s\n%s", first, again)
		}
	}
	other := runChooser(t, bin, cache, 2)
	for _, what := range []string{"map:", "select:", "math/rand:"} {
		if line(first, what) == line(other, what) {
			t.Errorf("seeds 1 and 2 gave the same %s\n%s", what, line(first, what))
		}
	}
	// The clock: a fixed start, and a sleep that takes its length.
	if !strings.Contains(first, "now: 2026-01-01T00:00:0") || !strings.Contains(first, "slept: 1.0000") {
		t.Errorf("clock: %s", first)
	}
	t.Logf("seed 1:\n%s", first)
}

func line(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
