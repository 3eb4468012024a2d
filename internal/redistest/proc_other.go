//go:build !linux

package redistest

import (
	"syscall"
	"time"
)

// sysProcAttr has no parent-death signal outside Linux; an aborted test run
// may leave servers behind there.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot observe the stopped state portably, so Pause relies on
// signal delivery alone outside Linux.
func waitStopped(int, <-chan struct{}, time.Duration) error { return nil }

// removeFakeTimeShm has nothing to remove where there is no /dev/shm.
func removeFakeTimeShm(int) {}
