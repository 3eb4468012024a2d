package sim

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Planted bugs: the simulator tested by what it must find. Each Mutation
// is a one-line safety bug of today's code, a find-and-replace in one file;
// TestPlantedBugs applies each to a copy of the module and runs TestSim on
// the fixed seeds, one after the other until one finds it (each run stops
// at its first finding), and prints the table docs/testing.md records:
//
//	go test ./internal/sim -run '^TestPlantedBugs$' -v -timeout 0 -sim.planted=all
//
// CI does not run it: a mutation costs up to five seeds' runs. A mutation
// whose Find is no longer in its file, exactly once, fails the test: the
// list must follow the code.
var simPlanted = flag.String("sim.planted", "", "run TestPlantedBugs: all, or mutations' names, comma-separated")

// Mutation is one planted bug: Find replaced by Replace in File (a path
// from the module's root).
type Mutation struct {
	Name, File, Find, Replace string
}

// Mutations are the planted bugs, each a bug the library's design exists to
// prevent.
var Mutations = []Mutation{
	{"fence not raised", "internal/script/fence.go",
		"return uint64(highest) + 1", "return uint64(highest)"},
	{"validity without the drift allowance", "clock.go",
		"return start.Add(ttl - c.drift(ttl))", "return start.Add(ttl)"},
	{"validity from the round's end", "quorum.go",
		"\tnow := c.cfg.clock.Now()\n\tif quorum && now.Before(until) {", "\tnow := c.cfg.clock.Now()\n\tuntil = c.cfg.validUntil(now, ttl)\n\tif quorum && now.Before(until) {"},
	{"quorum of N/2", "internal/engine/node.go",
		"Quorum: len(clients)/2 + 1", "Quorum: len(clients) / 2"},
	{"rollback only where confirmed", "quorum.go",
		"only := t.Unrefused()", "only := t.Where(func(r engine.Reply) bool { return r.Status == engine.OK })"},
	{"no refusal left by a delete (release, rollback)", "scripts/late.lua",
		"  if at <= 0 then\n", "  if true then\n"},
	{"refusal not read by a write", "scripts/late.lua",
		"return g and g >= tonumber(gen) or false", "return false"},
	{"deadline check removed", "scripts/late_write.lua",
		"if late_now > late_at then", "if false then"},
	{"deadline sent a minute late", "internal/engine/round.go",
		"j.late, j.args[at] = ms, ms", "j.late, j.args[at] = ms, ms+60000"},
	{"shared release wipes the key", "scripts/release_shared.lua",
		"late_leave(late_key, ARGV[3], late_at)\n", "late_leave(late_key, ARGV[3], late_at)\nredis.call('DEL', KEYS[1])\n"},
	{"permit slot given though taken", "scripts/acquire_permit.lua",
		"if pref >= 0 and pref < n and not taken[pref] then", "if pref >= 0 and pref < n then"},
	{"KeepAlive context live past Until", "lease.go",
		"return until.Add(-min(max(ttl/renewMarginOf, renewMarginMin), renewMarginMax))", "return until.Add(50*time.Millisecond + 0*ttl)"},
	{"Leader without the term record", "election.go",
		"if !elected || len(ttls) < q", "if elected && !elected || len(ttls) < q"},
	{"delete tried once", "internal/engine/lanes.go",
		"if p.Life.abandoned() || time.Now().Add(wait).After(l.expireBy) {", "if true {"},
	{"latency estimate that only grows", "internal/engine/rtt.go",
		"\tsrtt, rttvar := unpackRTT(old)\n\tdev := srtt - r", "\tsrtt, rttvar := unpackRTT(old)\n\tif r < srtt {\n\t\treturn old\n\t}\n\tdev := srtt - r"},
}

