package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/benchkit"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

// ttl is the lock TTL for every library.
const ttl = 10 * time.Second

type kind int

const (
	uncontended kind = iota // one goroutine, Acquire+Release in a loop
	contention              // many goroutines, one key
	manyKeys                // many goroutines, a key each
	multiProc               // several processes of several goroutines, one key
	network                 // one goroutine, Acquire+Release in a loop, every node behind a link with latency
)

// scenario is one configuration that every eligible contender runs, in
// interleaved rounds, on the same nodes.
type scenario struct {
	name       string
	kind       kind
	nodes      int
	goroutines int // per process with multiProc
	procs      int // multiProc: worker processes
	hold       time.Duration
	// The first slow nodes are reached through a proxy that applies fault
	// once every contender has warmed up; the other nodes are direct.
	slow  int
	fault func(*faultproxy.Proxy)
	// faultTarget: redlock's row has the slow-node target (report.go).
	faultTarget bool
	// links (network): each node's link, the time it adds to a round trip.
	// Every node is reached through a proxy that delays each request by its
	// link and a draw of up to a tenth more (linkJitter), from before the
	// warm-up: the network the nodes are on, not a fault that strikes.
	links []time.Duration
}

// linkJitter is the most a link adds to a request on top of its delay, a
// uniform draw (faultproxy's SetJitter): a tenth, as a round trip across
// zones or regions varies from one request to the next.
func linkJitter(link time.Duration) time.Duration { return link / 10 }

// slowestLink is the most any of s's links adds to a round trip, its jitter
// included; 0 without links, or without a scenario (the libraries' tests).
func (s *scenario) slowestLink() time.Duration {
	var most time.Duration
	if s != nil {
		for _, d := range s.links {
			most = max(most, d+linkJitter(d))
		}
	}
	return most
}

func (s *scenario) runs(c contender) bool {
	if c.ceiling {
		return s.kind == c.only
	}
	if c.singleNode && s.nodes != 1 {
		return false
	}
	if c.experiment && (s.kind == contention || s.kind == multiProc || s.slow > 0 || (s.kind == network && !c.correct)) {
		return false
	}
	if c.allKeys > 0 && (s.kind != uncontended || s.slow > 0) {
		return false
	}
	return !c.floor || (s.kind != contention && s.kind != multiProc)
}

// config is what the flags set.
type config struct {
	nodes      []int         // node counts for the uncontended scenarios
	keyWorkers []int         // goroutine counts of the many-keys scenarios
	kinds      []string      // which groups of scenarios to run
	rounds     int           // interleaved rounds per scenario
	ops        int           // most operations per contender and round, uncontended
	roundTime  time.Duration // most time per contender and round, uncontended
	sliceTime  time.Duration // time per contender and round, contention and many keys
	budget     time.Duration // most time per contender and scenario
	warmup     int           // uncontended operations per contender before measuring
	ctxTimeout bool          // go-redis ContextTimeoutEnabled for every client
	hold       time.Duration // critical section under contention
	procs      int           // worker processes of the multi-process scenario
	redisLog   bool          // keep go-redis's own log lines, in the workers too
	progress   io.Writer     // progress lines; nil for none
}

const (
	groupUncontended = "uncontended"
	groupFaults      = "faults"
	groupContention  = "contention"
	groupManyKeys    = "manykeys"
	groupMultiProc   = "multiprocess"
	groupNetwork     = "network"
)

func defaultConfig() config {
	return config{
		nodes:      []int{1, 3, 5, 7},
		keyWorkers: []int{1, 16, 64, 256},
		kinds:      []string{groupUncontended, groupFaults, groupNetwork, groupContention, groupMultiProc, groupManyKeys},
		rounds:     20,
		ops:        100,
		roundTime:  200 * time.Millisecond,
		sliceTime:  250 * time.Millisecond,
		budget:     15 * time.Second,
		warmup:     50,
		hold:       100 * time.Microsecond,
		procs:      4,
	}
}

