package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/script"
)

// forwarded are the signals run passes on to its command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// releaseTimeout bounds a release: it returns once a quorum confirmed, or
// at this deadline (the library waits for slow nodes' confirmations until
// the caller's deadline), and a node that does not answer is left to expire
// the key by its TTL.
const releaseTimeout = 300 * time.Millisecond

// closeTimeout bounds the wait on exit for the deletes still under way: a
// release's on the nodes it did not wait for, a failed acquire's rollback.
// Enough for a node that answers; a delete that a node did not answer is
// given up on, the key expires there by its TTL.
const closeTimeout = 50 * time.Millisecond

// restartGuardEnv is read when --restart-guard is not given.
const restartGuardEnv = "REDLOCK_RESTART_GUARD"

// guardVar registers --restart-guard, run's and elect's.
func guardVar(fs *flag.FlagSet) *durationFlag {
	return durationVar(fs, "restart-guard", 0, "count a node that restarted or lost its data only this `duration` after it is back, at least the longest TTL in use (default $"+restartGuardEnv+", 0: off)")
}

// defaultGraceAndGuard fills in what was not given: --grace, a third of
// --ttl, and --restart-guard, $REDLOCK_RESTART_GUARD's if set.
func defaultGraceAndGuard(ttl, grace, guard *durationFlag) error {
	if !grace.set {
		grace.d = ttl.d / 3
	}
	if !guard.set && os.Getenv(restartGuardEnv) != "" {
		d, err := parseDuration(os.Getenv(restartGuardEnv))
		if err != nil {
			return exit(exitUsage, "bad $%s: %v", restartGuardEnv, err)
		}
		guard.d = d
	}
	return nil
}

// quorumGrace is how long run waits for the other nodes' first answer once
// a quorum has answered: a node that answers later counts from then on,
// and one that is down costs the run no more than this.
const quorumGrace = 100 * time.Millisecond

const runHelp = `The command runs in a process group of its own, and run signals the whole
group. SIGINT, SIGTERM and SIGHUP sent to redlock are forwarded to it once;
redlock then waits for the command, releases the lock and exits with the
command's status. In a terminal the group is the terminal's foreground, so
Ctrl-C reaches the command once, from the terminal.

When the lock can no longer be proven held (a quorum of nodes lost or
unreachable), the group gets SIGTERM and, --grace later, SIGKILL; SIGTERM
comes early enough that the grace ends before the lock's validity does, and
SIGKILL comes before that end whatever --grace says. Processes the command
leaves in its group when it exits are stopped the same way before the lock
is released. The SIGKILL comes from a thread that sleeps until it is due;
on Linux, where redlock may (root, CAP_SYS_NICE, RLIMIT_RTPRIO), that thread
runs at real-time priority, so that a machine whose CPUs are all busy does
not delay it past the lock's end; otherwise it can be late there.

SIGKILL cannot stop a process in uninterruptible sleep (state D, such as a
write to a hung network mount), and a process that left the group (setsid,
a daemon) is not signalled at all: such a process can still write after
the lock has passed to someone else. Fencing is what protects the resource
from that late write: with --fencing the command gets $REDLOCK_FENCE, and
the resource must refuse a write whose fence is lower than one it has seen.

If redlock itself is killed (kill -9, the OOM killer, timeout -s KILL), its
guardian sends SIGKILL to the command's whole group at once. The guardian is
a small "redlock _guardian" process, in a process group of its own, that
watches a pipe whose write end only redlock holds: the kernel closes it when
redlock's process ends, however it ends. The command runs only once its
guardian watches. On Linux the kernel also kills the command's first
process when redlock dies (a parent-death signal). Not covered: a guardian
killed along with redlock (pkill -9 -f redlock; on Linux the first process
still dies), and a redlock stopped rather than killed (SIGSTOP, a
debugger): nothing renews then, and nothing stops the command. Outside
Linux the guardian works the same way, without the parent-death signal,
but is untested there.

--ttl is at least 200ms: run's per-node deadline (ttl/20) and its kill
margin (ttl/10) need 10ms each, and below 200ms those floors take an ever
larger share of the lock (at 10ms the command would be killed as it starts).

Environment: REDLOCK_NODES for --nodes, REDLOCK_RESTART_GUARD for
--restart-guard. The command gets REDLOCK_KEY, REDLOCK_FENCE with --fencing,
and REDLOCK_PERMIT with --permits.

--key given several times holds all its keys as one lock (the library's
AcquireAll): taken all at once or not at all, renewed together, lost
together, released together; a key given twice is held once. The command
then gets REDLOCK_KEYS, the keys sorted, one per line, instead of
REDLOCK_KEY. Two runs that name the same keys in other orders contend for
the same lock and cannot deadlock.

--shared takes the key shared, as a read lock (the library's Shared): any
number of shared runs hold the key at once, each renewed, lost and released
on its own as an exclusive run's lock is, and none holds it while an
exclusive run does. Once an exclusive run waits for the key, new shared runs
wait behind it, so that a stream of readers cannot starve it. --shared takes
one --key, and no --fencing: a shared lock has no fencing token.

--permits n takes one of the key's n permits, a counting semaphore (the
library's Permits): at most n runs with --permits n hold the key at once,
each renewed, lost and released on its own as an exclusive run's lock is.
The command gets its slot, 0 to n-1, as REDLOCK_PERMIT: two commands that
run at once have different slots. n is 1 to 1000; --permits takes one
--key, and neither --shared nor --fencing. A run whose key is held by
another kind of lock (permits of another count, or an exclusive or shared
lock, and the other way round) is refused at once, whatever --wait says,
with exit 64: the runs that share a key must agree on how they take it.

--wait: without it, run waits for the lock as long as it takes, as flock(1)
and consul lock do; --wait D gives up after D (a duration such as 1m30s, or
seconds such as 10 or 0.5, as flock -w takes them), and --wait 0 tries once.
Nodes down are waited for too: while fewer than a quorum answer, run keeps
trying until --wait ends (for 5s without --wait, and not at all with
--wait 0), then exits 69.

flock(1)'s short forms mean here what they mean there: -w SECONDS is
--wait, -n is --wait 0, -E CODE is --conflict-exit-code, -s is --shared,
and -c 'command' runs the command through /bin/sh -c (not $SHELL: the same
line reads the same on every machine). A lock not acquired says on stderr
who holds it (the start of its token, its --metadata, the time it has left
on a quorum), unless -q is given, or a conflict exit status is chosen
(-E, --conflict-exit-code): a script that chose one tests for it, and, as
with flock, nothing is printed; --verbose prints it anyway.
`

