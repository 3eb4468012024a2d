package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/script"
)

// defaultElectTTL is elect's --ttl: how long a leader that dies (kill -9, a
// lost machine) keeps the others waiting. Shorter than run's 30s, as a
// Kubernetes lease's 15s is: a standby waits for a dead leader's term to
// expire, where a job waits only for a live holder to finish.
const defaultElectTTL = 15 * time.Second

const electHelp = `elect campaigns for the leadership of --key and runs the command only while
it leads: as many "redlock elect" processes as wanted campaign for one key,
and at most one of them runs its command at a time (within the Redlock
assumptions). A leadership is the library's Election: a fenced lock, renewed
in the background, whose value is --metadata (redlock status shows it as
"holder metadata", and the term as "term"). The command gets REDLOCK_KEY and
REDLOCK_TERM, the leadership's term: a fence, higher than every earlier
leader's term on the key, for storage to refuse a deposed leader's writes.

When the leadership can no longer be proven (a quorum of nodes lost,
restarted empty or unreachable), the command's process group is stopped as
redlock run stops it when its lock is lost: SIGTERM early enough that --grace
fits before the leadership's validity ends, SIGKILL a margin before that end
whatever --grace says. elect then resigns and campaigns again; when it leads
again it runs the command again, under a new, higher term. A restart of the
command is a new term: the command must not assume it ran before.

When the command exits on its own while elect leads, elect resigns (the next
campaigner is woken at once) and exits with the command's status: the work
is done, as the library's Election.Run ends when lead returns while it leads.
Run elect under a supervisor that restarts it if the command is meant to
run forever.

SIGINT, SIGTERM and SIGHUP sent to elect while its command runs are forwarded
to the command's group once, as redlock run does; elect waits for the
command, resigns and exits with the command's status. Sent while elect
campaigns (or stops the command of a leadership lost), they end it with
128+n. If elect itself is killed (kill -9), its guardian sends SIGKILL to the
command's group at once, and another campaigner leads once the leadership
expires, within --ttl.

elect never gives up campaigning: a key held by another leader, and nodes
down or unreachable, are waited out as long as it takes (a standby must stay
a candidate through an outage), so it never exits 69 or 75; --verbose logs
what it waits for.

--ttl is at least 200ms, as for redlock run. --grace is shorter than --ttl.

Environment: REDLOCK_NODES for --nodes, REDLOCK_RESTART_GUARD for
--restart-guard. The command gets REDLOCK_KEY and REDLOCK_TERM.
`

// electSignal is the cause of the context that elect's signals end: the
// signal, for the exit status 128+n.
type electSignal struct{ sig os.Signal }

func (s electSignal) Error() string { return "got " + s.sig.String() }

// signalled returns the signal that ended ctx, or nil.
func signalled(ctx context.Context) os.Signal {
	var s electSignal
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return nil
}