func (cfg *config) scenarios() []*scenario {
	const delay = 20 * time.Millisecond
	setDelay := func(p *faultproxy.Proxy) { p.SetDelay(delay) }
	blackhole := func(p *faultproxy.Proxy) { p.SetBlackhole(true) }
	var out []*scenario
	for _, g := range cfg.kinds {
		switch g {
		case groupUncontended:
			for _, n := range cfg.nodes {
				out = append(out, &scenario{name: fmt.Sprintf("N=%d", n), kind: uncontended, nodes: n})
			}
		case groupFaults:
			out = append(out,
				&scenario{name: "N=5, 1 node +20ms", kind: uncontended, nodes: 5, slow: 1, fault: setDelay, faultTarget: true},
				&scenario{name: "N=5, 2 nodes +20ms", kind: uncontended, nodes: 5, slow: 2, fault: setDelay},
				&scenario{name: "N=5, 1 node blackholed", kind: uncontended, nodes: 5, slow: 1, fault: blackhole, faultTarget: true},
			)
		case groupNetwork:
			// Masters in the client's zone (1 ms), in another region (10
			// ms), across a continent (60 ms), and five spread over them:
			// two in the client's region, one in a neighbouring region and
			// two far away, whose quorum of three waits for the 10 ms one.
			for _, nw := range []struct {
				name string
				ms   []int
			}{
				{"N=3, +1ms", []int{1, 1, 1}},
				{"N=3, +10ms", []int{10, 10, 10}},
				{"N=3, +60ms", []int{60, 60, 60}},
				{"N=5, +1/1/10/60/60ms", []int{1, 1, 10, 60, 60}},
			} {
				links := make([]time.Duration, len(nw.ms))
				for i, ms := range nw.ms {
					links[i] = time.Duration(ms) * time.Millisecond
				}
				out = append(out, &scenario{name: nw.name, kind: network, nodes: len(links), links: links})
			}
		case groupContention:
			for _, n := range []int{1, 5} {
				for _, g := range []int{16, 64} {
					out = append(out, &scenario{name: fmt.Sprintf("N=%d, %d goroutines, 1 key", n, g),
						kind: contention, nodes: n, goroutines: g, hold: cfg.hold})
				}
			}
		case groupMultiProc:
			out = append(out, &scenario{name: fmt.Sprintf("N=5, %d processes × 4 goroutines, 1 key", cfg.procs),
				kind: multiProc, nodes: 5, goroutines: 4, procs: cfg.procs, hold: cfg.hold})
		case groupManyKeys:
			for _, n := range []int{1, 5} {
				for _, g := range cfg.keyWorkers {
					out = append(out, &scenario{name: fmt.Sprintf("N=%d, %s, a key each", n, plural(g, "goroutine")),
						kind: manyKeys, nodes: n, goroutines: g})
				}
			}
		}
	}
	return out
}

// plural is "1 goroutine" or "n goroutines".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// sample is what one contender measured in one scenario.
type sample struct {
	lib string
	// lat: per Acquire+Release when uncontended or on many keys; the
	// handoff wait (a release starting to the next acquire returning) under
	// contention.
	lat []time.Duration
	// wait: under contention, each acquirer's wait from calling Acquire
	// to getting the lock, and each wait still open when its slice ended,
	// as long as it had lasted.
	wait []time.Duration
	// cmds and nodeCPU: what the nodes did for nodeOps of this library's
	// operations (its slices; uncontended, its allocation batches): calls
	// per command (INFO commandstats deltas, commands run by scripts
	// included) and CPU time (INFO cpu), summed over the nodes.
	cmds    map[string]int64
	nodeCPU time.Duration
	nodeOps int
	// shares: multiProc, the acquisitions of each worker process.
	shares   []int
	ops      int           // completed Acquire+Release
	busy     time.Duration // wall time spent in the measured batches
	mallocs  uint64        // heap allocations during the uncontended allocation batch
	allocOps int           // Acquire+Release in that batch
	failures int           // acquires or releases that failed
	overlaps int           // acquisitions while another holder held the lock
	firstErr error
	stopped  bool // the time budget ended its rounds early
}