func runCmd(args []string) error {
	fs := flag.NewFlagSet("redlock run", flag.ContinueOnError)
	var nf nodeFlag
	nf.register(fs)
	var kf keysFlag
	fs.Var(&kf, "key", "the lock's `key` (required); give it several times to hold several keys at once, all or none")
	ttl := durationVar(fs, "ttl", 30*time.Second, "the lock's time to live (a `duration`, at least "+minTTL.String()+"); it is renewed while the command runs")
	wait := durationVar(fs, "wait", 0, "how long to wait for the lock, a `duration` or seconds (default: until it is acquired; 0: one try)")
	fs.Var(wait, "w", "--wait, as flock -w takes it: `seconds` (or a duration)")
	fs.Var(&nonblockFlag{wait: wait}, "n", "--wait 0: one try, as flock -n")
	conflict := fs.Int("conflict-exit-code", exitTempFail, "the exit status when the lock is not acquired within --wait, 0 to 255; given, the conflict says nothing on stderr, as flock's")
	fs.IntVar(conflict, "E", exitTempFail, "--conflict-exit-code, as flock -E takes it")
	quiet := fs.Bool("quiet", false, "say nothing on stderr when the lock is not acquired within --wait (other errors are still said)")
	fs.BoolVar(quiet, "q", false, "--quiet")
	shellCmd := shellFlag(fs)
	fencing := fs.Bool("fencing", false, "take a fencing token and pass it to the command as $REDLOCK_FENCE")
	shared := fs.Bool("shared", false, "take the key shared (a read lock): any number of shared runs hold it at once, and none while an exclusive run does; one --key, no --fencing")
	fs.BoolVar(shared, "s", false, "--shared, as flock -s")
	permits := fs.Int("permits", 0, "take one of the key's `n` permits (1 to "+strconv.Itoa(redlock.MaxPermits)+"): at most n runs with --permits n hold it at once; the command gets its slot as $REDLOCK_PERMIT; one --key, no --shared or --fencing")
	grace := durationVar(fs, "grace", 0, "the `duration` between SIGTERM and SIGKILL when the lock is lost; shorter than --ttl (default: a third of --ttl)")
	guard := guardVar(fs)
	metadata := fs.String("metadata", "", "store `text` with the lock, which redlock status shows: who runs it (a host, a pid); at most "+strconv.Itoa(redlock.MaxMetadataLen)+" bytes of UTF-8, one line")
	verbose := fs.Bool("verbose", false, "log each step on stderr")
	if err := parseFlags(fs, "--key K [--key K2 ...] [--nodes NODE,...] [--ttl 30s] [--wait D | -w SECONDS | -n] [--conflict-exit-code 75 | -E 75] [-q] [--fencing | --shared | --permits n] [--metadata TEXT] [--grace ttl/3] [--restart-guard 0] [--verbose] {-- command [args...] | -c 'command'}", runHelp, args); err != nil {
		return err
	}
	if given(fs, "n") && given(fs, "w", "wait") {
		return usageError(fs, "-n with --wait: -n is --wait 0; give one of them")
	}
	if given(fs, "E") && given(fs, "conflict-exit-code") {
		return usageError(fs, "-E with --conflict-exit-code: they are one flag; give it once")
	}
	if err := defaultGraceAndGuard(ttl, grace, guard); err != nil {
		return err
	}
	permitsGiven := false // --permits 0 is an error, not the flag's absence
	fs.Visit(func(f *flag.Flag) { permitsGiven = permitsGiven || f.Name == "permits" })
	badMetadata := script.CheckMetadata(*metadata, redlock.MaxMetadataLen) // the library's own rule
	keys := kf.distinct()                                                  // a key given twice is held once
	slices.Sort(keys)                                                      // as the library orders them, and Lock.Keys
	switch {
	case len(keys) == 0 || len(keys) == 1 && keys[0] == "":
		return usageError(fs, "--key is required")
	case slices.Contains(keys, ""):
		return usageError(fs, "--key must not be empty")
	case len(keys) > redlock.MaxKeys:
		return usageError(fs, "--key given for %d distinct keys, more than the %d one lock holds", len(keys), redlock.MaxKeys)
	case *shared && len(keys) > 1:
		return usageError(fs, "--shared with %d keys (%s): a shared lock holds one key; give --key once", len(keys), quoteKeys(keys))
	case *shared && *fencing:
		return usageError(fs, "--shared with --fencing: a shared lock has no fencing token (fences order exclusive holders)")
	case permitsGiven && (*permits < 1 || *permits > redlock.MaxPermits):
		return usageError(fs, "--permits %d: the number of permits must be 1 to %d", *permits, redlock.MaxPermits)
	case permitsGiven && len(keys) > 1:
		return usageError(fs, "--permits with %d keys (%s): a permit holds one key; give --key once", len(keys), quoteKeys(keys))
	case permitsGiven && *shared:
		return usageError(fs, "--permits with --shared: a permit is already held alongside the key's other permits; give one of them")
	case permitsGiven && *fencing:
		return usageError(fs, "--permits with --fencing: a permit has no fencing token (fences order exclusive holders)")
	case ttl.d <= 0:
		return usageError(fs, "--ttl must be positive")
	case ttl.d < minTTL:
		return usageError(fs, "--ttl %v is shorter than the minimum of %v, the TTL whose tenth and twentieth (run's kill margin and per-node deadline) are the %v these need", ttl.d, minTTL, timingFloor)
	case wait.d < 0:
		return usageError(fs, "--wait must not be negative")
	case wait.d > redlock.MaxTTL:
		return usageError(fs, "--wait %v is over a year: leave --wait out to wait as long as it takes", wait.d)
	case *conflict < 0 || *conflict > 255:
		return usageError(fs, "--conflict-exit-code %d: an exit status is 0 to 255", *conflict)
	}
	if err := checkSupervised(fs, ttl.d, grace.d, guard.d, badMetadata, "the lock can pass to another holder"); err != nil {
		return err
	}
	argv, err := commandLine(fs, *shellCmd)
	if err != nil {
		return err
	}
	what := quoteKeys(keys) // "k", or "a", "b" for several keys, or "k" (shared), or "k" (a permit of 3)
	acqOpts := []redlock.AcquireOption{redlock.WithMetadata(*metadata)}
	switch {
	case *shared:
		what += " (shared)"
		acqOpts = append(acqOpts, redlock.Shared())
	case permitsGiven:
		what += fmt.Sprintf(" (a permit of %d)", *permits)
		acqOpts = append(acqOpts, redlock.Permits(*permits))
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "redlock run: %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
	nodes, err := nf.open()
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	var unconfirmed nodeMarks // nodes that did not confirm the release's delete
	var stopping atomic.Bool  // the command is over: renewals still in flight are of no interest
	attempts := new(attemptLog)
	opts := []redlock.Option{
		redlock.WithRenewInterval(renewIntervalFor(ttl.d, termLeadFor(ttl.d, grace.d))),
		redlock.WithHooks(redlock.Hooks{
			NodeError: func(n redlock.Event) {
				// An event names a lock of several keys by its first.
				if n.Key == keys[0] && (n.Op == "delete" || n.Op == "handover") {
					unconfirmed.mark(n.Node)
				}
			},
			Attempt: attempts.note,
			Renewal: func(r redlock.Event) {
				switch {
				case stopping.Load():
				case r.Err != nil:
					logf("renewal of %s failed after %v: %v", what, r.Elapsed, r.Err)
				default:
					logf("renewed %s in %v", what, r.Elapsed)
				}
			},
		}),
	}
	if *fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if guard.d > 0 {
		opts = append(opts, redlock.WithRestartGuard(guard.d))
	}
	if wait.d > 0 {
		// Nodes down are waited for as long as the lock is.
		opts = append(opts, redlock.WithUnavailableTimeout(wait.d))
	}
	// A conflict exit status chosen, as flock -E's, is one a script tests
	// for: the conflict is then no error to report, as flock's never is.
	quietConflict := *quiet || given(fs, "E", "conflict-exit-code")
	w := waitSpec{d: wait.d, forever: !wait.set, conflict: *conflict, attempts: attempts, quiet: quietConflict && !*verbose}
	locks, err := redlock.New(clients(nodes), opts...)
	if err != nil {
		return exit(exitUsage, "%v", err)
	}
	defer closeClient(locks)
	warnFewNodes("redlock run", len(nodes))

	// Signals are caught from here on: while waiting for the lock they end
	// the wait, while the command runs they go to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if err := reachQuorum("redlock run", locks, nodes, w, logf); err != nil {
		return err
	}
	logf("acquiring %s for %v on %d nodes (quorum %d), waiting %s", what, ttl.d, len(nodes), locks.Quorum(), w)
	lock, err := acquire(locks, keys, what, ttl.d, w, sigs, acqOpts...)
	if err != nil {
		return err
	}
	if slot, ok := lock.Permit(); ok {
		logf("acquired %s, slot %d, valid until %s", what, slot, lock.Until().Format(time.RFC3339Nano))
	} else {
		logf("acquired %s, valid until %s, fence %d", what, lock.Until().Format(time.RFC3339Nano), lock.Fence())
	}

	renewing, stopRenewing := context.WithCancel(context.Background())
	lost := keepAlive(renewing, lock, termLeadFor(ttl.d, grace.d))
	code, runErr := supervise("redlock run", argv, lockEnv(lock, *fencing), lock.Until, stopSpec{grace: grace.d, margin: killMarginFor(ttl.d)}, lost, sigs, logf)
	stopping.Store(true)
	stopRenewing()

	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := lock.Release(ctx); err != nil {
		logf("release: %v", err)
	} else {
		logf("released %s", what)
	}
	closeClient(locks)
	if left := unconfirmed.with(locks.Nodes()); len(left) > 0 {
		theKey := "the key"
		if len(keys) > 1 {
			theKey = "the keys"
		}
		logf("no confirmed delete from %s: left to expire %s by its TTL", strings.Join(left, ", "), theKey)
	}
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// closeClient closes locks, waiting at most closeTimeout.
func closeClient(locks *redlock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = locks.Close(ctx)
}

// nodeMarks records nodes by index, from the hooks' goroutines.
type nodeMarks struct {
	mu     sync.Mutex
	marked map[int]bool
}

func (m *nodeMarks) mark(i int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marked == nil {
		m.marked = map[int]bool{}
	}
	m.marked[i] = true
}

// with lists the nodes marked, or still busy with a call or a delete to be
// tried again, as "node i (addr)".
func (m *nodeMarks) with(status []redlock.NodeStatus) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, s := range status {
		if m.marked[s.Index] || s.InFlight > 0 || s.PendingCleanups > 0 {
			out = append(out, fmt.Sprintf("node %d (%s)", s.Index, s.Addr))
		}
	}
	return out
}

