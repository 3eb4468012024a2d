package main

import "golang.org/x/sys/unix"

// becomeSubreaper makes the command's orphans (a background job whose shell
// has exited) redlock's children instead of init's: redlock can then reap
// them and tell when the last process of the group is gone, even where the
// init of a container never reaps.
func becomeSubreaper() {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
