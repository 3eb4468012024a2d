package redistest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel SIGKILL redis-server when the test binary
// dies (panic on test timeout, Ctrl-C, os.Exit), so an aborted run does not
// leave orphaned servers holding ports. Caveat: Pdeathsig fires when the OS
// thread that started the child exits, which the Go runtime only does for
// goroutines that exit while locked to their thread; that is harmless here.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped polls /proc until pid is in the stopped state, because
// kill(SIGSTOP) returns before the target has actually stopped and a test
// that pauses a node must not race with it still answering.
func waitStopped(pid int, exited <-chan struct{}, timeout time.Duration) error {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return ErrNotRunning
		default:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil // no procfs: signal delivery is the best we can do
		}
		// Format: "pid (comm) S ...": comm may contain spaces and parens.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
			if st := data[i+2]; st == 'T' || st == 't' {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: pid %d not stopped %v after SIGSTOP", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// removeFakeTimeShm removes the semaphore and shared memory object that
// libfaketime made in /dev/shm for the process pid, which it removes
// itself only on a clean exit: left behind, they pile up over a run of
// kills, and one whose name a later process's pid reuses confuses that
// process's libfaketime.
func removeFakeTimeShm(pid int) {
	_ = os.Remove(fmt.Sprintf("/dev/shm/sem.faketime_sem_%d", pid))
	_ = os.Remove(fmt.Sprintf("/dev/shm/faketime_shm_%d", pid))
}
