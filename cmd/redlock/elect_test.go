package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// electScript is the command the elect tests run: for each run it writes
// its pid (its process group) to DIR/NAME.TERM.pid, and then, every 20 ms,
// the time to DIR/NAME.TERM, so that a test can tell which elect ran it,
// under which term, and when it ran. SIGTERM ends it with status 7, after
// DIR/NAME.TERM.term records it. Its stderr goes nowhere: the shell reports
// its sleep killed by the group's SIGTERM there, which is not elect's.
const electScript = `exec 2>/dev/null; d=$0; n=$1; f="$d/$n.$REDLOCK_TERM"; echo $$ > "$f.pid"; ` +
	`trap 'touch "$f.term"; exit 7' TERM; ` +
	`while :; do date +%s%N >> "$f"; sleep 0.02; done`

// electRun is one run of electScript, as its files show it.
type electRun struct {
	name        string
	term        uint64
	first, last time.Time
	pgid        int
	stopped     bool // it got SIGTERM
}

// electRuns reads the runs of electScript in dir that have written a time,
// in the order of their terms.
func electRuns(t *testing.T, dir string) []electRun {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var runs []electRun
	for _, e := range entries {
		name, termText, ok := strings.Cut(e.Name(), ".")
		if !ok || strings.Contains(termText, ".") {
			continue
		}
		term, err := strconv.ParseUint(termText, 10, 64)
		if err != nil {
			t.Fatalf("%s: not NAME.TERM: %v", e.Name(), err)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// Only whole lines: the last may be half written.
		text := string(b[:strings.LastIndexByte(string(b), '\n')+1])
		var stamps []time.Time
		for _, line := range strings.Fields(text) {
			ns, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", e.Name(), line, err)
			}
			stamps = append(stamps, time.Unix(0, ns))
		}
		if len(stamps) == 0 {
			continue
		}
		r := electRun{name: name, term: term, first: stamps[0], last: stamps[len(stamps)-1]}
		r.pgid, _ = strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, e.Name()+".pid"))))
		_, err = os.Stat(filepath.Join(dir, e.Name()+".term"))
		r.stopped = err == nil
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b electRun) int {
		switch {
		case a.term < b.term:
			return -1
		case a.term > b.term:
			return 1
		}
		return 0
	})
	return runs
}

