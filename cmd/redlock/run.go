package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redlock-go/redlock"
)

// forwarded are the signals run passes on to its command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// nodeTimeoutFor is run's per-node deadline: ttl/20, from 10 ms to 500 ms,
// where the library's default is ttl/200 up to 50 ms. A command holding a
// lock for a long job gains nothing from a fast refusal and loses its lock
// if renewals miss a tight deadline on a loaded machine; a node that does
// not answer in time still counts as unknown, never as success, and the
// validity still subtracts the time the calls took.
func nodeTimeoutFor(ttl time.Duration) time.Duration {
	return min(max(ttl/20, 10*time.Millisecond), 500*time.Millisecond)
}

// releaseTimeout bounds the release and the wait for its background deletes
// once the command has exited.
const releaseTimeout = 2 * time.Second

func runCmd(args []string) error {
	fs := flag.NewFlagSet("redlock run", flag.ContinueOnError)
	var nf nodeFlag
	nf.register(fs)
	key := fs.String("key", "", "the lock's key (required)")
	ttl := fs.Duration("ttl", 30*time.Second, "the lock's time to live; it is renewed every ttl/3 while the command runs")
	wait := fs.Duration("wait", 0, "how long to wait for the lock (0: one try)")
	fencing := fs.Bool("fencing", false, "take a fencing token and pass it to the command as $REDLOCK_FENCE")
	grace := fs.Duration("grace", 10*time.Second, "when the lock is lost: how long after SIGTERM the command is killed")
	verbose := fs.Bool("verbose", false, "log each step on stderr")
	if err := parseFlags(fs, "--key K [--nodes URL,...] [--ttl 30s] [--wait 0] [--fencing] [--grace 10s] [--verbose] -- command [args...]", args); err != nil {
		return err
	}
	switch {
	case *key == "":
		return usageError(fs, "--key is required")
	case *ttl <= 0:
		return usageError(fs, "--ttl must be positive")
	case *wait < 0:
		return usageError(fs, "--wait must not be negative")
	case *grace < 0:
		return usageError(fs, "--grace must not be negative")
	case fs.NArg() == 0:
		return usageError(fs, "no command to run: give it after --")
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
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeoutFor(*ttl))}
	if *fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if *verbose {
		opts = append(opts, redlock.WithHooks(redlock.Hooks{Renewal: func(r redlock.RenewalInfo) {
			if r.Err != nil {
				logf("renewal of %q failed after %v: %v", r.Key, r.Elapsed, r.Err)
			} else {
				logf("renewed %q in %v", r.Key, r.Elapsed)
			}
		}}))
	}
	locks, err := redlock.New(clients(nodes), opts...)
	if err != nil {
		return exit(exitUsage, "%v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		_ = locks.Close(ctx)
	}()

	// Signals are caught from here on: while waiting for the lock they end
	// the wait, while the command runs they go to it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if err := reachQuorum(locks, len(nodes), logf); err != nil {
		return err
	}
	logf("a quorum of nodes is reachable")
	logf("acquiring %q for %v on %d nodes (quorum %d), waiting up to %v", *key, *ttl, len(nodes), locks.Quorum(), *wait)
	lock, err := acquire(locks, *key, *ttl, *wait, sigs)
	if err != nil {
		return err
	}
	logf("acquired %q, valid until %s, fence %d", *key, lock.Until().Format(time.RFC3339Nano), lock.Fence())

	renewing, stopRenewing := context.WithCancel(context.Background())
	lost := keepAlive(renewing, lock, *ttl)
	code, runErr := supervise(fs.Args(), lock, *fencing, *grace, lost, sigs, logf)
	stopRenewing()

	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := lock.Release(ctx); err != nil {
		logf("release: %v", err)
	} else {
		logf("released %q", *key)
	}
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// reachQuorum dials every node; fewer than a quorum answering is
// exitUnavailable, two nodes that are one server a usage error.
func reachQuorum(locks *redlock.Client, n int, logf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	err := locks.Warm(ctx)
	if errors.Is(err, redlock.ErrInvalidArgument) {
		return exit(exitUsage, "%v", err)
	}
	down := 0
	if err != nil {
		for _, e := range unjoin(err) {
			var ne *redlock.NodeError
			if errors.As(e, &ne) {
				down++
				logf("unreachable: %v", ne)
			}
		}
	}
	if n-down < locks.Quorum() {
		return exit(exitUnavailable, "only %d of %d nodes reachable, fewer than the quorum of %d: %v", n-down, n, locks.Quorum(), err)
	}
	return nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// acquire takes the lock within wait (one try for 0). A signal ends the wait.
func acquire(locks *redlock.Client, key string, ttl, wait time.Duration, sigs <-chan os.Signal) (*redlock.Lock, error) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if wait > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, wait)
		defer stop()
	}
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if wait > 0 {
			r.lock, r.err = locks.Acquire(ctx, key, ttl)
		} else {
			r.lock, r.err = locks.TryAcquire(ctx, key, ttl)
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
		return nil, exit(128+int(got.(syscall.Signal)), "%v while waiting for %q", got, key)
	case unreachable(r.err):
		return nil, exit(exitUnavailable, "%v", r.err)
	case errors.Is(r.err, redlock.ErrInvalidArgument):
		return nil, exit(exitUsage, "%v", r.err)
	}
	if wait == 0 {
		return nil, exit(exitTempFail, "%q not acquired in one try (--wait 0): %v", key, r.err)
	}
	return nil, exit(exitTempFail, "%q not acquired within --wait %v: %v", key, wait, r.err)
}

// unreachable reports a failed acquire in which too few nodes answered to
// make a quorum.
func unreachable(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	silent := 0
	for _, n := range qe.Nodes {
		if !errors.Is(n, redlock.ErrHeldByOther) && !errors.Is(n, redlock.ErrKeyAbsent) {
			silent++
		}
	}
	return qe.OK+len(qe.Nodes)-silent < qe.Quorum
}

// supervise runs the command under the lock and returns its exit status. It
// forwards signals to it; when lost ends, it sends SIGTERM and, grace later,
// SIGKILL, and returns exitSoftware.
func supervise(argv []string, lock *redlock.Lock, fencing bool, grace time.Duration, lost context.Context,
	sigs <-chan os.Signal, logf func(string, ...any)) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "REDLOCK_KEY="+lock.Key())
	if fencing {
		cmd.Env = append(cmd.Env, "REDLOCK_FENCE="+strconv.FormatUint(lock.Fence(), 10))
	}
	if err := cmd.Start(); err != nil {
		code := 126 // found but could not run, as a shell says
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = 127
		}
		return code, exit(code, "%v", err)
	}
	logf("started %q, pid %d", argv, cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var lostErr error
	var kill <-chan time.Time
	lostCh := lost.Done()
	for {
		select {
		case s := <-sigs:
			logf("forwarding %v to pid %d", s, cmd.Process.Pid)
			_ = cmd.Process.Signal(s)
		case <-lostCh:
			lostCh = nil
			lostErr = context.Cause(lost)
			logf("%v; sending SIGTERM to pid %d, SIGKILL in %v", lostErr, cmd.Process.Pid, grace)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			logf("still running after %v: sending SIGKILL to pid %d", grace, cmd.Process.Pid)
			_ = cmd.Process.Kill()
		case err := <-exited:
			code := exitStatus(cmd.ProcessState, err)
			logf("pid %d exited with status %d", cmd.Process.Pid, code)
			if lostErr != nil {
				return exitSoftware, exit(exitSoftware, "%v; the command was stopped", lostErr)
			}
			return code, nil
		}
	}
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
