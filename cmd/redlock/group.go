package main

import (
	"errors"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// procGroup is the command's process group: the command and whatever it
// starts that stays in its group, which run signals as one.
type procGroup struct {
	cmd  *exec.Cmd
	pgid int
	// tty is the terminal whose foreground the group was given, -1 if none.
	tty int
}

// startGroup starts cmd as the leader of a new process group. When redlock
// runs in the foreground of a terminal, the group takes the foreground, as
// a shell gives it to a job: the terminal's Ctrl-C and Ctrl-Z go to the
// command (once; redlock, in the background then, does not see them) and
// it can read the terminal; redlock keeps renewing meanwhile, so a command
// stopped with Ctrl-Z keeps its lock. Without a terminal (a script, cron,
// a service) the group stays in the background and redlock forwards what
// it gets.
func startGroup(cmd *exec.Cmd) (*procGroup, error) {
	tty := foregroundTTY()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if tty >= 0 {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if tty >= 0 {
		// In the background, redlock's writes to the terminal (with
		// stty tostop) and its taking the foreground back would stop it
		// with SIGTTOU, renewal and all. Set only now that the command
		// has started: an ignored signal stays ignored across exec.
		signal.Ignore(syscall.SIGTTOU)
	}
	return &procGroup{cmd: cmd, pgid: cmd.Process.Pid, tty: tty}, nil
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

// restoreTerminal takes the terminal's foreground back from the group.
func (g *procGroup) restoreTerminal() {
	if g.tty >= 0 {
		_ = unix.IoctlSetPointerInt(g.tty, unix.TIOCSPGRP, syscall.Getpgrp())
	}
}