func electCmd(args []string) error {
	fs := flag.NewFlagSet("redlock elect", flag.ContinueOnError)
	var nf nodeFlag
	nf.register(fs)
	var kf keysFlag
	fs.Var(&kf, "key", "the election's `key` (required; one key)")
	ttl := durationVar(fs, "ttl", defaultElectTTL, "the leadership's time to live (a `duration`, at least "+minTTL.String()+"): renewed while elect leads, and how long a dead leader keeps the others waiting")
	grace := durationVar(fs, "grace", 0, "the `duration` between SIGTERM and SIGKILL when the leadership is lost; shorter than --ttl (default: a third of --ttl)")
	guard := guardVar(fs)
	metadata := fs.String("metadata", "", "the leader's `text`, which redlock status shows: at most "+strconv.Itoa(redlock.MaxMetadataLen)+" bytes of UTF-8, one line (default: \"host HOSTNAME pid PID\")")
	verbose := fs.Bool("verbose", false, "log each step on stderr")
	shellCmd := shellFlag(fs)
	if err := parseFlags(fs, "--key K [--nodes NODE,...] [--ttl 15s] [--metadata TEXT] [--grace ttl/3] [--restart-guard 0] [--verbose] {-- command [args...] | -c 'command'}", electHelp, args); err != nil {
		return err
	}
	key, err := kf.one(fs)
	if err != nil {
		return err
	}
	if err := defaultGraceAndGuard(ttl, grace, guard); err != nil {
		return err
	}
	metadataGiven := false // --metadata "" asks for none
	fs.Visit(func(f *flag.Flag) { metadataGiven = metadataGiven || f.Name == "metadata" })
	if !metadataGiven {
		*metadata = defaultLeaderMetadata()
	}
	badMetadata := script.CheckMetadata(*metadata, redlock.MaxMetadataLen) // the library's own rule
	switch {
	case key == "":
		return usageError(fs, "--key is required")
	case ttl.d <= 0:
		return usageError(fs, "--ttl must be positive")
	case ttl.d < minTTL:
		return usageError(fs, "--ttl %v is shorter than the minimum of %v, the TTL whose tenth and twentieth (the kill margin and per-node deadline) are the %v these need", ttl.d, minTTL, timingFloor)
	}
	if err := checkSupervised(fs, ttl.d, grace.d, guard.d, badMetadata, "the leadership can pass to another campaigner"); err != nil {
		return err
	}
	argv, err := commandLine(fs, *shellCmd)
	if err != nil {
		return err
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "redlock elect: %s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		}
	}
	nodes, err := nf.open()
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	what := strconv.Quote(key)
	lead := termLeadFor(ttl.d, grace.d)
	var giveUps struct {
		sync.Mutex
		last string
	}
	opts := []redlock.Option{
		redlock.WithRenewInterval(renewIntervalFor(ttl.d, lead)),
		redlock.WithHooks(redlock.Hooks{
			// The campaign's acquires that gave up (nodes unavailable):
			// Campaign pauses and tries again, and --verbose says why,
			// once for each new reason rather than several times a second.
			Done: func(d redlock.Event) {
				if d.Op != "acquire" || d.Err == nil {
					return
				}
				why := oneLine(d.Err.Error())
				giveUps.Lock()
				said := giveUps.last == why
				giveUps.last = why
				giveUps.Unlock()
				if !said {
					logf("campaign for %s: an acquire gave up after %v, trying again (said once while the reason stays): %v", what, d.Elapsed, why)
				}
			},
			Renewal: func(r redlock.Event) {
				if r.Err != nil {
					logf("renewal of %s failed after %v: %v", what, r.Elapsed, r.Err)
				} else {
					logf("renewed %s in %v", what, r.Elapsed)
				}
			},
		}),
	}
	if guard.d > 0 {
		opts = append(opts, redlock.WithRestartGuard(guard.d))
	}
	locks, err := redlock.New(clients(nodes), opts...)
	if err != nil {
		return exit(exitUsage, "%v", err)
	}
	defer closeClient(locks)
	warnFewNodes("redlock elect", len(nodes))
	election, err := locks.Election(key, ttl.d)
	if err != nil {
		return exit(exitUsage, "%v", err)
	}

	// Signals are caught from here on. A signal ends sigCtx, and with it a
	// campaign; while the command runs, supervise forwards it too (relay).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	sigCtx, gotSignal := context.WithCancelCause(context.Background())
	defer gotSignal(nil)
	relay := make(chan os.Signal, 4)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				gotSignal(electSignal{s}) // the first signal stays the cause
				select {
				case relay <- s:
				default: // nothing reads them between commands: elect exits then
				}
			case <-done:
				return
			}
		}
	}()

	// A campaign waits for the nodes however long they are down (its
	// choice, documented): reachQuorum warms the client and says, with
	// --verbose, which node is down.
	if err := reachQuorum("redlock elect", locks, nodes, waitSpec{forever: true}, logf); err != nil {
		return err
	}
	stop := stopSpec{grace: grace.d, margin: killMarginFor(ttl.d)}
	for {
		logf("campaigning for %s with a TTL of %v on %d nodes (quorum %d)", what, ttl.d, len(nodes), locks.Quorum())
		ld, err := election.Campaign(sigCtx, *metadata)
		if err != nil {
			return campaignError(sigCtx, what, err)
		}
		if s := signalled(sigCtx); s != nil { // elected as the signal came
			resign(ld, what, logf)
			return exit(128+int(s.(syscall.Signal)), "%v while campaigning for %s", s, what)
		}
		term := ld.Term()
		logf("leading %s, term %d, valid until %s", what, term, ld.Until().Format(time.RFC3339Nano))
		lost := endBefore(ld.Context(), ld.Until, lead, what)
		env := []string{"REDLOCK_KEY=" + key, "REDLOCK_TERM=" + strconv.FormatUint(term, 10)}
		code, runErr := supervise("redlock elect", argv, env, ld.Until, stop, lost, relay, logf)
		resign(ld, what, logf)
		if !errors.Is(runErr, redlock.ErrLockLost) {
			// The command exited on its own, or after a signal elect
			// forwarded, while elect led: the work is done.
			if runErr != nil {
				return runErr
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		}
		if s := signalled(sigCtx); s != nil {
			return exit(128+int(s.(syscall.Signal)), "%v while the command of term %d of %s was stopped: %v", s, term, what, runErr)
		}
		// Said without --verbose: a command stopped and run again is what
		// an operator looks for when a leader restarts its work.
		fmt.Fprintf(os.Stderr, "redlock elect: term %d of %s ended: %v; campaigning again\n", term, what, oneLine(runErr.Error()))
	}
}

// campaignError is elect's exit when a campaign failed: by a signal, or
// for a reason that campaigning again would not cure.
func campaignError(sigCtx context.Context, what string, err error) error {
	switch {
	case signalled(sigCtx) != nil:
		s := signalled(sigCtx)
		return exit(128+int(s.(syscall.Signal)), "%v while campaigning for %s", s, what)
	case errors.Is(err, redlock.ErrInvalidArgument) && errors.As(err, new(*redlock.QuorumError)):
		// As run: the key is held by another kind of lock, which no
		// wait cures.
		return exit(exitUsage, "campaign for %s refused: the key is held by another kind of lock (shared or permits): %v", what, err)
	case errors.Is(err, redlock.ErrInvalidArgument), misconfigured(err):
		return exit(exitUsage, "%v", err)
	}
	return fmt.Errorf("campaign for %s: %w", what, err)
}

// resign ends a leadership, lost or not, within releaseTimeout: the next
// campaigner is woken at once, and a node that does not answer expires the
// key by its TTL.
func resign(ld *redlock.Leadership, what string, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := ld.Resign(ctx); err != nil {
		logf("resign: %v", err)
	} else {
		logf("resigned %s, term %d", what, ld.Term())
	}
}

// defaultLeaderMetadata is --metadata's default: the host and pid, which
// tell an operator where the leader runs; nothing if the host name does not
// fit the metadata's rules.
func defaultLeaderMetadata() string {
	host, err := os.Hostname()
	if err != nil {
		host = "?"
	}
	md := fmt.Sprintf("host %s pid %d", host, os.Getpid())
	if script.CheckMetadata(md, redlock.MaxMetadataLen) != "" {
		return fmt.Sprintf("pid %d", os.Getpid())
	}
	return md
}
