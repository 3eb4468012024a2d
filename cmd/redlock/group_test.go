package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// groupAlive lists the processes of group pgid that are not zombies, from
// /proc: a zombie runs nothing, and one handed to an init that never reaps
// would otherwise count for ever.
func groupAlive(t *testing.T, pgid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var alive []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		alive = append(alive, s[:end+1]+" "+f[0])
	}
	return alive
}

// notKilled lists those of procs (as groupAlive gives them) that have no
// SIGKILL pending, read after groupAlive. One that has cannot run another
// instruction of its own: the kernel ends it as soon as it next runs it. On
// a machine whose CPUs are all busy that can take hundreds of milliseconds,
// during which /proc still shows it sleeping or running (seen: SIGKILL sent
// 250 ms before the validity ended, the group gone 60 ms after it).
func notKilled(procs []string) []string {
	var unkilled []string
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", strings.Fields(p)[0], "status"))
		if err != nil {
			continue // exited meanwhile
		}
		if !sigkillPending(string(b)) {
			unkilled = append(unkilled, p)
		}
	}
	return unkilled
}

// sigkillPending reports whether a /proc/PID/status shows SIGKILL pending,
// for the thread (SigPnd: the kernel adds it to every thread of a process
// it kills) or the process (ShdPnd: where a signal to a group lands).
func sigkillPending(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		name, mask, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && m&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// watchGroup polls group pgid until stop is closed and returns, through the
// functions it returns, the latest times at which a poll began that found a
// process alive, and one alive with no SIGKILL pending (a process seen then
// was so at that time or later).
func watchGroup(t *testing.T, pgid int) (lastAlive, lastUnkilled func() time.Time) {
	t.Helper()
	var mu sync.Mutex
	var alive, unkilled time.Time
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			began := time.Now()
			if procs := groupAlive(t, pgid); len(procs) > 0 {
				mu.Lock()
				alive = began
				mu.Unlock()
				if len(notKilled(procs)) > 0 {
					mu.Lock()
					unkilled = began
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-done }) }
	t.Cleanup(end)
	last := func(at *time.Time) func() time.Time {
		return func() time.Time {
			end()
			mu.Lock()
			defer mu.Unlock()
			return *at
		}
	}
	return last(&alive), last(&unkilled)
}

