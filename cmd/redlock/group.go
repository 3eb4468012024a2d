package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// procGroup is the command's process group: the command and whatever it
// starts that stays in its group, which run signals as one.
type procGroup struct {
	cmd  *exec.Cmd
	pgid int
	// tty is the terminal whose foreground the group was given, -1 if none.
	tty      int
	guardian *guardian
	unpin    func() // ends the pinning of the thread that started the command
}

// gateCmd is the hidden subcommand through which the command is started:
// redlock starts itself as "redlock _gate path argv...", which waits until
// redlock lets it through and then execs the command in its place.
const gateCmd = "_gate"

// startGroup starts cmd as the leader of a new process group, guarded (see
// guardian) from the first instruction the command runs: it is started
// through a gate, the group's pgid is then known, the guardian of that
// group is started, and only once the guardian watches does the gate let
// the command run. A redlock that dies before that closes the gate, and the
// command never runs. name ("redlock run", "redlock elect") is the gate's and
// the guardian's argv[0], which starts what they say. On Linux the command also gets SIGKILL from the kernel
// when redlock dies (see startPinned).
//
// When redlock runs in the foreground of a terminal, the group takes the
// foreground, as a shell gives it to a job: the terminal's Ctrl-C and Ctrl-Z
// go to the command (once; redlock, in the background then, does not see
// them) and it can read the terminal; redlock keeps renewing meanwhile, so a
// command stopped with Ctrl-Z keeps its lock. Without a terminal (a script,
// cron, a service) the group stays in the background and redlock forwards
// what it gets.
func startGroup(name string, cmd *exec.Cmd) (*procGroup, error) {
	if cmd.Err != nil { // not found in $PATH, as Start would say
		return nil, cmd.Err
	}
	if _, err := exec.LookPath(cmd.Path); err != nil { // a path: missing, or not executable
		return nil, err
	}
	self, err := selfPath()
	if err != nil {
		return nil, fmt.Errorf("the command was not started: redlock cannot find its own binary to guard it: %v", err)
	}
	gate, open, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer open.Close() // unless written to, the gate stays shut
	cmd.Args = append([]string{name, gateCmd, cmd.Path}, cmd.Args...)
	cmd.Path = self
	cmd.ExtraFiles = []*os.File{gate}
	tty := foregroundTTY()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if tty >= 0 {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	unpin, err := startPinned(cmd)
	_ = gate.Close()
	if err != nil {
		return nil, err
	}
	g := &procGroup{cmd: cmd, pgid: cmd.Process.Pid, tty: tty, unpin: unpin}
	if tty >= 0 {
		// In the background, redlock's writes to the terminal (with
		// stty tostop) and its taking the foreground back would stop it
		// with SIGTTOU, renewal and all. Set only now that the command
		// has started: an ignored signal stays ignored across exec.
		signal.Ignore(syscall.SIGTTOU)
	}
	if g.guardian, err = startGuardian(name, self, g.pgid); err != nil {
		_ = open.Close()
		_ = cmd.Wait()
		g.close()
		return nil, fmt.Errorf("the command was not started: %v", err)
	}
	if _, err := open.Write([]byte{1}); err != nil {
		_ = g.signal(syscall.SIGKILL)
		_ = cmd.Wait()
		g.close()
		return nil, fmt.Errorf("the command was not started: %v", err)
	}
	return g, nil
}

// gateMain is the gate: it waits for redlock's byte on descriptor 3 and
// execs the command (path, then its argv) in its own place, keeping its pid,
// group and descriptors. An end of file there means redlock ended, or gave
// up, before the command's guardian watched: it exits without running it.
func gateMain(args []string) int {
	gate, ok := inheritedPipe()
	if !ok || len(args) < 2 {
		fmt.Fprintf(os.Stderr, "redlock: %s is run by redlock run itself (and by redlock elect)\n", gateCmd)
		return exitUsage
	}
	var b [1]byte
	if n, _ := gate.Read(b[:]); n == 0 {
		return 1
	}
	_ = gate.Close()
	err := syscall.Exec(args[0], args[1:], os.Environ())
	code := 126 // found but could not run, as a shell says
	if errors.Is(err, os.ErrNotExist) {
		code = 127
	}
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", helperName(), args[0], err)
	return code
}

// inheritedPipe is descriptor 3 of a hidden subcommand, if it is the pipe
// redlock run passes.
func inheritedPipe() (*os.File, bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(3, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil, false
	}
	return os.NewFile(3, "pipe"), true
}

// foregroundTTY returns stdin's descriptor when it is a terminal and redlock
// is in its foreground process group, -1 otherwise.
func foregroundTTY() int {
	const fd = 0
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != syscall.Getpgrp() {
		return -1
	}
	return fd
}

// signal sends s to every process of the group.
func (g *procGroup) signal(s syscall.Signal) error {
	err := syscall.Kill(-g.pgid, s)
	if errors.Is(err, syscall.ESRCH) { // all gone already
		return nil
	}
	return err
}

// empty reports whether no process of the group is left. Only after the
// command was waited for: it reaps the group's orphans that were handed to
// redlock (see becomeSubreaper), which would otherwise linger as zombies
// that still count as members.
func (g *procGroup) empty() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-g.pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return errors.Is(syscall.Kill(-g.pgid, 0), syscall.ESRCH)
}

// close ends what startGroup set up once the group is gone: the guardian
// stands down and the terminal's foreground comes back. While a process of
// the group is left (a panic on the way out) it does nothing: the guardian
// then stops the group when redlock exits.
func (g *procGroup) close() {
	if !g.empty() {
		return
	}
	if g.guardian != nil {
		g.guardian.standDown()
	}
	g.unpin()
	g.restoreTerminal()
}

// restoreTerminal takes the terminal's foreground back from the group.
func (g *procGroup) restoreTerminal() {
	if g.tty >= 0 {
		_ = unix.IoctlSetPointerInt(g.tty, unix.TIOCSPGRP, syscall.Getpgrp())
	}
}

// helperName is what the gate's and the guardian's messages start with: the
// subcommand that started them ("redlock run", "redlock elect"), their
// argv[0].
func helperName() string {
	if strings.HasPrefix(os.Args[0], "redlock ") {
		return os.Args[0]
	}
	return "redlock"
}
