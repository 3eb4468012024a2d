// Command redlock works with Redlock locks over independent Redis masters.
//
//	redlock run --nodes NODE,... --key K [--key K2 ...] [--ttl 30s] [--wait D | -w SECONDS | -n] [--conflict-exit-code 75 | -E 75] [-q] [--fencing | --shared | --permits n] [--grace ttl/3] [--restart-guard 0] [--verbose] {-- command [args...] | -c 'command'}
//	redlock elect --nodes NODE,... --key K [--ttl 15s] [--metadata TEXT] [--grace ttl/3] [--restart-guard 0] [--verbose] {-- command [args...] | -c 'command'}
//	redlock status --nodes NODE,... --key K [--json]
//	redlock check --nodes NODE,... [--strict] [--json]
//	redlock demo [--nodes NODE,...] [--miniredis] [--workers n] [--rounds n]
//	redlock --version
//
// run holds the lock on K (on every key given, all or none, when --key is
// repeated; one of K's n permits with --permits n) while a command runs: it
// waits for it (up to --wait; --wait 0 tries once), renews it while the
// command runs, and stops the
// command's whole process group before the lock's validity ends if the lock
// is lost, or, through a guardian process, at once if redlock itself is
// killed. elect campaigns for K's leadership (the library's Election) and
// runs the command only while it leads: stopped, as run's, before the
// leadership can end, and run again under a higher term (REDLOCK_TERM) when
// it leads again. status shows
// what each node holds for K, and check what in the nodes' configuration
// puts the lock at risk. Nodes are host:port, or redis:// or rediss:// URLs
// (user, password, database, TLS), from --nodes or REDLOCK_NODES.
//
// demo shows the lock at work on five local nodes it starts itself, with no
// setup: workers contend for one key under fencing while one node is stalled
// and another killed.
//
// Exit statuses (from sysexits.h): 64 a usage error or a bad node URL (or,
// for run, a key held by another kind of lock than the one asked for), 69 a
// quorum of nodes unreachable, 70 run's command stopped because the lock was
// lost, 75 run's lock not acquired within --wait (--conflict-exit-code or -E
// sets it, and then, as -q does, silences the conflict), 1 check found a
// node a lock cannot use, or with --strict a warning. run otherwise exits with its
// command's status, and so does elect, which never exits 69, 70 or 75: it
// campaigns through outages, and again after a lost leadership. status
// exits with its verdict: 0 held, 3 free, 4 split, 69 unknown. Each
// command's -h lists its own.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// Exit statuses, as sysexits.h names them.
const (
	exitUsage       = 64 // EX_USAGE: bad flags, arguments or node URLs
	exitUnavailable = 69 // EX_UNAVAILABLE: a quorum of nodes unreachable
	exitSoftware    = 70 // EX_SOFTWARE: run lost the lock and stopped its command
	exitTempFail    = 75 // EX_TEMPFAIL: run did not get the lock within --wait
)

// commands are the subcommands, in the order usage lists them.
var commands = []struct {
	name, summary string
	run           func(args []string) error
}{
	{"run", "run a command while holding a lock, renewed until it exits", runCmd},
	{"elect", "run a command only while this process leads, as a leader election", electCmd},
	{"status", "show what each node holds for a key, and whether a quorum agrees", statusCmd},
	{"check", "check the nodes' settings that the lock's safety depends on", checkCmd},
	{"demo", "contend for one key on five local nodes while one stalls and one dies", demo},
}

// exitError ends the command with code; a nil err prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit returns an error that ends the command with code.
func exit(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...)}
}

func main() {
	// go-redis logs every failed dial; the commands report what matters
	// themselves, in one line.
	redis.SetLogger(quiet{})
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(exitUsage)
	}
	name := os.Args[1]
	switch name { // redlock run's own processes, not in the usage
	case gateCmd:
		os.Exit(gateMain(os.Args[2:]))
	case guardianCmd:
		os.Exit(guardianMain(os.Args[2:]))
	}
	for _, c := range commands {
		if c.name == name {
			os.Exit(report("redlock "+name, c.run(os.Args[2:])))
		}
	}
	switch name {
	case "help", "-h", "-help", "--help":
		usage(os.Stdout)
		return
	case "-version", "--version":
		fmt.Println(version())
		return
	}
	names := []string{"help", "--help", "--version"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	hint := ""
	if c := closest(name, names); c != "" {
		hint = fmt.Sprintf("; did you mean %q?", c)
	}
	fmt.Fprintf(os.Stderr, "redlock: unknown command %q%s ('redlock help' lists the commands)\n", name, hint)
	os.Exit(exitUsage)
}

// version is the module version the binary was built from: a tag for
// go install ...@v1.2.3, or a pseudo-version from the checkout's commit;
// redlock.Version, the release the source is of, when the build knew
// neither (go run, go build outside a repository).
func version() string {
	v := redlock.Version
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("redlock %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// report prints err as one line on stderr and returns the exit status.
func report(prefix string, err error) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", prefix, oneLine(err.Error()))
	return code
}

// oneLine joins a multi-line message (errors.Join) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ; ")), " ")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: redlock <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n'redlock <command> -h' lists a command's flags; 'redlock --version' prints the version.")
}
