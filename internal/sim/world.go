package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/redlock-go/redlock"
)

// World is one simulated deployment, inside a synctest bubble: nodes, the
// network between them and the clients, and the library's Clients, each
// over go-redis clients of its own (one per node) that dial through the
// network. It must be made, run and closed inside the bubble.
type World struct {
	cfg   Config
	Nodes []*Node
	Net   *Network
	Trace *Trace

	mu       sync.Mutex
	procs    int                     // client processes made so far: each a link index of its own
	clients  map[int][]*redis.Client // by process, closed at the end
	libs     map[int]*redlock.Client
	procSlot map[int]int // the slot each process serves
	// closing holds the processes CloseProc closes now; a delete their
	// Client's Close gives up goes to onAbandon with the process.
	closing   map[int]bool
	onAbandon func(proc int, key string)
}

// NewWorld starts cfg.Nodes nodes and the network.
func NewWorld(cfg Config, trace *Trace) *World {
	w := &World{cfg: cfg, Trace: trace, clients: make(map[int][]*redis.Client), libs: make(map[int]*redlock.Client), procSlot: make(map[int]int), closing: make(map[int]bool)}
	for i := range cfg.Nodes {
		n := NewNode(i, rand.New(rand.NewPCG(cfg.Seed, uint64(1000+i))), trace)
		if cfg.Skew > 0 {
			// Before any key: an offset moves no expiry (a TTL runs by
			// the node's rate), only what TIME reads, fences' clock
			// part and the nodes' deadlines.
			off := randDur(rand.New(rand.NewPCG(cfg.Seed, uint64(3000+i))), -cfg.Skew, cfg.Skew)
			n.Step(off)
			trace.Add("fault", i, "clock offset %v from the start", off)
		}
		w.Nodes = append(w.Nodes, n)
	}
	bases := NodeLatencies(cfg)
	for i, b := range bases {
		trace.Add("net", i, "base latency %v one way", b)
	}
	w.Net = NewNetwork(NetConfig{Latency: cfg.Latency, Bases: bases, QueueBytes: 1 << 20}, w.Nodes, cfg.Seed, trace)
	return w
}

// AwayEvery: one run in AwayEvery has a node away from the clients beyond
// a minority (NodeLatencies).
const AwayEvery = 8

// NodeLatencies draws each node's base one-way latency (NetConfig.Bases)
// from a source of the seed's own, or returns nil without cfg.Far (every
// node at cfg.Latency, 100 to 200 µs a chunk). One node of five is away
// from the clients in half the runs, two in the other half (up to a
// minority), each another zone's (log-uniform from 1 to 10 ms) or, as
// often, another region's (uniform from 20 ms to cfg.Far, a round trip up
// to twice that); the others are near. The fastest quorum stays near, as
// a deployment places its nodes, so that the workload's TTLs from 50 ms
// keep their meaning while the library learns each away node's deadline
// from its latency, times out on it and rolls back there. One run in
// AwayEvery has one node more away: every quorum holds an away node, and
// a TTL too short for its latency is refused (ErrNotAcquired). Far faults
// (FaultFar) move nodes away and back during a run, whichever they are.
func NodeLatencies(cfg Config) []time.Duration {
	if cfg.Far <= 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 4000))
	minority := max((cfg.Nodes-1)/2, 1)
	away := 1 + r.IntN(minority)
	if r.IntN(AwayEvery) == 0 {
		away = minority + 1
	}
	bases := make([]time.Duration, cfg.Nodes)
	for i := range bases {
		bases[i] = cfg.Latency
	}
	for _, i := range r.Perm(cfg.Nodes)[:min(away, cfg.Nodes)] {
		if r.IntN(2) == 0 {
			bases[i] = logDur(r, time.Millisecond, 10*time.Millisecond)
		} else {
			bases[i] = randDur(r, 20*time.Millisecond, max(cfg.Far, 20*time.Millisecond))
		}
		bases[i] = bases[i].Truncate(time.Microsecond)
	}
	return bases
}

