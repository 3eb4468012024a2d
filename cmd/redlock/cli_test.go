package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// bin is the redlock binary the tests run, as a user would.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "redlock-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "redlock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// startServers starts n redis-server processes and returns them with their
// node list as --nodes takes it.
func startServers(t *testing.T, n int) ([]*redistest.Server, string) {
	t.Helper()
	servers := redistest.StartT(t, n)
	var urls []string
	for _, s := range servers {
		urls = append(urls, "redis://"+s.Addr())
	}
	return servers, strings.Join(urls, ",")
}

// result is one finished run of the binary.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// command prepares the binary with args, in dir t.TempDir() unless set.
func command(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "REDLOCK_NODES=")
	cmd.WaitDelay = time.Second // a command left running must not hold the test
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// finish waits for cmd and returns what it did.
func finish(t *testing.T, cmd *exec.Cmd, stdout, stderr *bytes.Buffer, start time.Time) result {
	t.Helper()
	err := cmd.Wait()
	r := result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("redlock %v: %v", cmd.Args[1:], err)
	}
	return r
}

// redlockRun runs the binary to the end.
func redlockRun(t *testing.T, args ...string) result {
	t.Helper()
	cmd, stdout, stderr := command(t, args...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return finish(t, cmd, stdout, stderr, start)
}

// wantExit fails the test unless r ended with code; an error is one line.
func wantExit(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	if code != 0 && r.stderr != "" {
		oneLineErr(t, r.stderr)
	}
}

// oneLineErr checks that stderr is one line, and no stack trace.
func oneLineErr(t *testing.T, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "redlock") ||
		strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Fatalf("stderr is not one line of error:\n%s", stderr)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUsageErrors: bad flags, arguments and node URLs exit 64 with one line
// on stderr that never shows a password.
func TestUsageErrors(t *testing.T) {
	const ok = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "usage: redlock"},
		{"unknown command", []string{"lock"}, `unknown command "lock" ('redlock help' lists the commands)`},
		{"run without key", []string{"run", "--nodes", ok, "--", "true"}, "--key is required"},
		{"run without command", []string{"run", "--nodes", ok, "--key", "k"}, "no command to run"},
		{"run bad ttl", []string{"run", "--nodes", ok, "--key", "k", "--ttl", "0s", "--", "true"}, "--ttl must be positive"},
		{"run negative wait", []string{"run", "--nodes", ok, "--key", "k", "--wait", "-1s", "--", "true"}, "--wait must not be negative"},
		{"run unknown flag", []string{"run", "--nodes", ok, "--key", "k", "--lease", "1s", "--", "true"}, "flag provided but not defined: -lease"},
		{"run bad duration", []string{"run", "--nodes", ok, "--key", "k", "--ttl", "soon", "--", "true"}, `invalid value "soon"`},
		{"run no nodes", []string{"run", "--key", "k", "--", "true"}, "no nodes: give --nodes or $REDLOCK_NODES"},
		{"status without key", []string{"status", "--nodes", ok}, "--key is required"},
		{"status extra argument", []string{"status", "--nodes", ok, "--key", "k", "extra"}, `unexpected argument "extra"`},
		{"status repeated key", []string{"status", "--nodes", ok, "--key", "a", "--key", "b"}, `--key given 2 times ("a", "b"): redlock status takes one key`},
		{"run empty key among several", []string{"run", "--nodes", ok, "--key", "a", "--key", "", "--", "true"}, "--key must not be empty"},
		{"check unknown flag", []string{"check", "--nodes", ok, "--key", "k"}, "flag provided but not defined: -key"},
		{"scheme", []string{"check", "--nodes", "http://127.0.0.1:6379"}, `bad node URL "http://127.0.0.1:6379"`},
		{"no port", []string{"status", "--key", "k", "--nodes", "127.0.0.1"}, `bad node "127.0.0.1": want host:port`},
		{"port", []string{"run", "--key", "k", "--nodes", ok + ",redis://u:s3cret@h:port", "--", "true"}, `bad node URL "redis://***@h:port": invalid port`},
		{"database", []string{"status", "--key", "k", "--nodes", "redis://u:s3cret@h:6379/x"}, `bad node URL "redis://u:xxxxx@h:6379/x": invalid database number`},
		{"option", []string{"check", "--nodes", "rediss://h:6379?pool=3"}, "unexpected option: pool"},
		{"empty entry", []string{"check", "--nodes", ok + ",," + ok}, "empty entry"},
		{"same node twice", []string{"run", "--key", "k", "--nodes", ok + "," + ok, "--", "true"}, "same Redis"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := redlockRun(t, tc.args...)
			if r.code != exitUsage {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", r.code, exitUsage, r.stderr)
			}
			if tc.name != "no command" {
				oneLineErr(t, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "s3cret") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		r := redlockRun(t, "run", "-h")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "-grace") || !strings.Contains(r.stdout, "-- command [args...]") {
			t.Errorf("run -h:\n%s", r.stdout)
		}
	})
}