// waitSpec is how long run waits for the lock: up to d, or as long as it
// takes; conflict is the exit status when it is not acquired in time.
type waitSpec struct {
	d        time.Duration
	forever  bool
	conflict int
	// attempts, when set, is the Client's Attempt hook: the verdict of
	// an acquire whose last attempt the wait's end cut short.
	attempts *attemptLog
	// quiet: a conflict exits conflict without a word (-q, or
	// --conflict-exit-code given without --verbose); otherwise its
	// message says who holds the key (its metadata, the time it has
	// left), read from the nodes after the last attempt.
	quiet bool
}

func (w waitSpec) String() string {
	switch {
	case w.forever:
		return "as long as it takes"
	case w.d == 0:
		return "not at all (one try)"
	}
	return "up to " + w.d.String()
}

// reachQuorum meets the nodes: it warms the client (Warm) and pings every
// node, and once a quorum has answered it waits quorumGrace more for the
// others, nodeTimeout in all: a node down then costs the run quorumGrace,
// and the library no wait of its own later. A node whose host name does not
// resolve gets a warning; with fewer than a quorum answering, run exits
// exitUnavailable at once for --wait 0, and otherwise goes on to acquire,
// which keeps trying. Two nodes that are one server, a replica, and a node
// that refuses its URL's credentials are usage errors.
// name ("redlock run", "redlock elect") starts its warning.
func reachQuorum(name string, locks *redlock.Client, nodes []node, w waitSpec, logf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	warmed := make(chan error, 1)
	go func() { warmed <- locks.Warm(ctx) }()
	type answer struct {
		i   int
		err error
	}
	// Host names are looked up apart, within nodeTimeout whatever the
	// grace: a name that does not resolve is said even when DNS is slow.
	lctx, lcancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer lcancel()
	lookups, named := make(chan answer, len(nodes)), 0
	for i, n := range nodes {
		if host, _, err := net.SplitHostPort(n.addr); err == nil && net.ParseIP(host) == nil {
			named++
			go func() {
				_, err := net.DefaultResolver.LookupHost(lctx, host)
				lookups <- answer{i, err}
			}()
		}
	}
	answers := make(chan answer, len(nodes))
	for i, n := range nodes {
		go func() {
			err := n.client.Ping(ctx).Err()
			if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
				err = nil // it answered: an ACL without PING
			}
			answers <- answer{i, err}
		}()
	}
	errs := make([]error, len(nodes))
	for i := range errs {
		errs[i] = fmt.Errorf("no answer within %v of a quorum's, nor within %v", quorumGrace, nodeTimeout)
	}
	var grace <-chan time.Time