// readPID reads the pid a command wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	waitFile(t, path)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, path))); err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds no pid: %q", path, readFile(t, path))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killGroupCleanup makes sure a test that fails leaves no process behind.
func killGroupCleanup(t *testing.T, pgid int) {
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

var (
	validUntil  = regexp.MustCompile(`until (\d\S+?)\)`)
	sigkillSent = regexp.MustCompile(`SIGKILL sent to process group \d+ at (\S+),`)
)

// TestRunStopsGroupBeforeUntil: with the lock lost (2 of 3 nodes killed), a
// grandchild that ignores SIGTERM is killed with its whole group before the
// validity redlock reports ends, whatever --grace says; redlock exits 70 once
// no process of the group is left. Killed: SIGKILL sent, which redlock
// reports, and no process of the group seen without SIGKILL pending once the
// validity has ended. Not gone from /proc: the kernel ends a killed process
// when it next runs it, which a busy machine delays (see notKilled).
func TestRunStopsGroupBeforeUntil(t *testing.T) {
	for _, grace := range []string{"", "2900ms"} {
		t.Run("grace="+grace, func(t *testing.T) {
			servers, nodes := startServers(t, 3)
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pgid")
			args := []string{"run", "--nodes", nodes, "--key", "group", "--ttl", "3s", "--wait", "10s", "--verbose"}
			if grace != "" {
				args = append(args, "--grace", grace)
			}
			args = append(args, "--", "sh", "-c", `trap "" TERM; sleep 300 & echo $$ > "$0"; wait; wait`, pidFile)
			cmd, stdout, stderr := command(t, args...)
			// In a group of its own, so that the command's group, if it
			// were redlock's, holds none of the test's processes.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid, err := syscall.Getpgid(readPID(t, pidFile))
			if err != nil {
				t.Fatal(err)
			}
			killGroupCleanup(t, pgid)
			lastAlive, lastUnkilled := watchGroup(t, pgid)
			for deadline := time.Now().Add(10 * time.Second); len(groupAlive(t, pgid)) < 2; {
				if time.Now().After(deadline) {
					t.Fatalf("the grandchild never started: %v", groupAlive(t, pgid))
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, s := range servers[:2] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			r := finish(t, cmd, stdout, stderr, start)
			if left := groupAlive(t, pgid); len(left) > 0 {
				t.Errorf("after redlock exited, its command's group is alive: %v", left)
			}
			if r.code != exitSoftware {
				t.Fatalf("exit status %d, want %d\nstderr:\n%s", r.code, exitSoftware, r.stderr)
			}
			m := validUntil.FindAllStringSubmatch(r.stderr, -1)
			if m == nil {
				t.Fatalf("redlock did not say until when the lock was valid:\n%s", r.stderr)
			}
			until, err := time.Parse(time.RFC3339Nano, m[len(m)-1][1])
			if err != nil {
				t.Fatal(err)
			}
			k := sigkillSent.FindStringSubmatch(r.stderr)
			if k == nil {
				t.Fatalf("redlock did not say when it sent SIGKILL:\n%s", r.stderr)
			}
			killed, err := time.Parse(time.RFC3339Nano, k[1])
			if err != nil {
				t.Fatal(err)
			}
			if !killed.Before(until) {
				t.Errorf("SIGKILL was sent at %s, after the validity ended at %s\n%s",
					killed.Format(time.StampMicro), until.Format(time.StampMicro), r.stderr)
			}
			last := lastUnkilled()
			if !last.Before(until) {
				t.Errorf("a process of the group was alive and not killed at %s, after the validity ended at %s\n%s",
					last.Format(time.StampMicro), until.Format(time.StampMicro), r.stderr)
			}
			t.Logf("SIGKILL sent %v, last seen alive unkilled %v, last seen at all %v before the end of the validity",
				until.Sub(killed), until.Sub(last), until.Sub(lastAlive()))
		})
	}
}

// TestRunGraceShorterThanTTL: a --grace that does not fit in the TTL is a
// usage error; so is the default grace against a short TTL no longer.
func TestRunGraceShorterThanTTL(t *testing.T) {
	for _, args := range [][]string{{"--ttl", "3s", "--grace", "3s"}, {"--ttl", "3s", "--grace", "10s"}, {"--grace", "30s"}} {
		r := redlockRun(t, append(append([]string{"run", "--nodes", "redis://127.0.0.1:1", "--key", "k"}, args...), "--", "true")...)
		wantExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, "must be shorter than --ttl") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	_, nodes := startServers(t, 3)
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "k", "--ttl", "3s", "--wait", "10s", "--", "true"), 0)
}

// TestRunSignalReachesGrandchild: SIGTERM sent to redlock reaches every
// process of the command's group, once, and none is left when redlock exits.
func TestRunSignalReachesGrandchild(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	pidFile, got := filepath.Join(dir, "pgid"), filepath.Join(dir, "got")
	cmd, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "sig", "--wait", "10s", "--",
		"sh", "-c", `(trap 'echo TERM >> "$1"; exit 3' TERM; echo $$ > "$0"; while :; do sleep 0.05; done) & wait`, pidFile, got)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := readPID(t, pidFile)
	killGroupCleanup(t, pgid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	r := finish(t, cmd, stdout, stderr, start)
	if left := groupAlive(t, pgid); len(left) > 0 {
		t.Errorf("after redlock exited, its command's group is alive: %v", left)
	}
	if r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d, want the command's %d\nstderr:\n%s", r.code, 128+int(syscall.SIGTERM), r.stderr)
	}
	b, _ := os.ReadFile(got)
	if string(b) != "TERM\n" {
		t.Errorf("the grandchild got %q, want one SIGTERM", b)
	}
}