// TestFenceKeyMatchesLibrary: status reads the counter the library really
// writes, for each of the naming rule's cases.
func TestFenceKeyMatchesLibrary(t *testing.T) {
	servers := redistest.StartT(t, 1)
	c := redis.NewClient(&redis.Options{Addr: servers[0].Addr()})
	t.Cleanup(func() { _ = c.Close() })
	locks, err := redlock.New([]redis.UniversalClient{c}, redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close(context.Background()) })
	ctx := t.Context()
	for i, key := range []string{"plain", "{tag}rest", "a}b", "x{}y", "{}z"} {
		lock, err := locks.Acquire(ctx, key, time.Minute) // retried: a loaded machine may miss a 50 ms node deadline
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Get(ctx, redlock.FenceKey(key)).Uint64()
		if err != nil || got != lock.Fence() {
			t.Errorf("key %q: counter %q holds %d (%v), the lock's fence is %d", key, redlock.FenceKey(key), got, err, lock.Fence())
		}
		if n := c.DBSize(ctx).Val(); n != int64(2*(i+1)) {
			t.Errorf("key %q: %d keys, want the lock's and its counter only", key, n)
		}
	}
}

// TestStatus: per node what is held, by whom (a prefix only), for how long
// and the fence; then the verdict, in text and JSON.
func TestStatus(t *testing.T) {
	servers, nodes := startServers(t, 3)
	var clients []redis.UniversalClient
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	locks, err := redlock.New(clients, redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close(context.Background()) })
	ctx := t.Context()
	const key = "nightly-report"
	lock, err := locks.Acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Acquire returns once a quorum confirmed; the third node may be late,
	// or have missed its deadline: an Extend puts the key back there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		held := 0
		for _, c := range clients {
			if c.Exists(ctx, key).Val() == 1 {
				held++
			}
		}
		if held == len(clients) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock is on %d of %d nodes", held, len(clients))
		}
		time.Sleep(50 * time.Millisecond)
		if err := lock.Extend(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	status := func() (*keyStatus, result) {
		t.Helper()
		r := redlockRun(t, "status", "--nodes", nodes, "--key", key, "--json")
		var st keyStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%v:\n%s", err, r.stdout)
		}
		wantExit(t, r, verdictExit(st.Verdict))
		if strings.Contains(r.stdout, lock.Token()) {
			t.Fatalf("status shows the whole token:\n%s", r.stdout)
		}
		return &st, r
	}
	st, _ := status()
	if st.Verdict != verdictHeld || st.HeldOn != 3 || st.Holder != lock.Token()[:holderChars] || st.Quorum != 2 {
		t.Fatalf("status %+v, want held on 3 by %s", st, lock.Token()[:holderChars])
	}
	for i, n := range st.Nodes {
		if !n.Reachable || !n.Held || n.Addr != servers[i].Addr() || n.Holder != st.Holder ||
			n.TTLMillis == nil || *n.TTLMillis <= 50_000 || *n.TTLMillis > 60_000 || n.Fence == nil || *n.Fence != lock.Fence() {
			t.Errorf("node %d: %+v", i, n)
		}
	}

	text := redlockRun(t, "status", "--nodes", nodes, "--key", key)
	wantExit(t, text, 0)
	for _, want := range []string{servers[2].Addr(), "held", st.Holder + "…", fmt.Sprintf("  %d\n", lock.Fence()),
		"verdict: held by a quorum (" + st.Holder + "… on 3 of 3 nodes)"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("status does not show %q:\n%s", want, text.stdout)
		}
	}

	// Another value on one node: a quorum still holds.
	if err := clients[0].(*redis.Client).Set(ctx, key, "other.1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if st, _ := status(); st.Verdict != verdictHeld || st.HeldOn != 2 || st.Nodes[0].Holder != "other" {
		t.Errorf("one node overwritten: %+v", st)
	}
	// Released: the other value alone is no quorum; the counters stay.
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = status()
	if st.Verdict != verdictSplit || st.Nodes[1].Held || st.Nodes[1].Fence == nil || *st.Nodes[1].Fence != lock.Fence() {
		t.Errorf("after release, one stray value: %+v", st)
	}
	clients[0].(*redis.Client).Del(ctx, key)
	if st, _ := status(); st.Verdict != verdictFree {
		t.Errorf("after release: %+v", st)
	}

	// A quorum down: the verdict is unknown, exit 69.
	for _, s := range servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := redlockRun(t, "status", "--nodes", nodes, "--key", key)
	wantExit(t, r, exitUnavailable)
	if !strings.Contains(r.stdout, "unreachable") || !strings.Contains(r.stdout, "verdict: unknown") {
		t.Errorf("status with 2 of 3 down:\n%s", r.stdout)
	}
}