wait:
	for heard, up := 0, 0; heard < len(nodes); heard++ {
		select {
		case a := <-answers:
			if errs[a.i] = a.err; a.err == nil {
				if up++; up == locks.Quorum() {
					grace = time.After(quorumGrace)
				}
			}
		case <-grace:
			cancel() // Warm returns, and no operation waits for the nodes still silent
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	if err := <-warmed; errors.Is(err, redlock.ErrInvalidArgument) || misconfigured(err) {
		return exit(exitUsage, "%v", err)
	}
	unresolved := make([]bool, len(nodes))
	for range named {
		select {
		case a := <-lookups:
			if dns := new(net.DNSError); errors.As(a.err, &dns) {
				// Not only with --verbose: a name in the node list that
				// does not resolve is a typo or a DNS outage, and it
				// leaves the lock fewer nodes than it was given to
				// survive failures.
				fmt.Fprintf(os.Stderr, "%s: warning: node %d (%s): its host name does not resolve (%v): the lock is taken on the other nodes\n", name, a.i, nodes[a.i].addr, a.err)
				unresolved[a.i] = true
			}
		case <-lctx.Done():
		}
	}
	down := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		down++
		if !unresolved[i] {
			logf("unreachable: node %d (%s): %v", i, nodes[i].addr, err)
		}
	}
	n := len(nodes)
	switch {
	case n-down >= locks.Quorum():
		logf("a quorum of nodes is reachable")
	case w.d == 0 && !w.forever:
		return exit(exitUnavailable, "only %d of %d nodes reachable, fewer than the quorum of %d", n-down, n, locks.Quorum())
	default:
		logf("only %d of %d nodes reachable, fewer than the quorum of %d: trying again while waiting", n-down, n, locks.Quorum())
	}
	return nil
}

