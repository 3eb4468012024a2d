package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeStats reads what the nodes did for a library (INFO commandstats and
// INFO cpu), on clients of its own.
type nodeStats struct {
	clients []*redis.Client
	// idle is the nodes' CPU per second of wall time with nothing but the
	// harness's own INFO calls to do: cron ticks, and those calls. since
	// subtracts it, so that a window's settle time and a short batch's
	// idle moments are not charged to the library.
	idle float64
}

// nodeUse is what the nodes did, summed over them: calls per command and
// CPU time (user and system) of the redis-server processes.
type nodeUse struct {
	calls map[string]int64
	cpu   time.Duration
	at    time.Time // when the snapshot was taken
}

// idleWindow is how long newNodeStats watches the nodes idle.
const idleWindow = 200 * time.Millisecond

// settle is how long the nodes are left to finish a library's late work
// (rollbacks, background deletes, unsubscribes) before the calls are read.
const settle = 20 * time.Millisecond

// newNodeStats connects to the nodes and measures their idle CPU, so call it
// before the libraries start.
func newNodeStats(ctx context.Context, addrs []string) *nodeStats {
	s := &nodeStats{}
	for _, a := range addrs {
		s.clients = append(s.clients, redis.NewClient(&redis.Options{Addr: a}))
	}
	s.snapshot(ctx) // connects, outside the idle window
	if before := s.snapshot(ctx); before != nil {
		time.Sleep(idleWindow)
		if after := s.snapshot(ctx); after != nil {
			s.idle = float64(after.cpu-before.cpu) / float64(after.at.Sub(before.at))
		}
	}
	return s
}

func (s *nodeStats) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// snapshot returns the nodes' counters so far; nil when s is nil or a node
// did not answer.
func (s *nodeStats) snapshot(ctx context.Context) *nodeUse {
	if s == nil {
		return nil
	}
	total := &nodeUse{calls: make(map[string]int64), at: time.Now()}
	for _, c := range s.clients {
		txt, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return nil
		}
		if !parseInfo(txt, total) {
			return nil
		}
	}
	return total
}

// parseInfo adds the calls per command and the CPU seconds of one node's
// INFO commandstats and cpu to u, and reports whether it found the CPU.
func parseInfo(txt string, u *nodeUse) bool {
	cpu := 0
	for line := range strings.SplitSeq(txt, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_cpu_sys", "used_cpu_user":
			// Seconds with microseconds, from getrusage.
			if sec, err := strconv.ParseFloat(rest, 64); err == nil {
				u.cpu += time.Duration(sec * float64(time.Second))
				cpu++
			}
			continue
		}
		name, ok = strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(strings.TrimPrefix(calls, "calls="), 10, 64)
		if err == nil {
			u.calls[name] += n
		}
	}
	return cpu == 2
}

// since waits for the library's late work to land and returns what the
// nodes did since before, without the INFO calls of the harness itself and
// without the idle CPU of the window.
func (s *nodeStats) since(ctx context.Context, before *nodeUse) *nodeUse {
	if s == nil || before == nil {
		return nil
	}
	time.Sleep(settle)
	after := s.snapshot(ctx)
	if after == nil {
		return nil
	}
	idle := time.Duration(s.idle * float64(after.at.Sub(before.at)))
	d := &nodeUse{calls: make(map[string]int64), cpu: after.cpu - before.cpu - idle, at: after.at}
	for k, v := range after.calls {
		if k == "info" {
			continue
		}
		if v -= before.calls[k]; v > 0 {
			d.calls[k] = v
		}
	}
	return d
}