// TestRunSIGINTOnce: SIGINT sent to redlock's whole process group, as a
// terminal sends Ctrl-C to its foreground group, reaches the command exactly
// once.
func TestRunSIGINTOnce(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	ready, got, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "got"), filepath.Join(dir, "stop")
	cmd, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "int", "--wait", "10s", "--",
		"sh", "-c", `trap 'echo INT >> "$1"' INT; touch "$0"; while [ ! -f "$2" ]; do sleep 0.05; done`, ready, got, stop)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	waitFile(t, ready)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFile(t, got)
	// A second delivery, forwarded, would follow within milliseconds.
	time.Sleep(time.Second)
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := finish(t, cmd, stdout, stderr, start)
	wantExit(t, r, 0)
	if b := readFile(t, got); b != "INT\n" {
		t.Errorf("the command got %q, want one SIGINT", b)
	}
}

// TestRunShutdownWithNodeDown: with one of three nodes down, redlock exits
// soon after its command, without waiting for retries to that node, and
// --verbose says where the key was left to expire; a clean run says nothing
// about renewal.
func TestRunShutdownWithNodeDown(t *testing.T) {
	servers, nodes := startServers(t, 3)
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "end")
	// The bound is ten times the 100 ms, for a loaded machine; a
	// shutdown that waits for the down node takes over 2 s.
	const bound = time.Second
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "down", "--wait", "10s", "--verbose", "--",
		"sh", "-c", `date +%s%N > "$0"`, out)
	exited := time.Now()
	wantExit(t, r, 0)
	ns, err := strconv.ParseInt(strings.TrimSpace(readFile(t, out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	took := exited.Sub(time.Unix(0, ns))
	t.Logf("redlock exited %v after its command", took)
	if took > bound {
		t.Errorf("redlock exited %v after its command, more than %v\n%s", took, bound, r.stderr)
	}
	if want := fmt.Sprintf("node 2 (%s): left to expire the key by its TTL", servers[2].Addr()); !strings.Contains(r.stderr, want) {
		t.Errorf("--verbose does not say %q:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stderr, "renewal") {
		t.Errorf("a clean exit talks about renewal:\n%s", r.stderr)
	}
}

// TestRunRestartGuard: --restart-guard and $REDLOCK_RESTART_GUARD reach the
// library: nodes it has never seen count only after the guard.
func TestRunRestartGuard(t *testing.T) {
	_, nodes := startServers(t, 3)
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "guard", "--restart-guard", "1m", "--wait", "0", "--", "true")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, "restart guard") {
		t.Errorf("stderr: %q", r.stderr)
	}
	env, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "guard", "--wait", "0", "--", "true")
	env.Env = append(env.Env, "REDLOCK_RESTART_GUARD=1m")
	start := time.Now()
	if err := env.Start(); err != nil {
		t.Fatal(err)
	}
	r = finish(t, env, stdout, stderr, start)
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, "restart guard") {
		t.Errorf("stderr: %q", r.stderr)
	}
	// Seconds, as every duration run takes.
	secs, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "guard", "--wait", "0", "--", "true")
	secs.Env = append(secs.Env, "REDLOCK_RESTART_GUARD=60")
	start = time.Now()
	if err := secs.Start(); err != nil {
		t.Fatal(err)
	}
	r = finish(t, secs, stdout, stderr, start)
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, "restart guard") {
		t.Errorf("stderr: %q", r.stderr)
	}
	bad, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "guard", "--", "true")
	bad.Env = append(bad.Env, "REDLOCK_RESTART_GUARD=soon")
	start = time.Now()
	if err := bad.Start(); err != nil {
		t.Fatal(err)
	}
	r = finish(t, bad, stdout, stderr, start)
	wantExit(t, r, exitUsage)
	if !strings.Contains(r.stderr, "nor a number of seconds") {
		t.Errorf("stderr: %q", r.stderr)
	}
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "guard", "--", "true"), 0)
}