// addNodes adds what the nodes did during ops operations; nothing when
// they were not read.
func (s *sample) addNodes(d *nodeUse, ops int) {
	if d == nil {
		return
	}
	if s.cmds == nil {
		s.cmds = make(map[string]int64)
	}
	for k, v := range d.calls {
		s.cmds[k] += v
	}
	s.nodeCPU += d.cpu
	s.nodeOps += ops
}

type result struct {
	sc      *scenario
	samples []*sample // in contender order
}

func (r *result) get(lib string) *sample {
	for _, s := range r.samples {
		if s.lib == lib {
			return s
		}
	}
	return nil
}

// run starts the nodes, runs every scenario and stops the nodes.
func run(ctx context.Context, cfg config) ([]*result, error) {
	maxNodes := 0
	scs := cfg.scenarios()
	for _, sc := range scs {
		maxNodes = max(maxNodes, sc.nodes)
	}
	if len(scs) == 0 {
		return nil, errors.New("no scenario selected")
	}
	servers, err := redistest.Start(maxNodes)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	var results []*result
	for _, sc := range scs {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		cfg.logf("scenario %s", sc.name)
		run := runScenario
		if sc.kind == multiProc {
			run = runMultiProc
		}
		r, err := run(ctx, cfg, servers, sc)
		if err != nil {
			return results, fmt.Errorf("%s: %w", sc.name, err)
		}
		results = append(results, r)
	}
	return results, nil
}

func (cfg *config) logf(format string, args ...any) {
	if cfg.progress != nil {
		fmt.Fprintf(cfg.progress, format+"\n", args...)
	}
}

// entrant is one contender set up for one scenario.
type entrant struct {
	c       contender
	clients []*redis.Client
	l       locker
	s       *sample
	keys    []string // uncontended key ring
	next    int      // next key in the ring
	spent   time.Duration
}

// allocSettle is how long background work is given to finish around an
// allocation batch: past the 50 ms node deadline.
const (
	allocSettle  = 60 * time.Millisecond
	allocBatches = 3
)

// warmupTime bounds a contender's warm-up, however few of its cfg.warmup
// operations it has run: near nodes take them in milliseconds, while over
// 60 ms links each takes two round trips of it, and a library whose
// defaults fail there may take seconds a try.
const warmupTime = 2 * time.Second

// keyRing is long enough that a key is used again only seconds after its
// release, when any part of it left to the background is long done.
const keyRing = 1 << 14

