package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// guardianCmd is the hidden subcommand of the guardian: "redlock _guardian pgid".
const guardianCmd = "_guardian"

// Timing of the guardian.
const (
	// guardianStartTimeout bounds the wait for a new guardian to say it
	// watches: a Go binary starts in milliseconds, but a loaded machine
	// can take far longer.
	guardianStartTimeout = 10 * time.Second
	// guardianKillFor is how long a guardian that stopped the group keeps
	// sending SIGKILL while processes of it are left (zombies that their
	// new parent has not reaped yet count as such).
	guardianKillFor = time.Second
)

// guardian stops the command's process group when redlock dies, however it
// dies (SIGKILL, the OOM killer, timeout -s KILL): nothing of redlock runs
// then. It is redlock itself, started as "redlock _guardian pgid" in a process
// group of its own, so that neither a signal to redlock's group nor one to
// the command's reaches it; it ignores the signals a terminal or a
// supervisor sends. Its descriptor 3 is the read end of the lifeline, a
// pipe of which only redlock holds the write end and never writes to it:
// the kernel closes it when redlock's process ends, in any way, and the
// guardian's read returns; it then sends SIGKILL to the whole group at once.
// A pipe rather than a parent-death signal: it is redlock's process that it
// follows, not the thread that started the guardian, and it works the same
// on every Unix. When the group is gone, redlock kills the guardian first
// (standDown) and exits after.
type guardian struct {
	cmd      *exec.Cmd
	lifeline *os.File // the write end, open for as long as the group needs guarding
	standing atomic.Bool
	exited   chan struct{}
}

// startGuardian starts the guardian of group pgid and returns once it
// watches. self is redlock's own binary, name its argv[0].
func startGuardian(name, self string, pgid int) (*guardian, error) {
	watch, lifeline, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ready, readyW, err := os.Pipe()
	if err != nil {
		_ = watch.Close()
		_ = lifeline.Close()
		return nil, err
	}
	defer ready.Close()
	cmd := &exec.Cmd{
		Path:        self,
		Args:        []string{name, guardianCmd, strconv.Itoa(pgid)},
		Stdout:      readyW,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{watch},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	_ = watch.Close()
	_ = readyW.Close()
	if err != nil {
		_ = lifeline.Close()
		return nil, fmt.Errorf("no guardian: %v", err)
	}
	g := &guardian{cmd: cmd, lifeline: lifeline, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if !g.standing.Load() {
			fmt.Fprintf(os.Stderr, "%s: warning: the guardian (pid %d) of the command's process group %d ended (%v): were redlock killed now, the command would keep running\n",
				name, cmd.Process.Pid, pgid, err)
		}
		close(g.exited)
	}()
	_ = ready.SetReadDeadline(time.Now().Add(guardianStartTimeout))
	var b [1]byte
	if n, err := ready.Read(b[:]); n == 0 {
		g.standDown()
		return nil, fmt.Errorf("the guardian (pid %d) did not start: %v", cmd.Process.Pid, err)
	}
	return g, nil
}

// standDown ends the guardian before redlock exits: with SIGKILL, which it
// cannot ignore, so that it never mistakes redlock's exit for its death.
func (g *guardian) standDown() {
	g.standing.Store(true)
	_ = g.cmd.Process.Kill()
	<-g.exited
	// Closed only now: the guardian reads an end of file as redlock's death.
	_ = g.lifeline.Close()
}

// guardianMain is the guardian's process (see guardian).
func guardianMain(args []string) int {
	lifeline, ok := inheritedPipe()
	pgid := 0
	if len(args) == 1 {
		pgid, _ = strconv.Atoi(args[0])
	}
	if !ok || pgid <= 1 {
		fmt.Fprintf(os.Stderr, "redlock: %s is run by redlock run itself (and by redlock elect)\n", guardianCmd)
		return exitUsage
	}
	// The signals that a terminal, a shell or a supervisor send to
	// everything: the guardian stays until redlock stands it down.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE, syscall.SIGUSR1, syscall.SIGUSR2)
	redlock := os.Getppid()
	if _, err := os.Stdout.Write([]byte("ready\n")); err != nil {
		return 1
	}
	_ = os.Stdout.Close()

	// Nothing is ever written: the read returns when redlock is gone.
	var b [1]byte
	_, _ = lifeline.Read(b[:])

	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return 0
	}
	// A process forked as the SIGKILL went out gets the next.
	for deadline := time.Now().Add(guardianKillFor); err == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		err = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	fmt.Fprintf(os.Stderr, "%s: redlock (pid %d) ended while its command ran: its guardian sent SIGKILL to the command's process group %d\n", helperName(), redlock, pgid)
	return 0
}
