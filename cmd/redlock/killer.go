package main

import (
	"runtime"
	"sync"
	"syscall"
	"time"
)

// killSent is what the killer reports once it has sent SIGKILL.
type killSent struct {
	at       time.Time // read once the kill returned: it was sent by then
	realtime bool      // from a real-time thread
}

// killAt sends SIGKILL to the group at at, from a thread of its own, and
// then reports it on fired (buffered by the caller). The thread sleeps in
// the kernel until at, not on a Go timer, and where redlock may (see
// raisePriority) it runs at real-time priority: on a machine whose
// CPUs are all busy an ordinary thread is not run again for as long as a
// second after its sleep ends (measured on a loaded 2-core machine: timers,
// plain sleeps and even a spinning thread lost the CPU for up to 1.4 s),
// which is longer than the kill margin, while a real-time one is run within
// microseconds. The returned cancel makes sure no SIGKILL goes out once it
// has returned: supervise calls it before the group's pgid could be reused.
func (g *procGroup) killAt(at time.Time, fired chan<- killSent) (cancel func()) {
	var mu sync.Mutex
	cancelled := false
	go func() {
		// Never unlocked: the thread ends with this goroutine, and its
		// priority with it, instead of going back to the runtime's pool.
		runtime.LockOSThread()
		rt := raisePriority()
		for {
			mu.Lock()
			done := cancelled
			mu.Unlock()
			if done {
				return
			}
			left := time.Until(at)
			if left <= 0 {
				break
			}
			// In steps, so that a cancelled killer does not linger.
			sleepThread(min(left, 100*time.Millisecond))
		}
		mu.Lock()
		defer mu.Unlock()
		if cancelled {
			return
		}
		_ = g.signal(syscall.SIGKILL)
		select {
		case fired <- killSent{at: time.Now(), realtime: rt}:
		default:
		}
	}()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		cancelled = true
	}
}
