package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// raisePriority puts the calling thread in the real-time class (SCHED_FIFO,
// the lowest priority), which the kernel runs before every ordinary thread,
// when redlock may: as root, with CAP_SYS_NICE, or with RLIMIT_RTPRIO of at
// least 1. Otherwise the thread stays an ordinary one. It reports whether
// it did.
func raisePriority() bool {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	return unix.SchedSetAttr(0, &attr, 0) == nil
}

// sleepThread sleeps d in the kernel on the calling thread, which wakes
// itself: with time.Sleep another thread, an ordinary one, would wake it.
// A signal (the runtime's preemption) may end it early.
func sleepThread(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.Nanosleep(&ts, nil)
}
