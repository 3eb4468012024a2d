package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// demo shows the lock at work, narrated: workers contend for one key on five
// Redis masters, each critical section guarded by a fence, while one master
// is stalled and another killed; a lease renewed past its TTL; a holder
// paused past its validity whose stale fenced write is refused. Without --nodes it starts five local nodes itself:
// redis-server processes when the binary is found, in-process miniredis
// servers otherwise.
func demo(args []string) error {
	fs := flag.NewFlagSet("redlock demo", flag.ContinueOnError)
	// $REDLOCK_NODES is not read: the nodes a shell has for run are not
	// the demo's to write on unless named here.
	list := fs.String("nodes", "", "comma-separated independent masters, each host:port or a redis:// or rediss:// URL (default: start 5 local nodes; $"+nodesEnv+" is not read)")
	workers := fs.Int("workers", 4, "contending workers")
	rounds := fs.Int("rounds", 5, "critical sections per worker")
	inProcess := fs.Bool("miniredis", false, "use in-process miniredis nodes even when redis-server exists")
	if err := parseFlags(fs, "[--nodes NODE,...] [--miniredis] [--workers n] [--rounds n]", "", args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	return run(*list, *inProcess, *workers, *rounds)
}

// nodeSet is the masters the demo runs on and the faults it can inject.
type nodeSet struct {
	addrs []string
	opts  []*redis.Options // given nodes' options, from --nodes; nil for the demo's own
	kind  string
	stall func(i int) error // nil when the nodes cannot be stalled
	wake  func(i int) error
	kill  func(i int) error
	// elapse makes the nodes' clocks move by d for key expiry: in-process
	// miniredis nodes expire keys only when told; nil for real servers.
	elapse func(d time.Duration)
	stop   func()
}

func startNodes(list string, inProcess bool) (*nodeSet, error) {
	if list != "" {
		ns := &nodeSet{kind: "given", stop: func() {}}
		for raw := range strings.SplitSeq(list, ",") {
			opts, err := parseNodeURL(strings.TrimSpace(raw))
			if err != nil {
				return nil, err
			}
			ns.opts = append(ns.opts, opts)
			ns.addrs = append(ns.addrs, opts.Addr)
		}
		return ns, nil
	}
	if _, err := redistest.Binary(); err == nil && !inProcess {
		servers, err := redistest.Start(5)
		if err != nil {
			return nil, err
		}
		ns := &nodeSet{kind: "redis-server processes"}
		for _, s := range servers {
			ns.addrs = append(ns.addrs, s.Addr())
		}
		ns.stall = func(i int) error { return servers[i].Pause() }
		ns.wake = func(i int) error { return servers[i].Resume() }
		ns.kill = func(i int) error { return servers[i].Kill() }
		ns.stop = func() {
			for _, s := range servers {
				_ = s.Close()
			}
		}
		return ns, nil
	}
	ns := &nodeSet{kind: "in-process miniredis"}
	var servers []*miniredis.Miniredis
	for range 5 {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, err
		}
		servers = append(servers, m)
		ns.addrs = append(ns.addrs, m.Addr())
	}
	ns.kill = func(i int) error { servers[i].Close(); return nil }
	ns.elapse = func(d time.Duration) {
		for _, m := range servers {
			m.FastForward(d)
		}
	}
	ns.stop = func() {
		for _, m := range servers {
			m.Close()
		}
	}
	return ns, nil
}

// run narrates four scenes on the nodes and returns an error when the lock
// failed to exclude: a lost update, a fence that went back, or a stale write
// the fences let through.
func run(list string, inProcess bool, workers, rounds int) error {
	// go-redis logs every failed dial to the killed node; the demo reports
	// what matters itself.
	redis.SetLogger(quiet{})
	nodes, err := startNodes(list, inProcess)
	if err != nil {
		return err
	}
	defer nodes.stop()
	fmt.Printf("%d nodes (%s): %s\n", len(nodes.addrs), nodes.kind, strings.Join(nodes.addrs, " "))

	var clients []redis.UniversalClient
	for i, a := range nodes.addrs {
		o := &redis.Options{Addr: a}
		if nodes.opts != nil {
			o = nodes.opts[i]
		}
		c := redis.NewClient(o)
		defer c.Close()
		clients = append(clients, c)
	}
	var renewals atomic.Int64
	locks, err := redlock.New(clients, redlock.WithFencing(), redlock.WithHooks(redlock.Hooks{
		Renewal: func(r redlock.Event) {
			if r.Err == nil {
				renewals.Add(1)
			}
		},
	}))
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	st := &demoStore{}
	fmt.Println("\n1. workers contend for one key; a master is stalled, another killed, and the lock stays with the quorum")
	if err := contend(ctx, locks, nodes, st, workers, rounds); err != nil {
		return err
	}
	fmt.Println("\n2. a lease renewed past its TTL: Do runs 2s of work under a 600ms lock")
	if err := lease(ctx, locks, &renewals); err != nil {
		return err
	}
	fmt.Println("\n3. a holder pauses past its validity; the next holder writes; the paused one's stale write is refused by its fence")
	if err := paused(ctx, locks, nodes, st); err != nil {
		return err
	}
	if nodes.wake != nil {
		// Calls to the stalled node are still blocked in go-redis; waking
		// it lets them end before Close waits for them.
		if err := nodes.wake(0); err != nil {
			return err
		}
	}

	want := uint64(workers * rounds)
	st.Lock()
	defer st.Unlock()
	fmt.Printf("\nacquisitions %d, fences issued %d (strictly increasing: %v), stale writes rejected %d, lost updates: %d\n",
		st.acquired, st.fences, st.backwards == 0, st.rejected, want-st.counter)
	if st.counter != want || st.backwards != 0 || st.rejected != 1 {
		return fmt.Errorf("mutual exclusion failed: counter %d of %d, %d fences went back, %d stale writes rejected of 1",
			st.counter, want, st.backwards, st.rejected)
	}
	return nil
}