// TestPlantedBugs applies each mutation -sim.planted names to a copy of the
// module and runs the fixed seeds on it, each for -sim.dur (2m by default)
// and stopping at its first finding, until one finds the bug; it fails on
// a bug no seed found. -sim.exec is passed on.
func TestPlantedBugs(t *testing.T) {
	if *simPlanted == "" {
		t.Skip("-sim.planted names the mutations to plant (all: every one)")
	}
	dur := *simDur
	if dur == 0 {
		dur = 2 * time.Minute
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output() // newline-separated
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	// One copy for every mutation, each undone after its runs: the
	// packages it does not touch come from the build cache (-trimpath).
	dir := t.TempDir()
	if err := copyFiles(root, dir, strings.Split(strings.TrimSuffix(string(files), "\n"), "\n")); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range Mutations {
		if !m.named(*simPlanted) {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			undo, err := m.apply(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := undo(); err != nil {
					t.Fatal(err)
				}
			}()
			for _, seed := range SimSeeds {
				start := time.Now()
				found, out, err := plantedRun(dir, seed, dur)
				wall := time.Since(start).Round(time.Second)
				if err != nil {
					t.Fatalf("seed %d: %v\n%s", seed, err, out)
				}
				if found != "" {
					t.Logf("seed %d: %s (%v of wall time)", seed, found, wall)
					rows = append(rows, fmt.Sprintf("| %s | %d | %s |", m.Name, seed, found))
					return
				}
				t.Logf("seed %d: nothing in %v (%v of wall time)", seed, dur, wall)
			}
			rows = append(rows, fmt.Sprintf("| %s | none | nothing in %v a seed |", m.Name, dur))
			t.Errorf("no fixed seed found %q", m.Name)
		})
	}
	t.Logf("planted bugs, %v a seed at most:\n| mutation | seed | first finding (simulated time after the workload's start) |\n|---|--:|---|\n%s", dur, strings.Join(rows, "\n"))
}

// named reports whether list, -sim.planted's value, names m: "all", or
// names separated by commas, a name's own commas kept ("no refusal left by
// a delete (release, rollback)" is one name).
func (m Mutation) named(list string) bool {
	return list == "all" || strings.Contains(","+list+",", ","+m.Name+",")
}

// apply makes m in the copy at dir, and returns what undoes it.
func (m Mutation) apply(dir string) (undo func() error, err error) {
	path := filepath.Join(dir, m.File)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if n := bytes.Count(b, []byte(m.Find)); n != 1 {
		return nil, fmt.Errorf("%s: %q found %d times, want once: the mutation no longer fits the code", m.File, m.Find, n)
	}
	undo = func() error { return os.WriteFile(path, b, 0o644) }
	return undo, os.WriteFile(path, bytes.Replace(b, []byte(m.Find), []byte(m.Replace), 1), 0o644)
}

// copyFiles copies files (paths from src) into dst.
func copyFiles(src, dst string, files []string) error {
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dst, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var firstFinding = regexp.MustCompile(`first finding: (.*)`)

// plantedRun runs TestSim on seed in the module at dir, stopping at the
// first finding, and returns that finding's line ("" if none).
func plantedRun(dir string, seed uint64, dur time.Duration) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	args := []string{"test", "-trimpath", "./internal/sim", "-run", "^TestSim$", "-count=1", "-v", "-timeout=0",
		fmt.Sprintf("-sim.seed=%d", seed), "-sim.dur=" + dur.String(), "-sim.first"}
	if *simExec != "" {
		args = append(args, "-sim.exec="+*simExec)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if m := firstFinding.FindStringSubmatch(sc.Text()); m != nil {
			return m[1], string(out), nil
		}
	}
	if err != nil && !strings.Contains(string(out), "sim: seed") {
		return "", string(out), err
	}
	return "", string(out), nil
}

// TestMutationsFit: every planted bug still fits the code, its text once
// in its file, so that a change of the code that moves one fails here, in
// CI, and not in the next run of TestPlantedBugs.
func TestMutationsFit(t *testing.T) {
	for _, m := range Mutations {
		b, err := os.ReadFile(filepath.Join("..", "..", m.File))
		if err != nil {
			t.Errorf("%s: %v", m.Name, err)
			continue
		}
		if n := bytes.Count(b, []byte(m.Find)); n != 1 {
			t.Errorf("%s: %q found %d times in %s, want once", m.Name, m.Find, n, m.File)
		}
	}
}

// TestMutationNamed: -sim.planted names a mutation whose name has a comma
// of its own, and no mutation by a part of its name.
func TestMutationNamed(t *testing.T) {
	m := Mutation{Name: "no refusal left by a delete (release, rollback)"}
	for list, want := range map[string]bool{
		"all":                                  true,
		m.Name:                                 true,
		"fence not raised," + m.Name:           true,
		m.Name + ",fence not raised":           true,
		"no refusal left by a delete (release": false,
		" rollback)":                           false,
		"fence not raised":                     false,
	} {
		if got := m.named(list); got != want {
			t.Errorf("named(%q) = %v, want %v", list, got, want)
		}
	}
}
