package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// running is a redlock process the test started and has not waited for.
type running struct {
	args   []string
	stderr *syncBuffer
	exited chan struct{} // closed once it has exited; res is then set
	res    result
}

// syncBuffer is a bytes.Buffer that the test reads while the process
// writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRedlock starts the binary with args. A process still running when
// the test ends is killed (its guardian then kills its command's group).
func startRedlock(t *testing.T, args ...string) *running {
	t.Helper()
	cmd, stdout, _ := command(t, args...)
	r := &running{args: args, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.exited)
		_ = cmd.Wait()
		r.res = result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: r.stderr.String(), took: time.Since(start)}
	}()
	t.Cleanup(func() {
		select {
		case <-r.exited:
			return
		default:
		}
		_ = cmd.Process.Kill()
		<-r.exited
		t.Logf("redlock %v, killed at the end of the test; its stderr:\n%s", args, r.res.stderr)
	})
	return r
}

// wait waits for r to exit and returns what it did.
func (r *running) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("redlock %v still running after 90s; stderr:\n%s", r.args, r.stderr.String())
	}
	return r.res
}

// waitStarted waits until path exists: a command, under its lock, created
// it. One of procs exiting first fails the test at once.
func waitStarted(t *testing.T, path string, procs ...*running) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		for _, p := range procs {
			select {
			case <-p.exited:
				t.Fatalf("redlock %v exited with status %d before %s appeared; stderr:\n%s", p.args, p.res.code, filepath.Base(path), p.res.stderr)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdUntil is a command that creates started, then waits for stop (for
// 40 s at most: exit 9), then creates done, and exits 0.
func holdUntil(started, stop, done string) []string {
	return []string{"sh", "-c", `touch "$0"; i=0; while [ ! -f "$1" ]; do i=$((i+1)); [ $i -le 800 ] || exit 9; sleep 0.05; done; touch "$2"`, started, stop, done}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// statusJSON runs status --json on key.
func statusJSON(t *testing.T, nodes, key string) *keyStatus {
	t.Helper()
	r := redlockRun(t, "status", "--nodes", nodes, "--key", key, "--json")
	var st keyStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("%v:\n%s", err, r.stdout)
	}
	wantExit(t, r, verdictExit(st.Verdict))
	return &st
}

// verdictExit is status's exit status for a verdict.
func verdictExit(verdict string) int {
	switch verdict {
	case verdictFree:
		return exitFree
	case verdictSplit:
		return exitSplit
	case verdictUnknown:
		return exitUnavailable
	}
	return 0
}

// TestRunSharedTogether: two run --shared hold one key at once, each
// renewed past its TTL: the second gets the key while the first's command
// runs, and both commands run until the test lets them end. status shows
// the two shared holders meanwhile, and an exclusive run is refused.
// Without --shared the second run waits, then gives up (exit 75).
func TestRunSharedTogether(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	run := func(started string) *running {
		return startRedlock(t, append([]string{"run", "--nodes", nodes, "--shared", "--key", "db", "--ttl", "3s", "--wait", "10s", "--"},
			holdUntil(p(started), p("stop"), os.DevNull)...)...)
	}
	a := run("a")
	waitStarted(t, p("a"), a)
	b := run("b")
	waitStarted(t, p("b"), a, b)
	// Both commands run now: neither ends before the stop file.

	busy := redlockRun(t, "run", "--nodes", nodes, "--key", "db", "--wait", "0", "--", "true")
	wantExit(t, busy, exitTempFail)

	time.Sleep(3200 * time.Millisecond) // past the TTL: only renewal keeps the shares
	st := statusJSON(t, nodes, "db")
	if st.Verdict != verdictShared || st.Shared != 2 || len(st.SharedHolders) != 2 || st.Holder != "" {
		t.Errorf("status while two shared runs hold the key: %+v", st)
	}
	for _, h := range st.SharedHolders {
		if h.HeldOn < st.Quorum || h.TTLMillis <= 0 || h.TTLMillis > 3000 || len(h.Holder) != holderChars {
			t.Errorf("shared holder %+v", h)
		}
	}
	text := redlockRun(t, "status", "--nodes", nodes, "--key", "db")
	wantExit(t, text, 0)
	for _, want := range []string{"shared", "2 locks", "verdict: shared by a quorum (2 locks)"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("status does not show %q:\n%s", want, text.stdout)
		}
	}

	touch(t, p("stop"))
	wantExit(t, a.wait(t), 0)
	wantExit(t, b.wait(t), 0)
	// Both released: an exclusive run gets the key.
	wantExit(t, redlockRun(t, "run", "--nodes", nodes, "--key", "db", "--wait", "10s", "--", "true"), 0)
}

// releaseChannel is the channel to which a run waiting for key subscribes
// on every node after its first attempt failed (internal/waiting in the library,
// waiting.ChannelPrefix).
func releaseChannel(key string) string { return "redlock:released:" + key }

// TestRunSharedExclusive: a shared run and an exclusive one never hold the
// key together, each way round. An exclusive run waits while a shared one
// holds the key, and new shared runs wait behind it (they would starve it
// otherwise); once the shared command has ended, the exclusive one runs.
// Then two shared runs wait while an exclusive run holds the key, and both
// get it together once its command has ended: each command runs only after
// the holder's ended, and waits for the other to start.
func TestRunSharedExclusive(t *testing.T) {
	servers, nodes := startServers(t, 3)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	// Each part has its key: a part that failed leaves its key held.
	key := "doc"
	runArgs := func(shared bool, wait string, argv ...string) []string {
		args := []string{"run", "--nodes", nodes, "--key", key, "--wait", wait}
		if shared {
			args = append(args, "--shared")
		}
		return append(append(args, "--"), argv...)
	}

	t.Run("exclusive waits for shared", func(t *testing.T) {
		reader := startRedlock(t, runArgs(true, "10s", holdUntil(p("r-started"), p("r-stop"), p("r-done"))...)...)
		waitStarted(t, p("r-started"), reader)
		wantExit(t, redlockRun(t, runArgs(false, "0", "true")...), exitTempFail)
		// Another reader joins at once, while no writer waits.
		wantExit(t, redlockRun(t, runArgs(true, "0", "true")...), 0)

		writer := startRedlock(t, runArgs(false, "40s", "sh", "-c", `test -f "$0"`, p("r-done"))...)
		// Once the writer waits, a new reader is refused: the writer's
		// first attempt was refused, and it waits for the key.
		for deadline := time.Now().Add(30 * time.Second); ; {
			r := redlockRun(t, runArgs(true, "0", "true")...)
			if r.code == exitTempFail {
				break
			}
			wantExit(t, r, 0)
			select {
			case <-writer.exited:
				t.Fatalf("the writer did not wait for the reader: exit status %d; stderr:\n%s", writer.res.code, writer.res.stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("new readers still get the key 30s after a writer started waiting for it")
			}
			time.Sleep(20 * time.Millisecond)
		}
		touch(t, p("r-stop"))
		wantExit(t, reader.wait(t), 0)
		// 1 from test -f: the writer's command ran before the reader's ended.
		wantExit(t, writer.wait(t), 0)
	})

	t.Run("shared waits for exclusive", func(t *testing.T) {
		key = "doc2"
		writer := startRedlock(t, runArgs(false, "10s", holdUntil(p("w-started"), p("w-stop"), p("w-done"))...)...)
		waitStarted(t, p("w-started"), writer)
		wantExit(t, redlockRun(t, runArgs(true, "0", "true")...), exitTempFail)

		// Each reader's command checks that the writer's has ended, then
		// waits for the other reader's to start (for 30 s at most: 9).
		reader := func(mine, other string) *running {
			return startRedlock(t, runArgs(true, "40s", "sh", "-c",
				`test -f "$0" || exit 3; touch "$1"; i=0; while [ ! -f "$2" ]; do i=$((i+1)); [ $i -le 600 ] || exit 9; sleep 0.05; done`,
				p("w-done"), p(mine), p(other))...)
		}
		r1, r2 := reader("r1", "r2"), reader("r2", "r1")
		// Both wait: each subscribed to the key's releases after its
		// first attempt was refused.
		admin := servers[0].Client()
		t.Cleanup(func() { _ = admin.Close() })
		for deadline := time.Now().Add(30 * time.Second); ; {
			subs, err := admin.PubSubNumSub(t.Context(), releaseChannel(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if subs[releaseChannel(key)] >= 2 {
				break
			}
			for _, r := range []*running{r1, r2} {
				select {
				case <-r.exited:
					t.Fatalf("a reader did not wait for the writer: exit status %d; stderr:\n%s", r.res.code, r.res.stderr)
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of 2 readers wait for the key after 30s", subs[releaseChannel(key)])
			}
			time.Sleep(20 * time.Millisecond)
		}
		touch(t, p("w-stop"))
		wantExit(t, writer.wait(t), 0)
		// 3: a reader ran before the writer's command ended; 9: the readers
		// did not hold the key together.
		wantExit(t, r1.wait(t), 0)
		wantExit(t, r2.wait(t), 0)
	})
}

// TestRunSharedUsage: --shared takes one key and no --fencing, refused
// before any node is dialled (the node here listens nowhere: 69 otherwise);
// run -h tells of it.
func TestRunSharedUsage(t *testing.T) {
	const ok = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"two keys", []string{"--key", "a", "--key", "b"}, `--shared with 2 keys ("a", "b"): a shared lock holds one key`},
		{"fencing", []string{"--key", "a", "--fencing"}, "--shared with --fencing: a shared lock has no fencing token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--nodes", ok, "--shared"}, tc.args...), "--", "true")
			r := redlockRun(t, args...)
			wantExit(t, r, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
		})
	}
	// The same key twice is one key: no usage error, the node is tried, once.
	if r := redlockRun(t, "run", "--nodes", ok, "--wait", "0", "--shared", "--key", "a", "--key", "a", "--", "true"); r.code != exitUnavailable {
		t.Errorf("--shared --key a --key a: exit status %d, want %d; stderr:\n%s", r.code, exitUnavailable, r.stderr)
	}

	help := redlockRun(t, "run", "-h")
	wantExit(t, help, 0)
	if !strings.Contains(help.stdout, "-shared") || !strings.Contains(help.stdout, "--shared takes the key shared") {
		t.Errorf("run -h does not tell of --shared:\n%s", help.stdout)
	}
}

// TestStatusShared: status shows a key taken shared by the library's
// shared Locks: per node each one's token prefix and time left, and the
// quorum's shared holders, in JSON and text; never a whole token.
func TestStatusShared(t *testing.T) {
	servers, nodes := startServers(t, 3)
	locks := libraryClient(t, servers)
	ctx := t.Context()
	const key = "catalog"
	var tokens []string
	var held []*redlock.Lock
	for range 2 {
		l, err := locks.Acquire(ctx, key, time.Minute, redlock.Shared())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		tokens = append(tokens, l.Token()[:holderChars])
	}
	slices.Sort(tokens)

	r := redlockRun(t, "status", "--nodes", nodes, "--key", key, "--json")
	wantExit(t, r, 0)
	for _, l := range held {
		if strings.Contains(r.stdout, l.Token()) {
			t.Fatalf("status shows a whole token:\n%s", r.stdout)
		}
	}
	st := statusJSON(t, nodes, key)
	var got []string
	for _, h := range st.SharedHolders {
		got = append(got, h.Holder)
		if h.HeldOn < 2 || h.TTLMillis <= 50_000 || h.TTLMillis > 60_000 {
			t.Errorf("shared holder %+v", h)
		}
	}
	slices.Sort(got)
	if st.Verdict != verdictShared || st.Shared != 2 || !slices.Equal(got, tokens) || st.Holder != "" {
		t.Fatalf("status %+v, want shared by %v", st, tokens)
	}
	for i, n := range st.Nodes {
		if !n.Held {
			continue // a node the acquires did not wait for
		}
		if n.Holder != "" || len(n.Shared) == 0 || n.TTLMillis == nil || *n.TTLMillis <= 50_000 {
			t.Errorf("node %d: %+v", i, n)
		}
		for _, h := range n.Shared {
			if !slices.Contains(tokens, h.Holder) || h.TTLMillis <= 50_000 || h.TTLMillis > 60_000 {
				t.Errorf("node %d: shared holder %+v", i, h)
			}
		}
	}
	text := redlockRun(t, "status", "--nodes", nodes, "--key", key)
	wantExit(t, text, 0)
	for _, want := range []string{"shared", "2 locks", "shared by " + tokens[0] + "… for ", "shared by " + tokens[1] + "… for ",
		"verdict: shared by a quorum (2 locks)"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("status does not show %q:\n%s", want, text.stdout)
		}
	}

	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st := statusJSON(t, nodes, key); st.Verdict != verdictShared || st.Shared != 1 || len(st.SharedHolders) != 1 || st.SharedHolders[0].Holder != held[1].Token()[:holderChars] {
		t.Errorf("one shared lock left: %+v", st)
	}
	text = redlockRun(t, "status", "--nodes", nodes, "--key", key)
	if !strings.Contains(text.stdout, "verdict: shared by a quorum (1 lock)") {
		t.Errorf("one shared lock left:\n%s", text.stdout)
	}
}

// libraryClient is a library Client over servers, as another process
// would have one, closed with the test.
func libraryClient(t *testing.T, servers []*redistest.Server) *redlock.Client {
	t.Helper()
	var clients []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	locks, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close(context.Background()) })
	return locks
}