// demoStore is the resource the lock protects: a counter written by
// read-modify-write, and the highest fence seen, as a storage would keep.
type demoStore struct {
	sync.Mutex
	counter, highest uint64
	acquired, fences int
	backwards        int // fences lower than one seen before
	rejected         int // writes refused for a stale fence
}

// write stores value with fence, refusing a fence lower than the highest.
func (s *demoStore) write(fence uint64, apply func()) bool {
	s.Lock()
	defer s.Unlock()
	if fence < s.highest {
		s.rejected++
		return false
	}
	s.highest = fence
	apply()
	return true
}

// progress prints a line that updates in place on a terminal, and only its
// last state otherwise.
type progress struct {
	tty  bool
	last string
}

func newProgress() *progress {
	fi, err := os.Stdout.Stat()
	return &progress{tty: err == nil && fi.Mode()&os.ModeCharDevice != 0}
}

func (p *progress) show(format string, args ...any) {
	p.last = fmt.Sprintf(format, args...)
	if p.tty {
		fmt.Printf("\r\033[K   %s", p.last)
	}
}

func (p *progress) done() {
	if p.tty {
		fmt.Println()
		return
	}
	fmt.Printf("   %s\n", p.last)
}

func contend(ctx context.Context, locks *redlock.Client, nodes *nodeSet, st *demoStore, workers, rounds int) error {
	total := workers * rounds
	var done atomic.Int64
	var mu sync.Mutex
	var lastFence uint64
	var slowest time.Duration
	pr := newProgress()
	var g errgroup.Group
	for range workers {
		g.Go(func() error {
			for range rounds {
				start := time.Now()
				lock, err := locks.Acquire(ctx, "demo:orders", 10*time.Second)
				if err != nil {
					return err
				}
				took := time.Since(start)
				st.Lock()
				st.acquired++
				st.fences++
				if lock.Fence() <= st.highest {
					st.backwards++
				}
				st.Unlock()
				var v uint64
				st.write(lock.Fence(), func() { v = st.counter })
				time.Sleep(2 * time.Millisecond) // the work, between read and write
				st.write(lock.Fence(), func() { st.counter = v + 1 })
				if err := lock.Release(ctx); err != nil {
					// Safe to go on: the lock expires by itself, and a
					// late delete still runs in the background.
					fmt.Printf("\n   release: %v\n", err)
				}
				n := done.Add(1)
				mu.Lock()
				lastFence, slowest = lock.Fence(), max(slowest, took)
				pr.show("%d/%d acquisitions, fence %d, slowest acquire %v", n, total, lastFence, slowest.Round(time.Microsecond))
				mu.Unlock()
				if n == int64(total/3) {
					if err := fault(nodes, pr); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	err := g.Wait()
	pr.done()
	return err
}

// fault stalls node 0 and kills node 1, once, a third of the way in.
func fault(nodes *nodeSet, pr *progress) error {
	if nodes.stall != nil {
		pr.show("stalling node 0 (SIGSTOP): the others answer without it")
		pr.done()
		if err := nodes.stall(0); err != nil {
			return err
		}
	}
	if nodes.kill != nil {
		pr.show("killing node 1: 3 of 5 still make a quorum")
		pr.done()
		if err := nodes.kill(1); err != nil {
			return err
		}
	}
	return nil
}

func lease(ctx context.Context, locks *redlock.Client, renewals *atomic.Int64) error {
	const ttl, work = 600 * time.Millisecond, 2 * time.Second
	pr := newProgress()
	start := time.Now()
	before := renewals.Load()
	err := locks.Do(ctx, "demo:report", ttl, func(ctx context.Context, _ *redlock.Lock) error {
		for time.Since(start) < work {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(100 * time.Millisecond):
			}
			pr.show("working %v on a %v lock, renewed %d times", time.Since(start).Round(100*time.Millisecond), ttl, renewals.Load()-before)
		}
		return nil
	})
	pr.done()
	if err != nil {
		return fmt.Errorf("the lease did not hold: %w", err)
	}
	fmt.Printf("   held %v on a %v TTL, renewed %d times, released\n", time.Since(start).Round(100*time.Millisecond), ttl, renewals.Load()-before)
	return nil
}

func paused(ctx context.Context, locks *redlock.Client, nodes *nodeSet, st *demoStore) error {
	a, err := locks.Acquire(ctx, "demo:ledger", 300*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Printf("   A holds fence %d, checks its lock is valid, then pauses (a GC pause, SIGSTOP)\n", a.Fence())
	pause := time.Until(a.Until()) + 100*time.Millisecond
	time.Sleep(pause)
	if nodes.elapse != nil {
		nodes.elapse(pause + 100*time.Millisecond) // A's key expires on the nodes
	}
	b, err := locks.Acquire(ctx, "demo:ledger", 10*time.Second)
	if err != nil {
		return err
	}
	st.Lock()
	st.acquired += 2
	st.fences += 2
	if b.Fence() <= a.Fence() {
		st.backwards++
	}
	st.Unlock()
	ok := st.write(b.Fence(), func() {})
	fmt.Printf("   B acquires with fence %d and writes: accepted=%v\n", b.Fence(), ok)
	ok = st.write(a.Fence(), func() {})
	fmt.Printf("   A wakes and writes with fence %d: accepted=%v\n", a.Fence(), ok)
	return b.Release(ctx)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
