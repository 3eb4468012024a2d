package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flock(1)'s habits (docs/cli.md): its short forms, a quiet conflict, the
// holder in a conflict's message, status's exit statuses, and every
// command's exit statuses in its -h.

// TestRunFlockShortForms: -n is --wait 0, -w SECONDS is --wait, -E CODE is
// --conflict-exit-code and -s is --shared, each against a key another run
// holds; giving a short form with its long one is a usage error.
func TestRunFlockShortForms(t *testing.T) {
	_, nodes := startServers(t, 3)
	_, release := holdKey(t, nodes, "f")
	run := func(args ...string) result {
		t.Helper()
		return redlockRun(t, append(append([]string{"run", "--nodes", nodes, "--key", "f"}, args...), "--", "true")...)
	}

	r := run("-n")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, `"f" not acquired in one try (--wait 0)`) {
		t.Errorf("-n: stderr %q", r.stderr)
	}
	r = run("-w", "0.5")
	wantExit(t, r, exitTempFail)
	if r.took < 500*time.Millisecond || !strings.Contains(r.stderr, "not acquired within --wait 500ms") {
		t.Errorf("-w 0.5 gave up after %v: %q", r.took, r.stderr)
	}
	r = run("-n", "-E", "3")
	if r.code != 3 {
		t.Errorf("-n -E 3: status %d, stderr %q", r.code, r.stderr)
	}
	r = run("-s", "-n")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, `"f" (shared) not acquired in one try`) {
		t.Errorf("-s -n: stderr %q", r.stderr)
	}
	for _, bad := range [][]string{{"-n", "-w", "1"}, {"-n", "--wait", "1"}, {"-E", "3", "--conflict-exit-code", "4"}, {"-E", "256"}, {"-n=x"}} {
		r := run(bad...)
		wantExit(t, r, exitUsage)
		if r.stderr == "" {
			t.Errorf("%v: a usage error without a word", bad)
		}
	}
	release()
	// Free: -n takes it at once.
	wantExit(t, run("-n"), 0)
}

// TestRunQuietConflict: a conflict exit status chosen (-E or
// --conflict-exit-code), or -q, makes the conflict silent on stderr, as
// flock's is, for a cron job that skips quietly; --verbose says it anyway.
// Other errors are still said under -q.
func TestRunQuietConflict(t *testing.T) {
	servers, nodes := startServers(t, 3)
	_, release := holdKey(t, nodes, "q")
	for _, tc := range []struct {
		flags []string
		code  int
	}{
		{[]string{"-n", "-E", "0"}, 0},
		{[]string{"--wait", "0", "--conflict-exit-code", "0"}, 0},
		{[]string{"-w", "0.2", "-E", "3"}, 3},
		{[]string{"-n", "-q"}, exitTempFail},
		{[]string{"-n", "--quiet"}, exitTempFail},
	} {
		args := append(append([]string{"run", "--nodes", nodes, "--key", "q"}, tc.flags...), "--", "touch", filepath.Join(t.TempDir(), "ran"))
		r := redlockRun(t, args...)
		if r.code != tc.code || r.stderr != "" || r.stdout != "" {
			t.Errorf("%v: status %d (want %d), stdout %q, stderr %q (want none)", tc.flags, r.code, tc.code, r.stdout, r.stderr)
		}
	}
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "q", "-n", "-E", "3", "--verbose", "--", "true")
	if r.code != 3 || !strings.Contains(r.stderr, `redlock run: "q" not acquired in one try (--wait 0): held by `) {
		t.Errorf("-n -E 3 --verbose: status %d, stderr %q", r.code, r.stderr)
	}
	release()
	// -q silences the conflict only: a quorum down is still said.
	for _, s := range servers[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r = redlockRun(t, "run", "--nodes", nodes, "--key", "q", "-n", "-q", "--", "true")
	wantExit(t, r, exitUnavailable)
	if r.stderr == "" {
		t.Error("-q with a quorum down: exit 69 without a word")
	}
}

// leftRE finds the time a conflict's holder has left.
var leftRE = regexp.MustCompile(`, ([0-9.]+m?s) left: `)