// waitRuns waits until electRuns finds a run for which ok holds, and
// returns the runs then.
func waitRuns(t *testing.T, dir string, what string, ok func([]electRun) bool) []electRun {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs := electRuns(t, dir)
		if ok(runs) {
			return runs
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s; runs: %+v", what, runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGroupGone waits until no process of group pgid is left.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(groupAlive(t, pgid)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d alive 10s on: %v", pgid, groupAlive(t, pgid))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestElectRunsCommand: elect runs its command with REDLOCK_KEY and
// REDLOCK_TERM, status shows the leader's metadata and term while it leads,
// and when the command exits on its own elect resigns (the key is free at
// once, long before its 30s TTL) and exits with the command's status; the
// next leader's term is higher.
func TestElectRunsCommand(t *testing.T) {
	_, nodes := startServers(t, 3)
	const key = "elect-runs"
	dir := t.TempDir()
	out, st := filepath.Join(dir, "env"), filepath.Join(dir, "status")
	status := bin + " status --nodes " + nodes + " --key " + key
	r := redlockRun(t, "elect", "--nodes", nodes, "--key", key, "--ttl", "30s", "--metadata", "leader web-1", "--",
		"sh", "-c", `printf '%s %s' "$REDLOCK_KEY" "$REDLOCK_TERM" > "$0"; `+status+` > "$1"; exit 3`, out, st)
	wantExit(t, r, 3)
	if r.stderr != "" {
		t.Errorf("stderr without --verbose: %q", r.stderr)
	}
	gotKey, termText, _ := strings.Cut(readFile(t, out), " ")
	term, err := strconv.ParseUint(termText, 10, 64)
	if gotKey != key || err != nil || term == 0 {
		t.Fatalf("the command saw REDLOCK_KEY REDLOCK_TERM %q", readFile(t, out))
	}
	shown := readFile(t, st)
	for _, want := range []string{"verdict: held by a quorum", "\nholder metadata: leader web-1\n", fmt.Sprintf("\nterm: %d\n", term)} {
		if !strings.Contains(shown, want) {
			t.Errorf("status while elect leads does not show %q:\n%s", want, shown)
		}
	}

	// Resigned: free within seconds, where an expiry would take 30s.
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := redlockRun(t, "status", "--nodes", nodes, "--key", key)
		if strings.Contains(r.stdout, "verdict: free") {
			if strings.Contains(r.stdout, "term:") {
				t.Errorf("status of a free key shows a term:\n%s", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key is not free 10s after elect exited (no resign?):\n%s", r.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	next := redlockRun(t, "elect", "--nodes", nodes, "--key", key, "--", "sh", "-c", `printf %s "$REDLOCK_TERM"`)
	wantExit(t, next, 0)
	if t2, err := strconv.ParseUint(next.stdout, 10, 64); err != nil || t2 <= term {
		t.Errorf("the next leader's term %q, after term %d", next.stdout, term)
	}
	// A command that cannot be started, as a shell says it.
	wantExit(t, redlockRun(t, "elect", "--nodes", nodes, "--key", key, "--", filepath.Join(dir, "missing")), 127)
}

// TestElectOneLeaderFailover: of two elects on one key only one runs its
// command, for longer than the TTL (renewed); a third, campaigning, exits
// 128+15 on SIGTERM without running anything. When the leader's elect is
// killed with SIGKILL, its guardian stops its command's group at once, and
// the other elect runs its command once the leadership expired, under a
// higher term, never beside the first. SIGTERM to the new leader reaches
// its command, whose status is elect's.
func TestElectOneLeaderFailover(t *testing.T) {
	_, nodes := startServers(t, 3)
	const key, ttl = "elect-failover", 2 * time.Second
	dir := t.TempDir()
	// start starts an elect named name; log, if set, takes its stderr
	// (with --verbose), for the test to read while it runs.
	start := func(name string, log *os.File) (func() result, *os.Process) {
		args := []string{"elect", "--nodes", nodes, "--key", key, "--ttl", ttl.String(), "--metadata", "elect-" + name}
		if log != nil {
			args = append(args, "--verbose")
		}
		cmd, stdout, stderr := command(t, append(args, "--", "sh", "-c", electScript, dir, name)...)
		if log != nil {
			cmd.Stderr = log
		}
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return func() result { return finish(t, cmd, stdout, stderr, began) }, cmd.Process
	}
	waitA, procA := start("a", nil)
	waitB, procB := start("b", nil)
	for _, name := range []string{"a", "b"} {
		t.Cleanup(func() {
			for _, r := range electRuns(t, dir) {
				if r.name == name && r.pgid > 1 {
					_ = syscall.Kill(-r.pgid, syscall.SIGKILL)
				}
			}
		})
	}
	// One leads, past its TTL: renewed, while the other waits.
	runs := waitRuns(t, dir, "leader running past its TTL", func(runs []electRun) bool {
		return len(runs) > 0 && runs[0].last.Sub(runs[0].first) > ttl+time.Second
	})
	if len(runs) != 1 {
		t.Fatalf("two commands ran at once: %+v", runs)
	}
	leader := runs[0]
	t.Logf("elect %s leads, term %d", leader.name, leader.term)
	shown := redlockRun(t, "status", "--nodes", nodes, "--key", key)
	for _, want := range []string{"\nholder metadata: elect-" + leader.name + "\n", fmt.Sprintf("\nterm: %d\n", leader.term)} {
		if !strings.Contains(shown.stdout, want) {
			t.Errorf("status does not show %q:\n%s", want, shown.stdout)
		}
	}

	// A third campaigns; SIGTERM ends its campaign.
	log, err := os.Create(filepath.Join(t.TempDir(), "c.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	waitC, procC := start("c", log)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(readFile(t, log.Name()), "campaigning for"); {
		if time.Now().After(deadline) {
			t.Fatalf("the third elect never campaigned:\n%s", readFile(t, log.Name()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := procC.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if c := waitC(); c.code != 128+int(syscall.SIGTERM) {
		t.Errorf("a campaigning elect exited %d on SIGTERM, want %d", c.code, 128+int(syscall.SIGTERM))
	}
	if said := readFile(t, log.Name()); !strings.Contains(said, "redlock elect: terminated while campaigning for \""+key+"\"\n") {
		t.Errorf("a campaign ended by SIGTERM says:\n%s", said)
	}

	waitLeader, leaderProc, waitOther, otherProc, other := waitA, procA, waitB, procB, "b"
	if leader.name == "b" {
		waitLeader, leaderProc, waitOther, otherProc, other = waitB, procB, waitA, procA, "a"
	}
	killed := time.Now()
	if err := leaderProc.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, leader.pgid)
	t.Logf("the killed leader's group was gone %v after the kill", time.Since(killed))
	waitLeader()
	runs = waitRuns(t, dir, "command of the other elect", func(runs []electRun) bool {
		return slices.ContainsFunc(runs, func(r electRun) bool { return r.name == other })
	})
	if len(runs) != 2 || runs[1].name != other {
		t.Fatalf("runs after the failover: %+v", runs)
	}
	next := runs[1]
	t.Logf("elect %s leads %v after the kill, term %d", other, next.first.Sub(killed), next.term)
	if next.term <= leader.term {
		t.Errorf("the new leader's term %d is not above the killed one's %d", next.term, leader.term)
	}
	if last := electRuns(t, dir)[0].last; !last.Before(next.first) {
		t.Errorf("two leaders: the killed leader's command wrote at %s, %v after the new one started",
			last.Format(time.StampMicro), last.Sub(next.first))
	}

	if err := otherProc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := waitOther()
	wantExit(t, r, 7) // the command's trap
	waitGroupGone(t, next.pgid)
	if runs := electRuns(t, dir); len(runs) != 2 || !runs[1].stopped {
		t.Errorf("the command did not get the forwarded SIGTERM, or ran again: %+v", runs)
	}
}

// TestElectLeadershipLost: when the leadership's key vanishes from every
// node (as from a majority restarted empty), elect stops its command's
// group (SIGTERM), says so, campaigns again, and runs the command again
// under a higher term, never beside the first run.
func TestElectLeadershipLost(t *testing.T) {
	servers, nodes := startServers(t, 3)
	const key = "elect-lost"
	dir := t.TempDir()
	cmd, stdout, stderr := command(t, "elect", "--nodes", nodes, "--key", key, "--ttl", "2s", "--",
		"sh", "-c", electScript, dir, "x")
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, r := range electRuns(t, dir) {
			_ = syscall.Kill(-r.pgid, syscall.SIGKILL)
		}
	})
	first := waitRuns(t, dir, "first run", func(runs []electRun) bool { return len(runs) == 1 })[0]
	deleted := time.Now()
	for _, s := range servers {
		c := s.Client()
		err := c.Del(t.Context(), key).Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	runs := waitRuns(t, dir, "second run", func(runs []electRun) bool { return len(runs) == 2 })
	second := runs[1]
	t.Logf("run again %v after the key was deleted, term %d after %d", second.first.Sub(deleted), second.term, first.term)
	if !runs[0].stopped {
		t.Errorf("the first run did not get SIGTERM: %+v", runs[0])
	}
	if len(groupAlive(t, first.pgid)) > 0 {
		t.Errorf("the first run's group is alive beside the second: %v", groupAlive(t, first.pgid))
	}
	if second.term <= first.term {
		t.Errorf("term %d after term %d", second.term, first.term)
	}
	if !runs[0].last.Before(second.first) {
		t.Errorf("the first run wrote at %s, %v after the second started", runs[0].last.Format(time.StampMicro), runs[0].last.Sub(second.first))
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, stdout, stderr, began)
	if r.code != 7 {
		t.Fatalf("exit status %d, want the command's 7\nstderr:\n%s", r.code, r.stderr)
	}
	want := fmt.Sprintf("redlock elect: term %d of %q ended: ", first.term, key)
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "lock lost") || !strings.Contains(r.stderr, "campaigning again\n") {
		t.Errorf("stderr does not say the term ended (%q):\n%s", want, r.stderr)
	}
}

// TestElectUsage: bad flags and arguments exit 64 with one line on stderr,
// and -h prints the help on stdout.
func TestElectUsage(t *testing.T) {
	const ok = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no key", []string{"--nodes", ok, "--", "true"}, "--key is required"},
		{"no command", []string{"--nodes", ok, "--key", "k"}, "no command to run"},
		{"two keys", []string{"--nodes", ok, "--key", "a", "--key", "b", "--", "true"}, "redlock elect takes one key"},
		{"bad ttl", []string{"--nodes", ok, "--key", "k", "--ttl", "0", "--", "true"}, "--ttl must be positive"},
		{"short ttl", []string{"--nodes", ok, "--key", "k", "--ttl", "100ms", "--", "true"}, "minimum of 200ms"},
		{"grace", []string{"--nodes", ok, "--key", "k", "--ttl", "2", "--grace", "2s", "--", "true"}, "--grace 2s must be shorter than --ttl 2s"},
		{"metadata", []string{"--nodes", ok, "--key", "k", "--metadata", "two\nlines", "--", "true"}, "--metadata"},
		{"long metadata", []string{"--nodes", ok, "--key", "k", "--metadata", strings.Repeat("x", 129), "--", "true"}, "--metadata"},
		{"mistyped flag", []string{"--nodes", ok, "--key", "k", "--tll", "1s", "--", "true"}, "did you mean --ttl?"},
		{"run's flag", []string{"--nodes", ok, "--key", "k", "--wait", "1s", "--", "true"}, "flag provided but not defined: -wait"},
		{"no nodes", []string{"--key", "k", "--", "true"}, "no nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := redlockRun(t, append([]string{"elect"}, tc.args...)...)
			wantExit(t, r, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
		})
	}
	r := redlockRun(t, "elect", "-h")
	wantExit(t, r, 0)
	for _, want := range []string{"usage: redlock elect", "-- command [args...]", "REDLOCK_TERM", "Exit statuses:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("elect -h does not say %q:\n%s", want, r.stdout)
		}
	}
	if help := redlockRun(t, "help"); !strings.Contains(help.stdout, "  elect ") {
		t.Errorf("redlock help does not list elect:\n%s", help.stdout)
	}
}
