package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// demo shows the lock at work: workers contend for one key on five Redis
// masters, each critical section guarded by a fence, while one master is
// stalled and then killed. With no -addrs it starts five local nodes itself:
// redis-server processes when the binary is found, in-process miniredis
// servers otherwise.
func demo(args []string) error {
	fs := flag.NewFlagSet("redlock demo", flag.ExitOnError)
	addrs := fs.String("addrs", "", "comma-separated addresses of independent Redis masters (default: start 5 local nodes)")
	workers := fs.Int("workers", 4, "contending workers")
	rounds := fs.Int("rounds", 5, "critical sections per worker")
	inProcess := fs.Bool("miniredis", false, "use in-process miniredis nodes even when redis-server exists")
	fs.Parse(args) // ExitOnError: a bad flag never returns here
	return run(*addrs, *inProcess, *workers, *rounds)
}

// nodeSet is the masters the demo runs on and the faults it can inject.
type nodeSet struct {
	addrs []string
	kind  string
	stall func(i int) error // nil when the nodes cannot be stalled
	wake  func(i int) error
	kill  func(i int) error
	stop  func()
}

func startNodes(addrs string, inProcess bool) (*nodeSet, error) {
	if addrs != "" {
		return &nodeSet{addrs: strings.Split(addrs, ","), kind: "given", stop: func() {}}, nil
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
	ns.stop = func() {
		for _, m := range servers {
			m.Close()
		}
	}
	return ns, nil
}

// run returns an error when the lock failed to exclude: a lost update or a
// stale fence.
func run(addrs string, inProcess bool, workers, rounds int) error {
	// go-redis logs every failed dial to the killed node; the demo reports
	// what matters itself.
	redis.SetLogger(quiet{})
	nodes, err := startNodes(addrs, inProcess)
	if err != nil {
		return err
	}
	defer nodes.stop()
	fmt.Printf("%d nodes (%s): %s\n", len(nodes.addrs), nodes.kind, strings.Join(nodes.addrs, " "))

	var clients []redis.UniversalClient
	for _, a := range nodes.addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		defer c.Close()
		clients = append(clients, c)
	}
	locks, err := redlock.New(clients, redlock.WithFencing())
	if err != nil {
		return err
	}
	defer locks.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if nodes.stall != nil {
		fmt.Println("stalling node 0 (SIGSTOP): a quorum of the others answers without it")
		if err := nodes.stall(0); err != nil {
			return err
		}
	}
	if nodes.kill != nil {
		fmt.Println("killing node 1: 3 of 5 still make a quorum")
		if err := nodes.kill(1); err != nil {
			return err
		}
	}

	// shared is the resource the lock protects: a counter written by
	// read-modify-write, and the highest fence seen, as a storage would keep.
	var shared struct {
		sync.Mutex
		counter, highest uint64
		stale            int
	}
	var g errgroup.Group
	for w := range workers {
		g.Go(func() error {
			for r := range rounds {
				start := time.Now()
				lock, err := locks.Acquire(ctx, "demo:orders", 10*time.Second)
				if err != nil {
					return err
				}
				took := time.Since(start)
				shared.Lock()
				if lock.Fence() < shared.highest {
					shared.stale++
				}
				shared.highest = lock.Fence()
				v := shared.counter
				shared.Unlock()
				time.Sleep(2 * time.Millisecond) // the work, between read and write
				shared.Lock()
				shared.counter = v + 1
				shared.Unlock()
				fmt.Printf("worker %d round %d: fence %3d, acquired in %8v, valid for %v\n",
					w, r, lock.Fence(), took.Round(time.Microsecond), time.Until(lock.Until()).Round(time.Millisecond))
				if err := lock.Release(ctx); err != nil {
					// Safe to go on: the lock expires by itself, and a
					// late delete still runs in the background.
					fmt.Printf("worker %d round %d: release: %v\n", w, r, err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
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
	fmt.Printf("counter %d of %d expected (lost updates: %d), stale fences: %d\n", shared.counter, want, want-shared.counter, shared.stale)
	if shared.counter != want || shared.stale != 0 {
		return fmt.Errorf("mutual exclusion failed: counter %d of %d, %d stale fences", shared.counter, want, shared.stale)
	}
	return nil
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