func runScenario(ctx context.Context, cfg config, servers []*redistest.Server, sc *scenario) (res *result, err error) {
	addrs := make([]string, sc.nodes)
	var proxies []*faultproxy.Proxy
	for i := range addrs {
		addrs[i] = servers[i].Addr()
		if i < sc.slow || i < len(sc.links) {
			p, err := faultproxy.New(addrs[i])
			if err != nil {
				return nil, err
			}
			proxies = append(proxies, p)
			addrs[i] = p.Addr()
			if i < len(sc.links) {
				p.SetDelay(sc.links[i])
				p.SetJitter(linkJitter(sc.links[i]))
			}
		}
	}
	var entrants []*entrant
	defer func() {
		// Proxies first: closing them ends the calls stuck on a blackholed
		// node, so the libraries' own shutdown does not wait for go-redis's
		// read timeout.
		for _, p := range proxies {
			_ = p.Close()
		}
		for _, e := range entrants {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if cerr := e.l.close(cctx); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w", e.c.name, cerr)
			}
			cancel()
			for _, c := range e.clients {
				_ = c.Close()
			}
		}
	}()

	// The nodes are read directly, not through a faulted node's proxy.
	direct := make([]string, sc.nodes)
	for i := range direct {
		direct[i] = servers[i].Addr()
	}
	stats := newNodeStats(ctx, direct)
	defer stats.close()

	res = &result{sc: sc}
	for _, c := range contenders() {
		if !sc.runs(c) {
			continue
		}
		e := &entrant{c: c, s: &sample{lib: c.name}}
		for _, a := range addrs {
			e.clients = append(e.clients, newClient(a, cfg.ctxTimeout))
		}
		if e.l, err = c.open(e.clients, sc); err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		e.keys = make([]string, keyRing)
		for i := range e.keys {
			e.keys[i] = "cmp:" + sc.name + ":" + c.name + ":" + strconv.Itoa(i)
		}
		entrants = append(entrants, e)
		res.samples = append(res.samples, e.s)
	}

	// Warm up: connections made, scripts cached, code paths hot, and the
	// links' latency learned by the libraries that learn it.
	// A warm-up operation may fail on a loaded machine (a cold dial against a
	// 50 ms deadline); only a contender that never succeeds is an error, and
	// on links it is a finding instead: its defaults do not reach nodes that
	// far, which its row shows, and it is measured no further.
	measured := make([]*entrant, 0, len(entrants))
	for _, e := range entrants {
		var firstErr error
		good, tries := 0, 0
		for begin := time.Now(); tries < cfg.warmup && time.Since(begin) < warmupTime; tries++ {
			if err := e.once(ctx); err != nil {
				firstErr = firstNonNil(firstErr, err)
			} else {
				good++
			}
		}
		switch {
		case good > 0:
			measured = append(measured, e)
		case sc.kind == network:
			e.s.failures, e.s.firstErr = tries, fmt.Errorf("warm-up: %w", firstErr)
			cfg.logf("  %-16s failed every warm-up operation: %v", e.c.name, firstErr)
		default:
			return nil, fmt.Errorf("%s: warm-up: %w", e.c.name, firstErr)
		}
	}
	if sc.fault != nil {
		for _, p := range proxies {
			sc.fault(p)
		}
	}
	runtime.GC()

	if sc.kind == uncontended || sc.kind == network {
		if err := interleave(ctx, cfg, measured); err != nil {
			return nil, err
		}
	}
	// Allocations are counted in a batch per contender afterwards: in the
	// interleaved loop one contender's background work (late replies,
	// deletes) would be counted against the next. On links they are not:
	// the network group measures latency, and batches over every link
	// would take a minute more for figures the uncontended group has.
	if sc.kind == uncontended {
		for _, e := range measured {
			if !e.s.stopped {
				e.countAllocs(ctx, cfg, stats)
			}
		}
	}
	for round := range cfg.rounds {
		if sc.kind == uncontended || sc.kind == network {
			break
		}
		// Rotate who goes first, so that no contender always follows the
		// same neighbour or always meets the same phase of the machine's load.
		for i := range measured {
			e := measured[(round+i)%len(measured)]
			if e.spent >= cfg.budget {
				e.s.stopped = true
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			start := time.Now()
			before, ops := stats.snapshot(ctx), e.s.ops
			switch sc.kind {
			case contention:
				e.contention(ctx, cfg, sc, round)
			case manyKeys:
				e.manyKeys(ctx, cfg, sc, round)
			}
			e.s.addNodes(stats.since(ctx, before), e.s.ops-ops)
			e.spent += time.Since(start)
		}
	}
	for _, e := range entrants {
		cfg.logf("  %-16s ops=%d failures=%d spent=%v", e.c.name, e.s.ops, e.s.failures, e.spent.Round(time.Millisecond))
	}
	return res, nil
}

// newClient is the one go-redis configuration used for every library: the
// defaults users get, apart from the address and, by flag, context deadlines.
func newClient(addr string, ctxTimeout bool) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: ctxTimeout})
}

// once takes and releases the next key of the ring.
func (e *entrant) once(ctx context.Context) error {
	key := e.keys[e.next%len(e.keys)]
	e.next++
	h, err := e.l.lock(ctx, key)
	if err != nil {
		return err
	}
	return e.l.unlock(ctx, h)
}

// interleave measures the uncontended latency: each iteration runs one
// Acquire+Release of every contender, in a fresh random order, so that the
// machine's load at any moment hits all of them alike. A round is cfg.ops
// iterations, or cfg.roundTime per contender, whichever comes first.
func interleave(ctx context.Context, cfg config, entrants []*entrant) error {
	order := make([]*entrant, len(entrants))
	copy(order, entrants)
	for range cfg.rounds {
		roundEnd := time.Now().Add(cfg.roundTime * time.Duration(len(entrants)))
		for range cfg.ops {
			if err := ctx.Err(); err != nil {
				return err
			}
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, e := range order {
				if e.spent >= cfg.budget {
					e.s.stopped = true
					continue
				}
				start := time.Now()
				err := e.once(ctx)
				d := time.Since(start)
				e.spent += d
				e.s.busy += d
				if err != nil {
					e.s.failures++
					e.s.firstErr = firstNonNil(e.s.firstErr, err)
					continue
				}
				e.s.lat = append(e.s.lat, d)
				e.s.ops++
			}
			if time.Now().After(roundEnd) {
				break
			}
		}
	}
	return nil
}

