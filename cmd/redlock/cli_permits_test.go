package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// holdPermit is a command that writes $REDLOCK_PERMIT (or "unset") into
// started, created whole at once, then waits for stop (for 40 s at most:
// exit 9), then creates done, and exits 0. With after set, it first exits
// 3 unless after exists: it ran only once after's command had ended.
func holdPermit(started, stop, done, after string) []string {
	return []string{"sh", "-c", `if [ -n "$3" ] && [ ! -f "$3" ]; then exit 3; fi
printf %s "${REDLOCK_PERMIT-unset}" > "$0.tmp" && mv "$0.tmp" "$0"
i=0; while [ ! -f "$1" ]; do i=$((i+1)); [ $i -le 800 ] || exit 9; sleep 0.05; done; touch "$2"`, started, stop, done, after}
}

// permitArgs is run with --permits n on key, waiting wait, for argv.
func permitArgs(nodes, key string, n int, wait string, argv ...string) []string {
	return append([]string{"run", "--nodes", nodes, "--key", key, "--permits", strconv.Itoa(n), "--wait", wait, "--"}, argv...)
}

// waitSubscribers waits until key's release channel on admin has at least
// n subscribers: n runs wait for the key. One of procs exiting first fails
// the test at once.
func waitSubscribers(t *testing.T, admin *redis.Client, key string, n int64, procs ...*running) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		subs, err := admin.PubSubNumSub(t.Context(), releaseChannel(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if subs[releaseChannel(key)] >= n {
			return
		}
		for _, p := range procs {
			select {
			case <-p.exited:
				t.Fatalf("redlock %v did not wait for the key: exit status %d; stderr:\n%s", p.args, p.res.code, p.res.stderr)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs wait for %q after 30s", subs[releaseChannel(key)], n, key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunPermitsTogether: two runs with --permits 2 hold the key at once,
// each renewed past its TTL, each command with its own slot in
// $REDLOCK_PERMIT; a third with --wait 0 is refused as for a busy lock
// (75), and status shows the two permits meanwhile. Once both end, the
// permits are free again.
func TestRunPermitsTogether(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const key = "gpu"
	start := func(name string) *running {
		args := append([]string{"run", "--nodes", nodes, "--key", key, "--permits", "2", "--ttl", "3s", "--wait", "10s", "--"},
			holdPermit(p(name), p("stop"), p(name+"-done"), "")...)
		return startRedlock(t, args...)
	}
	a := start("a")
	waitStarted(t, p("a"), a)
	b := start("b")
	waitStarted(t, p("b"), a, b)
	// Both commands run now: neither ends before the stop file.
	slots := []string{readFile(t, p("a")), readFile(t, p("b"))}
	slices.Sort(slots)
	if !slices.Equal(slots, []string{"0", "1"}) {
		t.Errorf("the commands got REDLOCK_PERMIT %q, want one each of 0 and 1", slots)
	}

	busy := redlockRun(t, permitArgs(nodes, key, 2, "0", "touch", p("third"))...)
	wantExit(t, busy, exitTempFail)
	if !strings.Contains(busy.stderr, `"gpu" (a permit of 2) not acquired in one try`) {
		t.Errorf("the third run's refusal does not say what it wanted: %q", busy.stderr)
	}

	time.Sleep(3200 * time.Millisecond) // past the TTL: only renewal keeps the permits
	st := statusJSON(t, nodes, key)
	if st.Verdict != verdictPermits || st.Permits != 2 || st.Count != 2 || len(st.PermitHolders) != 2 || st.Holder != "" {
		t.Errorf("status while two runs hold permits: %+v", st)
	}
	for i, h := range st.PermitHolders {
		if h.Slot != i || h.HeldOn < st.Quorum || h.TTLMillis <= 0 || h.TTLMillis > 3000 || len(h.Holder) != holderChars {
			t.Errorf("permit holder %+v", h)
		}
	}

	touch(t, p("stop"))
	wantExit(t, a.wait(t), 0)
	wantExit(t, b.wait(t), 0)
	// Both released: the key is free on every node (a release returns at
	// a quorum; the last node's delete may come a little later).
	for deadline := time.Now().Add(30 * time.Second); ; {
		st := statusJSON(t, nodes, key)
		if st.Verdict == verdictFree {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status 30s after both runs ended: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantExit(t, redlockRun(t, permitArgs(nodes, key, 2, "0", "true")...), 0)
}

// TestRunPermitsWaiting: while two runs hold both of a key's 2 permits, a
// third that may wait does, and starts once one of the two has ended, in
// the slot it left, while the other still runs.
func TestRunPermitsWaiting(t *testing.T) {
	servers, nodes := startServers(t, 3)
	admin := servers[0].Client()
	t.Cleanup(func() { _ = admin.Close() })
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const key = "pool"
	start := func(name, wait, after string) *running {
		return startRedlock(t, permitArgs(nodes, key, 2, wait, holdPermit(p(name), p(name+"-stop"), p(name+"-done"), after)...)...)
	}
	a := start("a", "10s", "")
	waitStarted(t, p("a"), a)
	b := start("b", "10s", "")
	waitStarted(t, p("b"), a, b)

	// c's command exits 3 unless a's has ended.
	c := start("c", "60s", p("a-done"))
	waitSubscribers(t, admin, key, 1, c)
	if _, err := os.Stat(p("c")); err == nil {
		t.Fatal("the third run's command started while both permits were held")
	}

	touch(t, p("a-stop"))
	wantExit(t, a.wait(t), 0)
	waitStarted(t, p("c"), b, c)
	if got, want := readFile(t, p("c")), readFile(t, p("a")); got != want {
		t.Errorf("the third run got slot %q, want %q, the one the first left", got, want)
	}
	// b still runs: c holds its permit alongside b's.
	select {
	case <-b.exited:
		t.Fatalf("the second run ended early: status %d; stderr:\n%s", b.res.code, b.res.stderr)
	default:
	}
	touch(t, p("b-stop"))
	touch(t, p("c-stop"))
	wantExit(t, b.wait(t), 0)
	wantExit(t, c.wait(t), 0)
}

// TestRunPermitsUsage: --permits outside 1..1000, with several keys, with
// --shared or with --fencing is refused with exit 64 before any node is
// dialled (the node here listens nowhere: 69 otherwise); run -h tells of
// the flag and of $REDLOCK_PERMIT.
func TestRunPermitsUsage(t *testing.T) {
	const ok = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero", []string{"--permits", "0", "--key", "a"}, "--permits 0: the number of permits must be 1 to 1000"},
		{"negative", []string{"--permits", "-2", "--key", "a"}, "--permits -2: the number of permits must be 1 to 1000"},
		{"above max", []string{"--permits", "1001", "--key", "a"}, "--permits 1001: the number of permits must be 1 to 1000"},
		{"not a number", []string{"--permits", "three", "--key", "a"}, `invalid value "three" for flag -permits`},
		{"two keys", []string{"--permits", "2", "--key", "a", "--key", "b"}, `--permits with 2 keys ("a", "b"): a permit holds one key`},
		{"shared", []string{"--permits", "2", "--key", "a", "--shared"}, "--permits with --shared"},
		{"fencing", []string{"--permits", "2", "--key", "a", "--fencing"}, "--permits with --fencing: a permit has no fencing token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--nodes", ok}, tc.args...), "--", "true")
			r := redlockRun(t, args...)
			wantExit(t, r, exitUsage)
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, tc.want)
			}
		})
	}
	// The bounds themselves, and the same key twice, are accepted: the node
	// is tried, once.
	for _, args := range [][]string{
		{"--permits", "1", "--key", "a"},
		{"--permits", "1000", "--key", "a"},
		{"--permits", "2", "--key", "a", "--key", "a"},
	} {
		all := append(append([]string{"run", "--nodes", ok, "--wait", "0"}, args...), "--", "true")
		if r := redlockRun(t, all...); r.code != exitUnavailable {
			t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, r.code, exitUnavailable, r.stderr)
		}
	}

	help := redlockRun(t, "run", "-h")
	wantExit(t, help, 0)
	for _, want := range []string{"-permits n", "--permits n takes one of the key's n permits", "REDLOCK_PERMIT"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("run -h does not say %q:\n%s", want, help.stdout)
		}
	}
}