// acquire takes the lock on keys, all of them or none, waiting as w says,
// with opts (Shared, for one key). A signal ends the wait. what names the
// lock in errors.
func acquire(locks *redlock.Client, keys []string, what string, ttl time.Duration, w waitSpec, sigs <-chan os.Signal, opts ...redlock.AcquireOption) (*redlock.Lock, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if w.d > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, w.d)
		defer stop()
	}
	waits := w.d > 0 || w.forever
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		switch {
		case len(keys) == 1 && waits:
			r.lock, r.err = locks.Acquire(ctx, keys[0], ttl, opts...)
		case len(keys) == 1:
			r.lock, r.err = locks.TryAcquire(ctx, keys[0], ttl, opts...)
		case waits:
			r.lock, r.err = locks.AcquireAll(ctx, keys, ttl, opts...)
		default:
			r.lock, r.err = locks.TryAcquireAll(ctx, keys, ttl, opts...)
		}
		done <- r
	}()
	var r result
	var got os.Signal
	select {
	case r = <-done:
	case got = <-sigs:
		cancel(fmt.Errorf("got %v", got))
		r = <-done
	}
	switch {
	case r.err == nil && got == nil:
		return r.lock, nil
	case r.err == nil: // acquired as the signal came: give it back
		rctx, stop := context.WithTimeout(context.Background(), releaseTimeout)
		defer stop()
		_ = r.lock.Release(rctx)
		fallthrough
	case got != nil:
		return nil, exit(128+int(got.(syscall.Signal)), "%v while waiting for %s", got, what)
	}
	// The attempt that decides, when the wait's end cut the last short.
	verdict := w.attempts.verdict(r.err)
	down := unreachable(verdict, locks.Nodes(), w.d)
	switch {
	case misconfigured(r.err):
		// A node refused our credentials or rights: no wait mends it.
		return nil, exit(exitUsage, "%s: %v", what, r.err)
	case down && w.d > 0:
		return nil, exit(exitUnavailable, "%s: a quorum of nodes unreachable throughout --wait %v: %v", what, w.d, verdict)
	case down:
		return nil, exit(exitUnavailable, "%v", verdict)
	case errors.Is(r.err, redlock.ErrInvalidArgument) && errors.As(r.err, new(*redlock.QuorumError)):
		// A node refused the key as taken by another kind of lock: the
		// library gives up at once, since waiting is no cure for a caller
		// that does not take the key as its other users do.
		return nil, exit(exitUsage, "%s refused without waiting: the key is held by another kind of lock (permits of another count, or an exclusive or shared lock): %v", what, r.err)
	case errors.Is(r.err, redlock.ErrInvalidArgument):
		return nil, exit(exitUsage, "%v", r.err)
	}
	if w.quiet {
		return nil, &exitError{code: w.conflict}
	}
	held := holders(locks, keys)
	if held != "" {
		held += ": "
	}
	if !waits {
		return nil, exit(w.conflict, "%s not acquired in one try (--wait 0): %s%v", what, held, r.err)
	}
	return nil, exit(w.conflict, "%s not acquired within --wait %v: %s%v", what, w.d, held, r.err)
}