// TestCheck flags a node whose policy evicts lock keys; --strict exits 1.
func TestCheck(t *testing.T) {
	servers, nodes := startServers(t, 3)
	admin := servers[1].Client()
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	r := redlockRun(t, "check", "--nodes", nodes)
	wantExit(t, r, 0)
	want := "node 1 (" + servers[1].Addr() + "): maxmemory-policy is volatile-lru, which evicts lock keys under memory pressure: set it to noeviction"
	for _, s := range []string{want, "volatile-lru", "7.", "appendonly is no", "warning(s):"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("check does not say %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "node 0 ("+servers[0].Addr()+"): maxmemory-policy") {
		t.Errorf("check flags a noeviction node:\n%s", r.stdout)
	}

	strict := redlockRun(t, "check", "--nodes", nodes, "--strict")
	wantExit(t, strict, 1)
	if !strings.Contains(strict.stdout, want) || !strings.Contains(strict.stderr, "--strict") {
		t.Errorf("check --strict:\n%s\n%s", strict.stdout, strict.stderr)
	}

	j := redlockRun(t, "check", "--nodes", nodes, "--json")
	wantExit(t, j, 0)
	var report struct {
		Quorum, Reachable int
		Servers           []serverJSON
		Warnings          []string
	}
	if err := json.Unmarshal([]byte(j.stdout), &report); err != nil {
		t.Fatalf("%v:\n%s", err, j.stdout)
	}
	if report.Reachable != 3 || len(report.Servers) != 3 || report.Servers[1].MaxmemoryPolicy != "volatile-lru" ||
		report.Servers[0].MaxmemoryPolicy != "noeviction" || !strings.Contains(strings.Join(report.Servers[1].Warnings, "\n"), want) {
		t.Errorf("check --json: %+v", report)
	}

	// Made safe, --strict passes.
	for _, s := range servers {
		c := s.Client()
		for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"appendonly", "yes"}, {"appendfsync", "always"}} {
			if err := c.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.Close()
	}
	clean := redlockRun(t, "check", "--nodes", nodes, "--strict")
	wantExit(t, clean, 0)
	if !strings.Contains(clean.stdout, "no warnings") {
		t.Errorf("check on safe nodes:\n%s", clean.stdout)
	}

	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	down := redlockRun(t, "check", "--nodes", nodes)
	wantExit(t, down, exitUnavailable)
}

// TestRunExitStatus: the command's own status passes through, and it sees
// the key and the fence.
func TestRunExitStatus(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	for _, code := range []int{0, 3, 42} {
		out := filepath.Join(dir, fmt.Sprint(code))
		r := redlockRun(t, "run", "--nodes", nodes, "--key", "job", "--fencing", "--wait", "10s", "--",
			"sh", "-c", `echo "$REDLOCK_KEY $REDLOCK_FENCE" > "$0"; exit $1`, out, fmt.Sprint(code))
		wantExit(t, r, code)
		if r.stderr != "" {
			t.Errorf("stderr without --verbose: %q", r.stderr)
		}
	}
	// Fences increase with each holder; without --fencing there is none.
	var last uint64
	for _, code := range []int{0, 3, 42} {
		seen := readFile(t, filepath.Join(dir, fmt.Sprint(code)))
		fence, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(seen, "job "), "\n"), 10, 64)
		if err != nil || fence <= last {
			t.Errorf("run %d saw %q, after fence %d", code, seen, last)
		}
		last = fence
	}
	out := filepath.Join(dir, "nofence")
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "job", "--wait", "10s", "--", "sh", "-c", `echo "$REDLOCK_KEY:${REDLOCK_FENCE-unset}" > "$0"`, out), 0)
	if got := readFile(t, out); got != "job:unset\n" {
		t.Errorf("without --fencing the command saw %q", got)
	}
	// The nodes from the environment.
	env, stdout, stderr := command(t, "run", "--key", "job", "--wait", "10s", "--", "true")
	env.Env = append(env.Env, "REDLOCK_NODES="+nodes)
	start := time.Now()
	if err := env.Start(); err != nil {
		t.Fatal(err)
	}
	wantExit(t, finish(t, env, stdout, stderr, start), 0)
	// A command that cannot be started, as a shell says it.
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "job", "--wait", "10s", "--", filepath.Join(dir, "missing"))
	wantExit(t, r, 127)
}

