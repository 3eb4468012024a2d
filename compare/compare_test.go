package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the multi-process scenario's
// worker, as the compare binary does.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		if err := workerMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "compare worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// TestHarness runs every scenario with tiny counts, so that a change in one
// of the libraries or in the test infrastructure that breaks the harness
// shows up in CI. The figures themselves are meaningless at this size.
func TestHarness(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.md")
	var stdout, stderr bytes.Buffer
	args := []string{
		"-nodes", "1,3", "-rounds", "2", "-ops", "3", "-warmup", "2",
		"-round-time", "20ms", "-slice", "50ms", "-budget", "1s", "-manykeys-goroutines", "1,64", "-q", "-out", out,
	}
	start := time.Now()
	if err := mainErr(args, &stdout, &stderr); err != nil {
		t.Fatalf("compare %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	t.Logf("harness took %v", time.Since(start))
	md := stdout.String()
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(written) != md {
		t.Errorf("-out file differs from stdout")
	}
	for _, want := range []string{
		"## Uncontended Acquire+Release",
		"## Contention: many goroutines, one key",
		"## Many keys: goroutines with a key each",
		"### Against a local mutex",
		"## The nodes' CPU and commands per lock",
		"## Contention across processes: 4 processes × 4 goroutines, one key",
		"| N=5, 4 processes × 4 goroutines, 1 key | redlock |", "| N=5, 4 processes × 4 goroutines, 1 key | redsync |",
		"wait p99 ≤ 20ms", "every process ≥ 0.5 × its fair share", "commands per acquisition, 64 ÷ 16 goroutines",
		"| N=1 | floor-bare |", "| N=1 | floor-ctx |", "| N=1 | min-setnx-script |", "| N=1 | min-script-script |", "| N=1 | redlock |", "| N=1 | redlock-ctxtimeout |", "| N=1 | redsync |", "| N=1 | redsync-failfast |", "| N=1 | redislock |",
		"| N=3 | redlock |",
		"| N=5, 1 node +20ms | redlock |", "| N=5, 2 nodes +20ms | redsync |", "| N=5, 1 node blackholed | redsync-failfast |",
		"## Network: every node behind a link with latency",
		"| N=3, +1ms | floor-bare |", "| N=3, +10ms | floor-ctx |", "| N=3, +60ms | redlock |", "| N=3, +60ms | redlock-ctxtimeout |",
		"| N=3, +60ms | redsync |", "| N=3, +60ms | redsync-failfast |", "| N=3, +60ms | min-setnx-script |",
		"| N=3, +60ms | min-script-script |", "| N=3, +60ms | min-deadline |", "| N=5, +1/1/10/60/60ms | redlock |",
		"| N=5, 64 goroutines, 1 key | redlock |", "| N=1, 16 goroutines, 1 key | redislock |",
		"| N=5, 64 goroutines, a key each | floor-bare |", "| N=5, 64 goroutines, a key each | floor-pipelined |",
		"| N=1, 1 goroutine, a key each | redlock |", "| N=1, 1 goroutine, a key each | min-setnx-script |",
		"| N=5, 64 goroutines, a key each | min-deadline |", "| N=5, 64 goroutines, a key each | ceiling-batched-scripts |", "the batched scripts' ceiling",
		"| N=1, 16 goroutines, 1 key | ceiling-mutex |", "| N=5, 64 goroutines, 1 key | ceiling-mutex |",
		"locks/s ≥ 0.9 × the local mutex's", "wait p99 ≤ 1.25 × the local mutex's", "locks/s ≥ 3 × redsync's",
		"fraction of the pipelined floor", "N=3: p50 ≤ min-setnx-script's",
		"## Targets",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// redislock locks on one node only; the floor has no place in contention.
	// The ceilings run in their own kind of scenario only.
	// On links, the minimal locks that are correct run beside the libraries,
	// and AcquireAll does not.
	for _, bad := range []string{"| N=3 | redislock |", "1 key | floor", "+20ms | min-setnx", "ms | min-setnx-del |", "ms | redlock-acquireall", "1 key | min-",
		"| N=1 | floor-pipelined |", "| N=1 | ceiling-mutex |", "each | ceiling-mutex |", "1 key | floor-pipelined |"} {
		if strings.Contains(md, bad) {
			t.Errorf("output has %q", bad)
		}
	}
	// Uncontended operations on healthy nodes must not fail, however small the
	// run: a failure there means a library is wired up wrong. On links a
	// failure is a finding, which the network table shows.
	overlapsLast := false // in a table whose last column is the overlaps
	onLinks := false      // in the network section
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			overlapsLast = strings.HasPrefix(line, "## Contention: ") || strings.HasPrefix(line, "## Contention across processes")
			onLinks = strings.HasPrefix(line, "## Network: ")
		}
		if !onLinks && (strings.HasPrefix(line, "- N=1, ") || strings.HasPrefix(line, "- N=3, ")) {
			if !strings.Contains(line, "goroutines") {
				t.Errorf("healthy uncontended run failed: %s", line)
			}
		}
		if strings.Contains(line, "| failed: ") {
			t.Errorf("a library produced no sample: %s", line)
		}
		// Two holders at once, in any library's contention row.
		if overlapsLast && strings.HasPrefix(line, "| N=") {
			cells := strings.Split(strings.Trim(line, "| "), "|")
			if last := strings.TrimSpace(cells[len(cells)-1]); last != "0" {
				t.Errorf("overlapping holders: %s", line)
			}
		}
		if strings.Contains(line, noOverlaps) && !strings.HasSuffix(line, "| yes |") {
			t.Errorf("target not met: %s", line)
		}
	}
	// The nodes' counts: an uncontended Acquire+Release on one node is one
	// call per round trip (a script each for redlock, SET and DEL for the
	// plain minimal lock), and the local mutex sends nothing.
	nodes := md[strings.Index(md, "## The nodes' CPU"):]
	for _, c := range []struct {
		row, cmd string
		want     float64
	}{
		{"| N=1 | redlock |", "evalsha", 2}, {"| N=1 | min-setnx-del |", "set", 1}, {"| N=1 | min-setnx-del |", "del", 1},
		{"| N=3 | min-setnx-del |", "set", 3}, {"| N=1 | redsync-failfast |", "set", 1},
	} {
		if got, ok := perLock(nodes, c.row, c.cmd); !ok || got < c.want-0.1 || got > c.want+0.1 {
			t.Errorf("nodes table, %s %s per lock: %v (found: %v), want %v", c.row, c.cmd, got, ok, c.want)
		}
	}
	mutexRow := ""
	for _, line := range strings.Split(nodes, "\n") {
		if strings.HasPrefix(line, "| N=1, 16 goroutines, 1 key | ceiling-mutex | ") {
			mutexRow = line
		}
	}
	if cells := strings.Split(mutexRow, "|"); len(cells) < 7 || strings.TrimSpace(cells[5]) != "0.0" {
		t.Errorf("nodes table: want a ceiling-mutex row with 0.0 commands per lock, have %q", mutexRow)
	}
	if !strings.Contains(md, noOverlaps) {
		t.Errorf("the targets lack %q", noOverlaps)
	}
	if t.Failed() {
		t.Logf("output:\n%s", md)
	}
}

// perLock finds the first line of table that starts with row and returns
// the calls per lock of cmd in its breakdown ("evalsha 2.00, get 2.00").
func perLock(table, row, cmd string) (float64, bool) {
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, row) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for item := range strings.SplitSeq(cells[len(cells)-1], ",") {
			name, v, ok := strings.Cut(strings.TrimSpace(item), " ")
			if ok && name == cmd {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-nodes", "0"},
		{"-scenarios", "bogus"},
		{"-rounds", "0"},
		{"-procs", "0"},
		{"-manykeys-goroutines", "0"},
		{"-manykeys-goroutines", "16,x"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if err := mainErr(args, &stdout, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