// misconfigured reports whether err matches redlock.ErrAuth or
// redlock.ErrNoPermission: a node refused the credentials of its URL, or
// its ACL the lock's commands.
func misconfigured(err error) bool {
	return errors.Is(err, redlock.ErrAuth) || errors.Is(err, redlock.ErrNoPermission)
}

// checkSupervised checks what run and elect share: --grace shorter than
// --ttl (the command must be stopped before passes, which says what the
// lock or the leadership does next), --restart-guard and --metadata
// (badMetadata, the library's verdict on it); commandLine checks the
// command to run.
func checkSupervised(fs *flag.FlagSet, ttl, grace, guard time.Duration, badMetadata, passes string) error {
	switch {
	case grace < 0:
		return usageError(fs, "--grace must not be negative")
	case grace >= ttl:
		return usageError(fs, "--grace %v must be shorter than --ttl %v: the command must be stopped before %s", grace, ttl, passes)
	case guard < 0:
		return usageError(fs, "--restart-guard must not be negative")
	case badMetadata != "":
		return usageError(fs, "--metadata: %s; it must be at most %d bytes of UTF-8 on one line, without control characters",
			badMetadata, redlock.MaxMetadataLen)
	}
	return nil
}

// unreachable reports a failed acquire in which too few nodes answered to
// make a quorum; a node within its restart guard answered, and so did one
// that refused the key as taken by another kind of lock (ErrInvalidArgument)
// or refused a shared Lock because a writer waits (ErrWriterWaiting). A
// node whose reply was not awaited (the wait ended during the attempt)
// counts as failed only when status, the Client's view of the nodes, says
// its latest calls failed with an error of their own (a refused dial, a
// reset): a reply merely late is no sign of a node down, since a loaded
// machine is slow too. Nor does a node that never answered and failed of
// nothing of its own when the wait was shorter than a first contact's
// bound (firstContact): a far node's first contact takes a few round trips,
// and a wait shorter than them hears nothing from a node that is there.
// The library's own verdict (ErrUnavailable) counts.
func unreachable(err error, status []redlock.NodeStatus, waited time.Duration) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	if errors.Is(err, redlock.ErrUnavailable) && !slices.ContainsFunc(qe.Nodes, func(n *redlock.NodeError) bool {
		return unheardYet(n, status, waited)
	}) {
		return true
	}
	failed := 0
	for _, n := range qe.Nodes {
		switch {
		case answered(n):
		case unheardYet(n, status, waited):
		case !errors.Is(n, redlock.ErrNotAwaited):
			failed++
		case n.Node >= 0 && n.Node < len(status):
			if s := status[n.Node]; s.ConsecutiveFailures > 0 && failedOfItself(s.LastError) {
				failed++
			}
		}
	}
	return qe.OK+len(qe.Nodes)-failed < qe.Quorum
}

// firstContact bounds the library's first contact with a node (its
// identify timeout): a wait shorter than that may end before a far node
// ever answers.
const firstContact = time.Second

// unheardYet reports whether node error n is the silence of a node that
// never answered (no latency learned), failed of nothing of its own, and
// was waited for less than a first contact may take.
func unheardYet(n *redlock.NodeError, status []redlock.NodeStatus, waited time.Duration) bool {
	if waited >= firstContact || !errors.Is(n, redlock.ErrNoReply) || n.Node < 0 || n.Node >= len(status) {
		return false
	}
	s := status[n.Node]
	return s.Latency == 0 && !failedOfItself(s.LastError)
}

