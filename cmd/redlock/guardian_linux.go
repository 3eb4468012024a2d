package main

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// selfPath is redlock's own binary, for the gate and the guardian:
// /proc/self/exe, which still runs it when the file was replaced or removed
// since redlock started (an upgrade).
func selfPath() (string, error) {
	const self = "/proc/self/exe"
	if _, err := os.Stat(self); err != nil {
		return os.Executable()
	}
	return self, nil
}

// startPinned starts cmd with a parent-death signal, SIGKILL: the kernel
// kills the command's first process the moment redlock dies, even were its
// guardian killed with it (pkill -9 -f redlock). That covers one process,
// not the group (the guardian does), and a set-user-ID command (sudo)
// clears it. Linux sends it when the thread that started the process ends,
// not the process: the Go runtime ends a thread only when a goroutine
// locked to it returns, and other code could run on this one and do that,
// so it is started from a goroutine locked to its thread, which stays there
// until unpin, called once the group is gone.
func startPinned(cmd *exec.Cmd) (unpin func(), err error) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started := make(chan error)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		<-done
		runtime.UnlockOSThread() // back to the runtime's pool, not ended
	}()
	if err := <-started; err != nil {
		close(done)
		return nil, err
	}
	return sync.OnceFunc(func() { close(done) }), nil
}