// TestRunPermitsMismatch: a run whose key is held by another kind of lock
// (permits of another count, an exclusive or a shared lock, and permits on
// a key held exclusively) exits 64 at once, though it may wait 60 s, and
// takes nothing: the holder's command still runs, and status still shows
// one permit.
func TestRunPermitsMismatch(t *testing.T) {
	_, nodes := startServers(t, 3)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	const wait = "60s"
	refused := func(t *testing.T, args ...string) {
		t.Helper()
		r := redlockRun(t, args...)
		wantExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, "refused without waiting: the key is held by another kind of lock") {
			t.Errorf("stderr %q does not say why", r.stderr)
		}
		// A run that waited would take the whole 60 s.
		if r.took > 20*time.Second {
			t.Errorf("the refusal took %v: it waited", r.took)
		}
	}

	holder := startRedlock(t, permitArgs(nodes, "k", 2, "10s", holdPermit(p("h"), p("h-stop"), p("h-done"), "")...)...)
	waitStarted(t, p("h"), holder)
	t.Run("another count", func(t *testing.T) { refused(t, permitArgs(nodes, "k", 3, wait, "true")...) })
	t.Run("exclusive", func(t *testing.T) {
		refused(t, "run", "--nodes", nodes, "--key", "k", "--wait", wait, "--", "true")
	})
	t.Run("shared", func(t *testing.T) {
		refused(t, "run", "--nodes", nodes, "--key", "k", "--shared", "--wait", wait, "--", "true")
	})
	if st := statusJSON(t, nodes, "k"); st.Verdict != verdictPermits || st.Permits != 1 || st.Count != 2 {
		t.Errorf("status after the refusals: %+v", st)
	}
	select {
	case <-holder.exited:
		t.Fatalf("the permit's run ended early: status %d; stderr:\n%s", holder.res.code, holder.res.stderr)
	default:
	}
	touch(t, p("h-stop"))
	wantExit(t, holder.wait(t), 0)

	writer := startRedlock(t, "run", "--nodes", nodes, "--key", "w", "--wait", "10s", "--", "sh", "-c",
		`touch "$0"; i=0; while [ ! -f "$1" ]; do i=$((i+1)); [ $i -le 800 ] || exit 9; sleep 0.05; done`, p("w"), p("w-stop"))
	waitStarted(t, p("w"), writer)
	t.Run("permits on an exclusive key", func(t *testing.T) { refused(t, permitArgs(nodes, "w", 2, wait, "true")...) })
	touch(t, p("w-stop"))
	wantExit(t, writer.wait(t), 0)
}