// failedOfItself reports whether a node's latest failure is an error of its
// own, not a reply that came after its deadline (ErrNoReply alone) or a
// call its caller ended.
func failedOfItself(err error) bool {
	return err != nil && err != redlock.ErrNoReply && err != context.Canceled && err != context.DeadlineExceeded
}

// answered reports whether a node's error is its reply: a refusal.
func answered(n *redlock.NodeError) bool {
	return errors.Is(n, redlock.ErrHeldByOther) || errors.Is(n, redlock.ErrKeyAbsent) || errors.Is(n, redlock.ErrRestartGuard) ||
		errors.Is(n, redlock.ErrInvalidArgument) || errors.Is(n, redlock.ErrWriterWaiting)
}

// heard reports whether a failed attempt's err says whether a quorum could
// be asked: a node refused or failed. An attempt the wait's end cut short,
// every reply unawaited, does not; the attempt before it is the verdict.
func heard(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	for _, n := range qe.Nodes {
		if !errors.Is(n, redlock.ErrNotAwaited) {
			return true
		}
	}
	return errors.Is(err, redlock.ErrUnavailable)
}

// attemptLog keeps the latest failed attempt that heard from the nodes,
// from the Attempt hook's goroutines: when the wait ends during an attempt,
// that attempt's error says nothing, and run's exit status (a quorum
// unreachable, or the lock held) comes from the one before.
type attemptLog struct {
	mu   sync.Mutex
	last error
}

// note is the Attempt hook.
func (a *attemptLog) note(e redlock.Event) {
	if e.Err == nil || !heard(e.Err) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = e.Err
}

