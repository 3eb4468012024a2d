package redlock_test

import (
	"sync"
	"time"
)

// lagProbe measures how late this process's goroutines run. The chaos
// scenarios bound calls by their deadlines, but on a loaded machine (the
// scenarios run in parallel, under -race, beside other test binaries) a
// goroutine whose timer fired may wait hundreds of milliseconds for a CPU:
// a call then returns that much after its deadline, and no library could
// do better. A probe goroutine sleeps a millisecond at a time and records
// how much longer each sleep took; a call's latency beyond the lag seen
// while it ran (beyond) is what the library added, and that is what a
// scenario bounds. On a quiet machine the lag is a millisecond or two, so
// the bounds keep their edge.
type lagProbe struct {
	mu      sync.Mutex
	samples []lagSample
	stop    chan struct{}
	done    chan struct{}
}

// lagSample is one sleep of the probe: from when it started to when the
// probe ran again, and how much of that was lag.
type lagSample struct {
	from, to time.Time
	late     time.Duration
}

const lagTick = time.Millisecond

// startLagProbe starts a probe; stop ends it.
func startLagProbe() *lagProbe {
	p := &lagProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTimer(lagTick)
		defer t.Stop()
		for from := time.Now(); ; {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			to := time.Now()
			if late := to.Sub(from) - lagTick; late > lagTick {
				p.mu.Lock()
				p.samples = append(p.samples, lagSample{from: from, to: to, late: late})
				p.mu.Unlock()
			}
			from = to
			t.Reset(lagTick)
		}
	}()
	return p
}

func (p *lagProbe) stopProbe() {
	close(p.stop)
	<-p.done
}

// during returns the longest lag the probe saw in a sleep that overlapped
// [start, start+took].
func (p *lagProbe) during(start time.Time, took time.Duration) time.Duration {
	end := start.Add(took)
	p.mu.Lock()
	defer p.mu.Unlock()
	var worst time.Duration
	for _, s := range p.samples {
		if s.from.Before(end) && s.to.After(start) {
			worst = max(worst, s.late)
		}
	}
	return worst
}

// beyond returns how much of a call's latency (took, from start) the
// process's lag does not account for: took less the longest lag seen while
// the call ran, never below 0.
func (p *lagProbe) beyond(start time.Time, took time.Duration) time.Duration {
	return max(took-p.during(start, took), 0)
}

// worst returns, of all the lag the probe saw, the longest.
func (p *lagProbe) worst() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var w time.Duration
	for _, s := range p.samples {
		w = max(w, s.late)
	}
	return w
}