// TestConflictNamesHolder: a lock not acquired says who holds the key: the
// start of its token, the metadata it stored, and the time it has left on a
// quorum, within its TTL; for a key held shared, each shared lock; for
// permits, each slot; for several keys, the key held.
func TestConflictNamesHolder(t *testing.T) {
	_, nodes := startServers(t, 3)
	_, release := holdKey(t, nodes, "h", "--wait", "10s", "--ttl", "20s", "--metadata", "host web-3 pid 42")
	st := statusJSON(t, nodes, "h")
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "h", "-n", "--", "true")
	wantExit(t, r, exitTempFail)
	want := fmt.Sprintf(`"h" not acquired in one try (--wait 0): held by %s… (metadata "host web-3 pid 42"), `, st.Holder)
	if !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr %q does not say %q", r.stderr, want)
	}
	m := leftRE.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("stderr %q does not say the time left", r.stderr)
	}
	if left, err := time.ParseDuration(m[1]); err != nil || left <= 0 || left > 20*time.Second {
		t.Errorf("time left %q (%v), want within the holder's TTL of 20s", m[1], err)
	}
	// Several keys: the one held is named.
	r = redlockRun(t, "run", "--nodes", nodes, "--key", "a", "--key", "h", "-n", "--", "true")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, fmt.Sprintf(`: "h" held by %s… (metadata "host web-3 pid 42"), `, st.Holder)) {
		t.Errorf("several keys: stderr %q does not name the key held and its holder", r.stderr)
	}
	release()

	_, releaseShared := holdKey(t, nodes, "sh", "--wait", "10s", "--shared", "--metadata", "reader 1")
	r = redlockRun(t, "run", "--nodes", nodes, "--key", "sh", "-n", "--", "true")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, `held shared by 1 lock: `) || !strings.Contains(r.stderr, `(metadata "reader 1")`) {
		t.Errorf("a key held shared: stderr %q", r.stderr)
	}
	releaseShared()

	_, releasePermit := holdKey(t, nodes, "p", "--wait", "10s", "--permits", "1", "--metadata", "worker 7")
	r = redlockRun(t, "run", "--nodes", nodes, "--key", "p", "--permits", "1", "-n", "--", "true")
	wantExit(t, r, exitTempFail)
	if !strings.Contains(r.stderr, `1 of 1 permits held: slot 0 by `) || !strings.Contains(r.stderr, `(metadata "worker 7")`) {
		t.Errorf("permits all taken: stderr %q", r.stderr)
	}
	releasePermit()
}

// TestRunShellCommand: -c runs its one string through /bin/sh -c, as flock
// -c does, for run and elect; -c with a command after it, or an empty one,
// is a usage error.
func TestRunShellCommand(t *testing.T) {
	_, nodes := startServers(t, 3)
	out := filepath.Join(t.TempDir(), "out")
	r := redlockRun(t, "run", "--nodes", nodes, "--key", "c", "--wait", "10s", "--fencing",
		"-c", `echo "$0 $REDLOCK_KEY $REDLOCK_FENCE" > `+out+`; exit 7`)
	wantExit(t, r, 7)
	if got := readFile(t, out); !regexp.MustCompile(`^/bin/sh c [1-9][0-9]*\n$`).MatchString(got) {
		t.Errorf("the command saw %q, want /bin/sh, the key and a fence", got)
	}
	r = redlockRun(t, "elect", "--nodes", nodes, "--key", "e", "-c", `echo "term $REDLOCK_TERM" > `+out+`; exit 4`)
	wantExit(t, r, 4)
	if got := readFile(t, out); !regexp.MustCompile(`^term [1-9][0-9]*\n$`).MatchString(got) {
		t.Errorf("elect -c: the command saw %q", got)
	}
	for _, args := range [][]string{
		{"run", "--nodes", nodes, "--key", "c", "-c", "true", "--", "true"},
		{"run", "--nodes", nodes, "--key", "c", "-c", " "},
		{"elect", "--nodes", nodes, "--key", "e", "-c", "true", "extra"},
	} {
		r := redlockRun(t, args...)
		wantExit(t, r, exitUsage)
		if !strings.Contains(r.stderr, "-c ") {
			t.Errorf("%v: stderr %q", args, r.stderr)
		}
	}
}

// TestStatusExitCodes: status exits with its verdict, so that a script need
// not parse --json: 0 held, 3 free, 4 split, 69 unknown, with or without
// --json.
func TestStatusExitCodes(t *testing.T) {
	servers, nodes := startServers(t, 3)
	status := func(code int) {
		t.Helper()
		for _, json := range []bool{false, true} {
			args := []string{"status", "--nodes", nodes, "--key", "x"}
			if json {
				args = append(args, "--json")
			}
			r := redlockRun(t, args...)
			if r.code != code {
				t.Fatalf("%v: status %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, code, r.stdout, r.stderr)
			}
			if code != exitUnavailable && r.stderr != "" {
				t.Errorf("%v: stderr %q, want none (the verdict is on stdout)", args, r.stderr)
			}
		}
	}
	status(exitFree)
	_, release := holdKey(t, nodes, "x")
	status(0)
	release()
	status(exitFree)
	// One node holds a value: some nodes hold it, no quorum.
	if err := servers[0].Client().Set(t.Context(), "x", "stray.1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	status(exitSplit)
	for _, s := range servers[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	status(exitUnavailable)
}

// TestHelpSaysExitStatuses: every command's -h lists its exit statuses.
func TestHelpSaysExitStatuses(t *testing.T) {
	for _, c := range commands {
		r := redlockRun(t, c.name, "-h")
		wantExit(t, r, 0)
		if !strings.Contains(r.stdout, "\nExit statuses") || exitHelp["redlock "+c.name] == "" {
			t.Errorf("redlock %s -h lists no exit statuses:\n%s", c.name, r.stdout)
		}
	}
	r := redlockRun(t, "status", "-h")
	for _, want := range []string{"  0 ", "  3 ", "  4 ", "  69 "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status -h does not list %q:\n%s", want, r.stdout)
		}
	}
	r = redlockRun(t, "run", "-h")
	for _, want := range []string{"-w seconds", "-n\t", "-E int", "-q\t", "-s\t", "-c command", "/bin/sh -c"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run -h does not say %q:\n%s", want, r.stdout)
		}
	}
}