// TestHostPortNodes: nodes given as host:port, as redis-cli takes them.
func TestHostPortNodes(t *testing.T) {
	servers, _ := startServers(t, 3)
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	nodes := strings.Join(addrs, ",")
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "hp", "--", "true"), 0)
	r := redlockRun(t, "status", "--nodes", nodes, "--key", "hp")
	wantExit(t, r, exitFree)
	if !strings.Contains(r.stdout, servers[2].Addr()) || !strings.Contains(r.stdout, "verdict: free") {
		t.Errorf("status:\n%s", r.stdout)
	}
	wantExit(t, redlockRun(t, "check", "--nodes", nodes), 0)
	// Two nodes: one warning line, and the command still runs.
	two := redlockRun(t, "run", "--nodes", strings.Join(addrs[:2], ","), "--key", "hp", "--", "true")
	wantExit(t, two, 0)
	if strings.Count(two.stderr, "\n") != 1 || !strings.Contains(two.stderr, "warning: 2 nodes") {
		t.Errorf("two nodes: stderr %q", two.stderr)
	}
}

// TestVersionAndHelp: --version prints the module version the binary was
// built with, or redlock.Version when the build has none; every help goes
// to stdout and exits 0.
func TestVersionAndHelp(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" {
			want = f[2]
		}
	}
	if want == "" {
		t.Fatalf("go version -m names no module version:\n%s", out)
	}
	if want == "(devel)" {
		want = redlock.Version
	}
	for _, flag := range []string{"--version", "-version"} {
		r := redlockRun(t, flag)
		wantExit(t, r, 0)
		if !strings.HasPrefix(r.stdout, "redlock "+want+" ") {
			t.Errorf("%s: %q, want the version %s", flag, r.stdout, want)
		}
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"run", "-h"}, {"run", "--help"}, {"status", "-h"}, {"check", "--help"}, {"demo", "-h"}} {
		r := redlockRun(t, args...)
		wantExit(t, r, 0)
		if r.stderr != "" || !strings.HasPrefix(r.stdout, "usage: redlock") {
			t.Errorf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
	r := redlockRun(t, "run", "-h")
	for _, want := range []string{"-restart-guard", "-grace", "Exit statuses", "70 ", "75 ", "uninterruptible", "--fencing", "REDLOCK_FENCE",
		"guardian", "kill -9", "--ttl is at least " + minTTL.String()} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run -h does not say %q:\n%s", want, r.stdout)
		}
	}
	r = redlockRun(t, "run", "--nodes", "127.0.0.1:1", "--key", "k", "--ttl", "5x", "--", "true")
	wantExit(t, r, exitUsage)
	if !strings.Contains(r.stderr, "not a duration such as 30s, 1m30s or 500ms, nor a number of seconds") {
		t.Errorf("--ttl 5x: %q", r.stderr)
	}
}

// TestTablesAligned: with a node down, every row of the status and check
// tables starts its columns where the header does.
func TestTablesAligned(t *testing.T) {
	servers, nodes := startServers(t, 3)
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	status := redlockRun(t, "status", "--nodes", nodes, "--key", "k")
	wantExit(t, status, exitFree)
	check := redlockRun(t, "check", "--nodes", nodes)
	wantExit(t, check, 1) // a node a lock cannot use
	for name, out := range map[string]string{"status": status.stdout, "check": check.stdout} {
		lines := strings.Split(out, "\n")
		h := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "node  ") })
		if h < 0 || h+4 > len(lines) {
			t.Fatalf("%s: no table:\n%s", name, out)
		}
		header := []rune(lines[h])
		var starts []int
		for i := 1; i < len(header); i++ {
			if header[i] != ' ' && header[i-1] == ' ' && header[i-2] == ' ' {
				starts = append(starts, i)
			}
		}
		for _, row := range lines[h+1 : h+4] {
			r := []rune(row)
			for _, p := range starts {
				if p >= len(r) || r[p] == ' ' || r[p-1] != ' ' {
					t.Errorf("%s: a row does not line up with the header:\n%s", name, out)
					break
				}
			}
		}
	}
}