// verdict returns err, or, when err heard nothing, the latest attempt that
// did (nil if none did).
func (a *attemptLog) verdict(err error) error {
	if a == nil || heard(err) || !errors.As(err, new(*redlock.QuorumError)) {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil {
		return a.last
	}
	return err
}

// stopSpec is how run stops the command's group: SIGTERM, then SIGKILL
// grace later, and never later than margin before the lock's Until.
type stopSpec struct {
	grace, margin time.Duration
}

// lockEnv is what run adds to its command's environment: the key (or the
// keys), the fence with --fencing, the slot of a permit.
func lockEnv(lock *redlock.Lock, fencing bool) []string {
	var env []string
	if keys := lock.Keys(); len(keys) > 1 {
		// No one key would be right for $REDLOCK_KEY: none is set.
		env = append(env, "REDLOCK_KEYS="+strings.Join(keys, "\n"))
	} else {
		env = append(env, "REDLOCK_KEY="+lock.Key())
	}
	if fencing {
		env = append(env, "REDLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10))
	}
	if slot, ok := lock.Permit(); ok {
		env = append(env, "REDLOCK_PERMIT="+strconv.Itoa(slot))
	}
	return env
}

// supervise runs the command in a process group of its own, with env added
// to its environment, while the lock (or leadership) whose validity until
// reads is held, and returns its exit status once no process of the group
// is left. It forwards signals to the group. When lost ends, or when the
// command exits leaving processes in its group, the group gets SIGTERM and
// then SIGKILL, by spec; a lost lock returns exitSoftware. name ("redlock
// run", "redlock elect") starts what it says on stderr. run and elect share
// it, so that a leader's command is stopped exactly as a lock holder's is.
func supervise(name string, argv, env []string, until func() time.Time, spec stopSpec, lost context.Context,
	sigs <-chan os.Signal, logf func(string, ...any)) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	becomeSubreaper()
	g, err := startGroup(name, cmd)
	if err != nil {
		code := 126 // found but could not run, as a shell says
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return code, exit(code, "%v", err)
	}
	defer g.close()
	logf("started %q, pid %d, process group %d, guardian pid %d", argv, cmd.Process.Pid, g.pgid, g.guardian.cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		code     = -1      // the command's status, once it has exited
		lostErr  error     // why the lock is lost
		validity time.Time // the lock's validity, read when it was lost
		termSent bool      // SIGTERM sent, or a signal forwarded, to the group
		termAt   time.Time // when the group got it
		killAt   time.Time // when the group gets SIGKILL, if set
		killed   bool
		killedAt time.Time        // when the SIGKILL due at killAt was sent
		noKill   = func() {}      // cancels the SIGKILL due at killAt
		poll     <-chan time.Time // ticks from the command's exit until its group is empty
		warned   bool
	)
	killFired := make(chan killSent, 1)
	// stopBy sends SIGTERM to the group, unless it already got a signal,
	// and SIGKILL grace after it, and never after deadline: from a thread
	// of its own that sleeps until then (see killAt), not through this loop.
	stopBy := func(deadline time.Time) {
		now := time.Now()
		if !termSent {
			termSent, termAt = true, now
			_ = g.signal(syscall.SIGTERM)
		}
		at := termAt.Add(spec.grace)
		if deadline.Before(at) {
			at = deadline
		}
		if !killAt.IsZero() && !at.Before(killAt) {
			return
		}
		killAt = at
		logf("SIGTERM sent to process group %d at %s, SIGKILL at %s", g.pgid, termAt.Format("15:04:05.000"), killAt.Format("15:04:05.000"))
		noKill()
		noKill = g.killAt(killAt, killFired)
	}
	// Before the group's pgid can be reused: no SIGKILL after this.
	defer func() { noKill() }()
	killReport := func(k killSent) {
		killed, killedAt = true, k.at
		how := "an ordinary thread"
		if k.realtime {
			how = "a real-time thread"
		}
		logf("SIGKILL sent to process group %d at %s, %v after it was due, from %s",
			g.pgid, k.at.Format(time.RFC3339Nano), k.at.Sub(killAt).Round(time.Microsecond), how)
	}
	// finish returns once the group is gone. The command's exit can come
	// before the killer's report: once noKill has returned, the killer has
	// either sent SIGKILL and its report or never will.
	finish := func() (int, error) {
		noKill()
		select {
		case k := <-killFired:
			killReport(k)
		default:
		}
		return outcome(code, lostErr, validity, killedAt)
	}
	lostCh := lost.Done()
	for {
		select {
		case s := <-sigs:
			logf("forwarding %v to process group %d", s, g.pgid)
			if !termSent {
				termSent, termAt = true, time.Now()
			}
			_ = g.signal(s.(syscall.Signal))
		case <-lostCh:
			lostCh = nil
			lostErr, validity = context.Cause(lost), until()
			logf("%v (valid until %s): stopping process group %d", lostErr, validity.Format(time.RFC3339Nano), g.pgid)
			stopBy(validity.Add(-spec.margin))
		case k := <-killFired:
			killReport(k)
		case err := <-exited:
			exited = nil
			code = exitStatus(cmd.ProcessState, err)
			g.restoreTerminal()
			logf("pid %d exited with status %d", cmd.Process.Pid, code)
			if g.empty() {
				return finish()
			}
			if !termSent {
				fmt.Fprintf(os.Stderr, "%s: the command exited leaving processes in its group %d: stopping them before the release\n", name, g.pgid)
			}
			stopBy(until().Add(-spec.margin))
			ticker := time.NewTicker(10 * time.Millisecond)
			defer ticker.Stop()
			poll = ticker.C
		case <-poll:
			if killed {
				// A process forked as the SIGKILL went out is
				// killed by the next.
				_ = g.signal(syscall.SIGKILL)
				if !warned && time.Since(killAt) > 5*time.Second {
					warned = true
					fmt.Fprintf(os.Stderr, "%s: process group %d still alive 5s after SIGKILL: in uninterruptible sleep? waiting for it\n", name, g.pgid)
				}
			}
			if g.empty() {
				return finish()
			}
		}
	}
}

// outcome is what supervise returns once the group is gone; killedAt is
// when the group got its SIGKILL, if it did. A lost lock's error wraps
// lostErr, so that elect tells a lost leadership (redlock.ErrLockLost)
// from a command that exited 70 on its own.
func outcome(code int, lostErr error, until, killedAt time.Time) (int, error) {
	if lostErr == nil {
		return code, nil
	}
	gone := time.Now()
	switch {
	case gone.After(until) && !killedAt.IsZero() && killedAt.Before(until):
		// Killed in time: none of its processes ran again, but the
		// kernel ends a killed process only when it next runs it.
		return exitSoftware, exit(exitSoftware, "%w; the command was stopped: its process group got SIGKILL at %s, before the lock's validity ended (valid until %s), and its last process was seen gone at %s, the machine being slow to end killed processes",
			lostErr, killedAt.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano), gone.Format(time.RFC3339Nano))
	case gone.After(until):
		return exitSoftware, exit(exitSoftware, "%w; the command was stopped, but the last process of its group was seen gone at %s, after the lock's validity ended (valid until %s)",
			lostErr, gone.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
	}
	return exitSoftware, exit(exitSoftware, "%w; the command was stopped: its process group ended before the lock's validity did (valid until %s)",
		lostErr, until.Format(time.RFC3339Nano))
}

// exitStatus is a shell's $? for the command: its exit code, or 128 plus
// the signal that ended it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := ps.ExitCode(); code >= 0 {
		return code
	}
	if err != nil {
		return 1
	}
	return 0
}