// countAllocs runs Acquire+Release in allocBatches batches, each cfg.ops
// times or for cfg.roundTime, and records the heap allocations per operation
// of the batch with the fewest: every allocation in the process is counted,
// and whatever else ran (go-redis's own upkeep, the late work of the library
// before) can only add to a batch. What the nodes did is read around each
// batch, outside the allocation count, and summed over the batches.
func (e *entrant) countAllocs(ctx context.Context, cfg config, stats *nodeStats) {
	best, bestOps := uint64(0), 0
	for range allocBatches {
		// Let earlier late replies and background deletes finish first.
		time.Sleep(allocSettle)
		nodesBefore := stats.snapshot(ctx)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		deadline := time.Now().Add(cfg.roundTime)
		ops := 0
		for ops < cfg.ops {
			if err := e.once(ctx); err == nil {
				ops++
			}
			if time.Now().After(deadline) {
				break
			}
		}
		// This library's own late work (the calls a quorum did not wait
		// for) belongs to its count.
		time.Sleep(allocSettle)
		runtime.ReadMemStats(&after)
		e.s.addNodes(stats.since(ctx, nodesBefore), ops)
		n := after.Mallocs - before.Mallocs
		if ops > 0 && (bestOps == 0 || float64(n)/float64(ops) < float64(best)/float64(bestOps)) {
			best, bestOps = n, ops
		}
	}
	e.s.allocOps, e.s.mallocs = bestOps, best
}

// contention has sc.goroutines compete for one key for cfg.sliceTime, each
// retrying the library's way and holding the lock for sc.hold. It records
// the handoff, from the moment a holder starts to release to the moment the
// next holder's acquire returns, and each acquirer's wait.
func (e *entrant) contention(ctx context.Context, cfg config, sc *scenario, round int) {
	key := "cmp:" + sc.name + ":" + e.c.name + ":round" + strconv.Itoa(round)
	c := benchkit.Contend(ctx, benchkit.Run{Goroutines: sc.goroutines, Duration: cfg.sliceTime, Hold: sc.hold},
		func(ctx context.Context) (any, error) { return e.l.lock(ctx, key) }, e.l.unlock)
	s := e.s
	s.lat = append(s.lat, c.Handoffs...)
	s.wait = append(s.wait, c.Waits...)
	s.wait = append(s.wait, c.OpenWaits...)
	s.ops += c.Acquired
	s.failures += c.Failures
	s.overlaps += c.Overlaps
	s.firstErr = firstNonNil(s.firstErr, c.FirstErr)
	s.busy += cfg.sliceTime
}

// manyKeys has sc.goroutines take and release a key each, over and over,
// for cfg.sliceTime.
func (e *entrant) manyKeys(ctx context.Context, cfg config, sc *scenario, round int) {
	keys := make([]string, sc.goroutines)
	for g := range keys {
		keys[g] = "cmp:" + sc.name + ":" + e.c.name + ":round" + strconv.Itoa(round) + ":" + strconv.Itoa(g)
	}
	begin := time.Now()
	p := benchkit.ManyKeys(ctx, benchkit.Run{Goroutines: sc.goroutines, Duration: cfg.sliceTime}, func(ctx context.Context, g int) error {
		h, err := e.l.lock(ctx, keys[g])
		if err != nil {
			return err
		}
		return e.l.unlock(ctx, h)
	})
	s := e.s
	s.lat = append(s.lat, p.Latencies...)
	s.ops += len(p.Latencies)
	s.failures += p.Failures
	s.firstErr = firstNonNil(s.firstErr, p.FirstErr)
	s.busy += time.Since(begin)
}

// firstNonNil returns the first non-nil error.
func firstNonNil(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