// TestStatusPermits: status shows a key taken by the library's permits:
// the count, per node each permit's slot, token prefix and time left, and
// the quorum's permits by slot, in JSON and text; never a whole token.
func TestStatusPermits(t *testing.T) {
	servers, nodes := startServers(t, 3)
	locks := libraryClient(t, servers)
	ctx := t.Context()
	const key = "workers"
	held := map[int]*redlock.Lock{} // by slot
	for range 2 {
		l, err := locks.Acquire(ctx, key, time.Minute, redlock.Permits(3))
		if err != nil {
			t.Fatal(err)
		}
		slot, ok := l.Permit()
		if !ok || held[slot] != nil {
			t.Fatalf("Permit() = %d, %v; held %v", slot, ok, held)
		}
		held[slot] = l
	}
	prefix := func(slot int) string { return held[slot].Token()[:holderChars] }

	r := redlockRun(t, "status", "--nodes", nodes, "--key", key, "--json")
	wantExit(t, r, 0)
	for _, l := range held {
		if strings.Contains(r.stdout, l.Token()) {
			t.Fatalf("status shows a whole token:\n%s", r.stdout)
		}
	}
	st := statusJSON(t, nodes, key)
	if st.Verdict != verdictPermits || st.Permits != 2 || st.Count != 3 || len(st.PermitHolders) != 2 || st.Holder != "" {
		t.Fatalf("status %+v, want 2 of 3 permits", st)
	}
	for _, h := range st.PermitHolders {
		if held[h.Slot] == nil || h.Holder != prefix(h.Slot) || h.HeldOn < 2 || h.TTLMillis <= 50_000 || h.TTLMillis > 60_000 {
			t.Errorf("permit holder %+v", h)
		}
	}
	for i, n := range st.Nodes {
		if !n.Held {
			continue // a node the acquires did not wait for
		}
		if n.Holder != "" || n.Count != 3 || len(n.Permits) == 0 || n.TTLMillis == nil || *n.TTLMillis <= 50_000 {
			t.Errorf("node %d: %+v", i, n)
		}
		// A node whose reply came after an acquire stopped waiting may
		// hold that Lock in another slot than the quorum's until its TTL
		// (the Lock drops the strays of the replies its round heard, in
		// the background): on a loaded machine node 0 held the two in
		// each other's slots. Each entry is one of the two Locks', and the
		// quorum's slots are checked above.
		for _, h := range n.Permits {
			ours := slices.ContainsFunc(slices.Collect(maps.Keys(held)), func(slot int) bool { return h.Holder == prefix(slot) })
			if !ours || h.TTLMillis <= 50_000 || h.TTLMillis > 60_000 {
				t.Errorf("node %d: permit %+v", i, h)
			}
		}
	}
	text := redlockRun(t, "status", "--nodes", nodes, "--key", key)
	wantExit(t, text, 0)
	want := []string{"permits", "2 of 3", "verdict: permits held by a quorum (2 of 3)"}
	for slot := range held {
		want = append(want, "slot "+strconv.Itoa(slot)+" of 3 held by "+prefix(slot)+"… for ")
	}
	for _, w := range want {
		if !strings.Contains(text.stdout, w) {
			t.Errorf("status does not show %q:\n%s", w, text.stdout)
		}
	}

	var gone int
	for slot := range held {
		gone = slot
		break
	}
	if err := held[gone].Release(ctx); err != nil {
		t.Fatal(err)
	}
	delete(held, gone)
	st = statusJSON(t, nodes, key)
	if st.Verdict != verdictPermits || st.Permits != 1 || st.Count != 3 || len(st.PermitHolders) != 1 || held[st.PermitHolders[0].Slot] == nil {
		t.Errorf("one permit left: %+v", st)
	}
	text = redlockRun(t, "status", "--nodes", nodes, "--key", key)
	if !strings.Contains(text.stdout, "verdict: permits held by a quorum (1 of 3)") {
		t.Errorf("one permit left:\n%s", text.stdout)
	}
}