// lastStamp reads the last of the date +%s%N lines a command appended to
// path.
func lastStamp(t *testing.T, path string) time.Time {
	t.Helper()
	lines := strings.Fields(readFile(t, path))
	if len(lines) == 0 {
		t.Fatalf("%s holds no time", path)
	}
	ns, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return time.Unix(0, ns)
}

// TestRunKilledStopsGroup: redlock killed with SIGKILL while its command
// runs (an OOM kill, a supervisor killing its pid, or timeout -s KILL, which
// kills redlock's whole process group) cannot stop the command itself: its
// command's whole group, a grandchild included, must still be gone before
// the lock's TTL has passed since the kill (no renewal can have come later),
// and a second run of the key, which gets it once the lock expires, must
// never run beside it.
func TestRunKilledStopsGroup(t *testing.T) {
	for _, target := range []string{"pid", "group"} {
		t.Run(target, func(t *testing.T) {
			_, nodes := startServers(t, 3)
			dir := t.TempDir()
			pidFile, first, second := filepath.Join(dir, "pgid"), filepath.Join(dir, "first"), filepath.Join(dir, "second")
			const ttl = time.Second
			cmd, _, _ := command(t, "run", "--nodes", nodes, "--key", "killed", "--ttl", ttl.String(), "--wait", "10s", "--",
				"sh", "-c", `echo $$ > "$0"; sleep 300 & while :; do date +%s%N >> "$1"; sleep 0.02; done`, pidFile, first)
			log, err := os.Create(filepath.Join(dir, "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			cmd.Stderr = log
			// redlock's own group, as timeout gives it: killing that
			// group must not reach what stops the command.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := readPID(t, pidFile)
			killGroupCleanup(t, pgid)
			for deadline := time.Now().Add(10 * time.Second); len(groupAlive(t, pgid)) < 2; {
				if time.Now().After(deadline) {
					t.Fatalf("the grandchild never started: %v", groupAlive(t, pgid))
				}
				time.Sleep(10 * time.Millisecond)
			}
			lastAlive, _ := watchGroup(t, pgid)
			time.Sleep(ttl / 2) // the 0.5 s in: one renewal done, or about to be
			killed := time.Now()
			if target == "pid" {
				err = cmd.Process.Kill()
			} else {
				err = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = cmd.Wait() }()

			r := redlockRun(t, "run", "--nodes", nodes, "--key", "killed", "--ttl", ttl.String(), "--wait", "20s", "--",
				"sh", "-c", `date +%s%N > "$0"`, second)
			wantExit(t, r, 0)
			// Gone at once if stopped at all; waited for, so that a group
			// still running has time to write after the second command.
			for deadline := time.Now().Add(5 * time.Second); len(groupAlive(t, pgid)) > 0; {
				if time.Now().After(deadline) {
					t.Errorf("the first command's group is alive 5s after the second run: %v", groupAlive(t, pgid))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			last := lastAlive()
			if !last.Before(killed.Add(ttl)) {
				t.Errorf("a process of the command's group was alive %v after redlock was killed, past the lock's TTL %v",
					last.Sub(killed), ttl)
			} else {
				t.Logf("the group was last seen alive %v after redlock was killed", last.Sub(killed))
			}
			if f, s := lastStamp(t, first), lastStamp(t, second); !f.Before(s) {
				t.Errorf("two holders: the first command wrote at %s, %v after the second run's command started",
					f.Format(time.StampMicro), f.Sub(s))
			}
			const said = "redlock run: redlock (pid %d) ended while its command ran: its guardian sent SIGKILL to the command's process group %d"
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(readFile(t, log.Name()), fmt.Sprintf(said, cmd.Process.Pid, pgid)); {
				if time.Now().After(deadline) {
					t.Errorf("the guardian does not say what it did:\n%s", readFile(t, log.Name()))
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

var guardianPID = regexp.MustCompile(`guardian pid (\d+)`)

// isGuardian reports whether pid is a live guardian process.
func isGuardian(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "\x00"+guardianCmd+"\x00")
}

// TestRunGuardianStandsDown: on a normal exit redlock ends its guardian
// first, so that it never takes redlock's exit for its death.
func TestRunGuardianStandsDown(t *testing.T) {
	_, nodes := startServers(t, 3)
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "down", "--wait", "10s", "--verbose", "--", "true")
	wantExit(t, r, 0)
	m := guardianPID.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("--verbose does not name the guardian:\n%s", r.stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	if isGuardian(pid) {
		t.Errorf("the guardian (pid %s) outlived redlock", m[1])
	}
	if strings.Contains(r.stderr, "guardian sent SIGKILL") || strings.Contains(r.stderr, "warning") {
		t.Errorf("a normal exit:\n%s", r.stderr)
	}
}

// TestRunGuardianKilled: a guardian killed while the command runs is said
// on stderr, once, and the run goes on to the command's own end.
func TestRunGuardianKilled(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	ready, stop := filepath.Join(dir, "ready"), filepath.Join(dir, "stop")
	cmd, _, _ := command(t, "run", "--nodes", nodes, "--key", "unguarded", "--wait", "10s", "--verbose", "--",
		"sh", "-c", `touch "$0"; while [ ! -f "$1" ]; do sleep 0.02; done; exit 3`, ready, stop)
	log, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready)
	m := guardianPID.FindStringSubmatch(readFile(t, log.Name()))
	if m == nil {
		t.Fatalf("--verbose does not name the guardian:\n%s", readFile(t, log.Name()))
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	const warning = "warning: the guardian (pid " + "%d) of the command's process group"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(readFile(t, log.Name()), fmt.Sprintf(warning, pid)); {
		if time.Now().After(deadline) {
			t.Fatalf("no warning that the guardian ended:\n%s", readFile(t, log.Name()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("redlock: %v, want the command's status 3\n%s", err, readFile(t, log.Name()))
	}
	if n := strings.Count(readFile(t, log.Name()), "warning"); n != 1 {
		t.Errorf("%d warnings:\n%s", n, readFile(t, log.Name()))
	}
}

// TestRunExecFailures: a command that cannot be run is reported in one line,
// with a shell's status, whether redlock finds out before starting it or
// only when the gate execs it.
func TestRunExecFailures(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	plain, garbage := filepath.Join(dir, "plain"), filepath.Join(dir, "garbage")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{filepath.Join(dir, "missing"), "no such file or directory", 127},
		{"no-such-command-" + filepath.Base(dir), "not found", 127},
		{plain, "permission denied", 126},
		{garbage, "exec format error", 126},
	} {
		r := redlockRun(t, "run", "--nodes", nodes, "--key", "exec", "--wait", "10s", "--", tc.path)
		wantExit(t, r, tc.code)
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: stderr %q does not say %q", tc.path, r.stderr, tc.want)
		}
		if tc.path == garbage && !strings.HasPrefix(r.stderr, "redlock run: exec "+garbage) {
			// The gate said it, as the subcommand that started it.
			t.Errorf("%s: stderr %q does not start with the subcommand's name", tc.path, r.stderr)
		}
	}
}

// TestGateShutRunsNothing: a gate whose pipe ends without redlock's byte
// (redlock died before the guardian watched) exits without running the
// command; the hidden commands without their pipe do nothing at all, and
// the guardian never takes a pgid of 1 or less (kill(-1) reaches every
// process).
func TestGateShutRunsNothing(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gate := exec.Command(bin, gateCmd, "/bin/sh", "sh", "-c", `touch "$0"`, ran)
	gate.ExtraFiles = []*os.File{r}
	if err := gate.Start(); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	_ = w.Close()
	if err := gate.Wait(); gate.ProcessState.ExitCode() == 0 {
		t.Errorf("a shut gate exited 0 (%v)", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a shut gate ran the command")
	}
	for _, args := range [][]string{{gateCmd, "/bin/sh", "sh", "-c", `touch "$0"`, ran}, {guardianCmd, "1"}, {guardianCmd, "0"}, {guardianCmd}} {
		r := redlockRun(t, args...)
		wantExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, "is run by redlock run itself") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a gate without its pipe ran the command")
	}
}