// TestRunWaits: while one run holds the key, another with --wait 0 gets 75,
// and one with a --wait runs once the first has released; renewal keeps the
// lock past its TTL.
func TestRunWaits(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	started, done := filepath.Join(dir, "started"), filepath.Join(dir, "done")
	// A 3s TTL held for 5s: renewed every second.
	first, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "report", "--ttl", "3s", "--wait", "10s", "--verbose", "--",
		"sh", "-c", `touch "$0"; sleep 5; touch "$1"`, started, done)
	start := time.Now()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, started)
	time.Sleep(3200 * time.Millisecond) // past the TTL: only renewal keeps it
	busy := redlockRun(t, "run", "--nodes", nodes, "--key", "report", "--wait", "0", "--", "true")
	if busy.code != exitTempFail {
		_ = first.Process.Kill()
		t.Logf("the first run:\n%s", finish(t, first, stdout, stderr, start).stderr)
	}
	wantExit(t, busy, exitTempFail)
	if !strings.Contains(busy.stderr, `"report" not acquired in one try (--wait 0)`) {
		t.Errorf("stderr: %q", busy.stderr)
	}
	short := redlockRun(t, "run", "--nodes", nodes, "--key", "report", "--wait", "200ms", "--", "true")
	wantExit(t, short, exitTempFail)
	if short.took < 200*time.Millisecond {
		t.Errorf("--wait 200ms gave up after %v", short.took)
	}
	second := redlockRun(t, "run", "--nodes", nodes, "--key", "report", "--wait", "20s", "--", "sh", "-c", `test -f "$0"`, done)
	wantExit(t, second, 0)
	wantExit(t, finish(t, first, stdout, stderr, start), 0)
}

// TestRunQuorumUnreachable: with 2 of 3 nodes down, run with --wait 0
// exits 69 at once.
func TestRunQuorumUnreachable(t *testing.T) {
	servers, nodes := startServers(t, 3)
	for _, s := range servers[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "k", "--wait", "0", "--", "true")
	wantExit(t, r, exitUnavailable)
	if r.took > 10*time.Second || !strings.Contains(r.stderr, "fewer than the quorum of 2") {
		t.Errorf("took %v; stderr %q", r.took, r.stderr)
	}
}

var sigNames = map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT", syscall.SIGHUP: "HUP"}

// TestRunForwardsSignals: SIGTERM, SIGINT and SIGHUP sent to redlock reach
// the command, whose own status is then redlock's.
func TestRunForwardsSignals(t *testing.T) {
	_, nodes := startServers(t, 3)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			cmd, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "sig", "--wait", "10s", "--",
				"sh", "-c", `exec 2>/dev/null; trap 'echo trapped > "$1"; exit 5' `+sigNames[sig]+`; touch "$0"; for i in $(seq 400); do sleep 0.05; done`, ready, got)
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			// Not forwarded, the signal would leave redlock waiting for
			// the command's 20 s loop.
			timer := time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
			defer timer.Stop()
			r := finish(t, cmd, stdout, stderr, start)
			wantExit(t, r, 5)
			if readFile(t, got) != "trapped\n" {
				t.Error("the command's trap did not run")
			}
			// Released at exit: the key is free at once.
			wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "sig", "--wait", "10s", "--", "true"), 0)
		})
	}
}