// NewClient makes a library Client for slot, as a new process: go-redis
// clients of its own, one per node, each dialling through the network on
// links of the process's own. Half the processes' clients bound their
// reads by the context (ContextTimeoutEnabled); all keep go-redis's other
// defaults, MaxRetries among them, as users make them.
func (w *World) NewClient(slot int, opts ...redlock.Option) (*redlock.Client, int, error) {
	w.mu.Lock()
	proc := w.procs
	w.procs++
	w.mu.Unlock()
	var rcs []*redis.Client
	var ucs []redis.UniversalClient
	for i := range w.Nodes {
		o := &redis.Options{
			// An IP literal: go-redis looks a name up in DNS.
			Addr: fmt.Sprintf("10.0.0.%d:6379", i+1),
			Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return w.Net.Dial(ctx, proc, i)
			},
			// Maintenance notifications start goroutines and commands
			// of their own; the masters here are plain ones.
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
			ContextTimeoutEnabled:    proc%2 == 1,
			MaxRetries:               w.cfg.MaxRetries,
			// go-redis's default on two cores (10 per GOMAXPROCS): the
			// simulator runs on one P, which would halve it.
			PoolSize: 20,
		}
		rc := redis.NewClient(o)
		rc.AddHook(staleHook{tries: o.PoolSize})
		rcs = append(rcs, rc)
		ucs = append(ucs, rc)
	}
	c, err := redlock.New(ucs, opts...)
	if err != nil {
		for _, rc := range rcs {
			_ = rc.Close()
		}
		return nil, 0, err
	}
	w.mu.Lock()
	w.clients[proc] = rcs
	w.libs[proc] = c
	w.procSlot[proc] = slot
	w.mu.Unlock()
	return c, proc, nil
}

// Closed reports whether c was closed (CloseProc).
func (w *World) Closed(c *redlock.Client) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.libs {
		if l == c {
			return false
		}
	}
	return true
}

// ProcOf returns the process of library Client c, or -1.
func (w *World) ProcOf(c *redlock.Client) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, l := range w.libs {
		if l == c {
			return p
		}
	}
	return -1
}

// Procs returns the client processes whose links exist now.
func (w *World) Procs() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, 0, len(w.clients))
	for p := range w.procs {
		if _, ok := w.clients[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// CloseProc closes process proc's library Client (waiting up to d for it)
// and its go-redis clients.
func (w *World) CloseProc(proc int, d time.Duration) error {
	w.mu.Lock()
	c, rcs := w.libs[proc], w.clients[proc]
	delete(w.libs, proc) // Closed from now on: a Release may race the Close
	delete(w.clients, proc)
	w.mu.Unlock()
	var err error
	if c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		w.mu.Lock()
		w.closing[proc] = true
		w.mu.Unlock()
		err = c.Close(ctx)
		w.mu.Lock()
		delete(w.closing, proc)
		w.mu.Unlock()
		cancel()
	}
	for _, rc := range rcs {
		_ = rc.Close()
	}
	return err
}

// abandoned tells onAbandon of a delete of key that the Close under way
// of slot's process gave up (a CleanupAbandoned hook of a Client made for
// slot).
func (w *World) abandoned(slot int, key string) {
	w.mu.Lock()
	var procs []int
	for p := range w.closing {
		if w.procSlot[p] == slot {
			procs = append(procs, p)
		}
	}
	f := w.onAbandon
	w.mu.Unlock()
	for _, p := range procs {
		if f != nil {
			f(p, key)
		}
	}
}

// Close closes every process left and stops the nodes.
func (w *World) Close() {
	for _, p := range w.Procs() {
		_ = w.CloseProc(p, time.Minute)
	}
	for _, n := range w.Nodes {
		n.Close()
	}
	// go-redis's pools end their background dials at their next try, a
	// second or so on: the bubble must be empty when Run returns.
	time.Sleep(5 * time.Second)
}