// TestRunLockLost: when a quorum of nodes dies under a running command, the
// command gets SIGTERM, then SIGKILL after --grace if it ignores it, and
// redlock exits 70.
func TestRunLockLost(t *testing.T) {
	for _, tc := range []struct {
		name, trap string
		ignores    bool // the command ignores SIGTERM: SIGKILL after --grace
	}{
		{"stops on SIGTERM", `trap 'date +%s%N > "$1"; exit 0' TERM`, false},
		{"ignores SIGTERM", `trap 'date +%s%N > "$1"' TERM`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers, nodes := startServers(t, 3)
			dir := t.TempDir()
			ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
			// SIGTERM 390 ms before Until (the grace and the SIGKILL's
			// margin of 90 ms), SIGKILL the grace later.
			const grace = 300 * time.Millisecond
			cmd, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "lost", "--ttl", "900ms", "--grace", grace.String(), "--wait", "10s", "--",
				// The group's SIGTERM kills the loop's sleep too, which the
				// shell reports on its stderr: not redlock's to judge.
				"sh", "-c", `exec 2>/dev/null; `+tc.trap+`; touch "$0"; for i in $(seq 400); do sleep 0.05; done`, ready, got)
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitFile(t, ready)
			killed := time.Now()
			for _, s := range servers[:2] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			r := finish(t, cmd, stdout, stderr, start)
			exited := time.Now()
			wantExit(t, r, exitSoftware)
			if !strings.Contains(r.stderr, "lock lost") || !strings.Contains(r.stderr, "the command was stopped") {
				t.Errorf("stderr: %q", r.stderr)
			}
			ns, err := strconv.ParseInt(strings.TrimSpace(readFile(t, got)), 10, 64)
			if err != nil {
				t.Fatalf("the command never got SIGTERM: %v", err)
			}
			termed := time.Unix(0, ns)
			// Lost before the last renewal's TTL ran out, within a TTL of
			// the nodes' death (and a second for a loaded machine).
			if d := termed.Sub(killed); d > 900*time.Millisecond+time.Second {
				t.Errorf("SIGTERM %v after the nodes died, TTL 900ms", d)
			}
			switch d := exited.Sub(termed); {
			case tc.ignores && (d < grace || d > grace+2*time.Second):
				t.Errorf("a command that ignores SIGTERM was killed %v after it, --grace %v", d, grace)
			case !tc.ignores && d > time.Second:
				t.Errorf("redlock exited %v after the command's SIGTERM", d)
			}
		})
	}
}

// TestRunTTLMinimum: a TTL too short for run's own timing (its kill margin
// and per-node deadline have a 10 ms floor) is a usage error that names the
// minimum, not a command killed at once as "lock lost"; the minimum itself
// runs the command.
func TestRunTTLMinimum(t *testing.T) {
	_, nodes := startServers(t, 3)
	for _, ttl := range []string{"1ms", "10ms", "199ms"} {
		r := redlockRun(t, "run", "--nodes", nodes, "--key", "short", "--ttl", ttl, "--wait", "10s", "--", "sleep", "0.1")
		wantExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, "--ttl "+ttl) || !strings.Contains(r.stderr, "minimum of 200ms") {
			t.Errorf("--ttl %s: stderr %q does not name the minimum", ttl, r.stderr)
		}
	}
	ran := filepath.Join(t.TempDir(), "ran")
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "short", "--ttl", "200ms", "--wait", "10s", "--", "touch", ran), 0)
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("--ttl 200ms: the command did not run: %v", err)
	}
}

// TestRunSeveralKeys: run with --key given several times holds every key
// while its command runs, renewed past the TTL, so that a run or a
// TryAcquire of any one of them fails, and releases all of them when it
// exits. A run that took only the last --key (or only the first) leaves
// the other free and fails here.
func TestRunSeveralKeys(t *testing.T) {
	servers, nodes := startServers(t, 3)
	var clients []redis.UniversalClient
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	locks, err := redlock.New(clients, redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close(context.Background()) })

	dir := t.TempDir()
	env, started, stop := filepath.Join(dir, "env"), filepath.Join(dir, "started"), filepath.Join(dir, "stop")
	first, stdout, stderr := command(t, "run", "--nodes", nodes, "--key", "a", "--key", "b", "--ttl", "2s", "--wait", "10s", "--verbose", "--",
		"sh", "-c", `printf '%s|%s' "$REDLOCK_KEYS" "${REDLOCK_KEY-unset}" > "$0"; touch "$1"; while [ ! -f "$2" ]; do sleep 0.05; done`, env, started, stop)
	start := time.Now()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = os.WriteFile(stop, nil, 0o644)
			_ = first.Process.Kill()
			t.Logf("the first run:\n%s", finish(t, first, stdout, stderr, start).stderr)
		}
	}()
	waitFile(t, started)
	if got := readFile(t, env); got != "a\nb|unset" {
		t.Errorf("the command saw REDLOCK_KEYS|REDLOCK_KEY %q, want %q", got, "a\nb|unset")
	}
	time.Sleep(2200 * time.Millisecond) // past the TTL: only renewal keeps them

	for _, key := range []string{"a", "b"} {
		busy := redlockRun(t, "run", "--nodes", nodes, "--key", key, "--wait", "200ms", "--", "true")
		wantExit(t, busy, exitTempFail)
		if !strings.Contains(busy.stderr, fmt.Sprintf("%q not acquired within --wait 200ms", key)) {
			t.Errorf("run --key %s: stderr %q", key, busy.stderr)
		}
		l, err := locks.TryAcquire(t.Context(), key, time.Minute)
		if err == nil {
			_ = l.Release(t.Context())
			t.Fatalf("TryAcquire(%q) got the key while run holds it", key)
		}
		if !errors.Is(err, redlock.ErrHeldByOther) {
			t.Errorf("TryAcquire(%q): %v, want held by another", key, err)
		}
	}
	// Both keys, in the other order, as one try: refused as one.
	both := redlockRun(t, "run", "--nodes", nodes, "--key", "b", "--key", "a", "--wait", "0", "--", "true")
	wantExit(t, both, exitTempFail)
	if !strings.Contains(both.stderr, `"a", "b" not acquired in one try (--wait 0)`) {
		t.Errorf("stderr: %q", both.stderr)
	}

	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stopped = true
	r := finish(t, first, stdout, stderr, start)
	wantExit(t, r, 0)
	for _, want := range []string{`acquired "a", "b"`, `renewed "a", "b"`, `released "a", "b"`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--verbose does not say %q:\n%s", want, r.stderr)
		}
	}

	// Released, not expired: the renewed validity left is well over the
	// second these take.
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	l, err := locks.AcquireAll(ctx, []string{"a", "b"}, time.Minute)
	if err != nil {
		t.Fatalf("a and b not free after run exited: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A key given twice is held once; the keys come sorted.
	dup := redlockRun(t, "run", "--nodes", nodes, "--key", "b", "--key", "a", "--key", "b", "--wait", "10s", "--", "sh", "-c", `printf %s "$REDLOCK_KEYS"`)
	wantExit(t, dup, 0)
	if dup.stdout != "a\nb" {
		t.Errorf("--key b --key a --key b: REDLOCK_KEYS %q, want %q", dup.stdout, "a\nb")
	}
	// The same key twice is the one-key lock, as a single --key.
	one := redlockRun(t, "run", "--nodes", nodes, "--key", "a", "--key", "a", "--wait", "10s", "--", "sh", "-c", `printf '%s|%s' "$REDLOCK_KEY" "${REDLOCK_KEYS-unset}"`)
	wantExit(t, one, 0)
	if one.stdout != "a|unset" {
		t.Errorf("--key a --key a: the command saw %q, want %q", one.stdout, "a|unset")
	}
}

// TestStatusMetadata: what run --metadata stores with its lock, status shows:
// the quorum holder's in a line of its own and in the JSON report, per node
// too. The command runs status itself while it holds the lock. Metadata
// that is not one line of UTF-8 within MaxMetadataLen is a usage error.
func TestStatusMetadata(t *testing.T) {
	_, nodes := startServers(t, 3)
	const key, md = "metadata-report", "host web-3 pid 42"
	check := bin + " status --nodes " + nodes + " --key " + key
	r := redlockRun(t, "run", "--nodes", nodes, "--key", key, "--metadata", md, "--",
		"sh", "-c", check+" && "+check+" --json")
	wantExit(t, r, 0)
	_, js, ok := strings.Cut(r.stdout, "verdict: held by a quorum")
	if !ok || !strings.Contains(js, "\nholder metadata: "+md+"\n") {
		t.Fatalf("status does not show the holder's metadata line:\n%s", r.stdout)
	}
	var st keyStatus
	if err := json.Unmarshal([]byte(js[strings.Index(js, "{"):]), &st); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	if st.Verdict != verdictHeld || st.Metadata != md {
		t.Fatalf("status %+v, want held with metadata %q", st, md)
	}
	held := 0
	for _, n := range st.Nodes {
		if n.Held && n.Metadata == md {
			held++
		}
	}
	if held < st.Quorum {
		t.Fatalf("the metadata is on %d nodes, fewer than the quorum: %+v", held, st.Nodes)
	}

	for _, bad := range []string{strings.Repeat("x", redlock.MaxMetadataLen+1), "two\nlines"} {
		wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", key, "--metadata", bad, "--", "true"), exitUsage)
	}
}
