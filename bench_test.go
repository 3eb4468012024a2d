package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/benchkit"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/pingfloor"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/testbed"
)

// The benchmarks run redlock alone against real redis-server processes on
// loopback; compare/ runs the same workloads (the contention and many-keys
// loops are internal/benchkit's) side by side with redsync and redislock. Every latency is also reported as a ratio to the floor: one
// parallel PING fan-out that returns when a quorum has answered, twice in a
// row (one round trip for acquire, one for release), measured in the same
// sub-benchmark on the same nodes. On a small machine the nodes share the
// CPU, so the floor itself grows with the number of nodes; the ratio is what
// says how much the library adds.
//
// Metrics: p50-ns/op and p99-ns/op are per Acquire+Release; floor-p50-ns is
// the floor; p50/floor and p99/floor divide by the floor's p50. Uncontended,
// bare-p50-ns and p50/bare are the same against the bare floor
// (pingfloor.Bare: fresh goroutines and a channel, no deadline; with faults,
// on the fast nodes only). The fault
// benchmarks put the faulted nodes behind an in-process proxy (the others are
// direct), so the floor there is the floor of the fast quorum.

const (
	benchTTL = 10 * time.Second
	// benchFloorTimeout bounds each floor fan-out the way redlock's default
	// per-node deadline (ttl/200, at most 50ms) bounds an operation.
	benchFloorTimeout = 50 * time.Millisecond
	// benchBlock is how many operations run between two stretches of floor
	// samples taken with the timer stopped, so that drift in machine load
	// hits the library and the floor alike.
	benchBlock = 64
	// benchKeys is the size of the key ring used by uncontended loops: a key
	// is used again only long after its previous release, including the
	// part a release leaves to the background.
	benchKeys = 4096
	// benchHold is the critical section under contention, as in compare/
	// and the waiting issue: a holder keeps the lock this long (spinning)
	// before it releases.
	benchHold = 100 * time.Microsecond
)

// BenchmarkAcquireRelease is one goroutine taking and releasing uncontended
// locks on N healthy nodes.
func BenchmarkAcquireRelease(b *testing.B) {
	servers := redistest.StartT(b, 7)
	for _, n := range []int{1, 3, 5, 7} {
		b.Run("nodes="+strconv.Itoa(n), func(b *testing.B) {
			benchUncontended(b, testbed.Addrs(servers[:n]), 0, nil, nil)
		})
	}
	// The same on clients with ContextTimeoutEnabled, which end a call at
	// its context's deadline themselves: redlock then runs one node's call
	// on the caller's goroutine.
	for _, n := range []int{1, 5} {
		b.Run("nodes="+strconv.Itoa(n)+",ctxtimeout", func(b *testing.B) {
			benchUncontended(b, testbed.Addrs(servers[:n]), 0, nil, nil, benchCtxTimeout)
		})
	}
}

// benchCtxTimeout sets ContextTimeoutEnabled on the lock's clients.
func benchCtxTimeout(o *redis.Options) { o.ContextTimeoutEnabled = true }

// BenchmarkAcquireReleaseFault is BenchmarkAcquireRelease on 5 nodes, some of
// which are slow or silent. Redlock's default per-node deadline for a 10s TTL
// is 50ms; it does not matter here as long as a quorum of fast nodes is left,
// because an operation returns as soon as a quorum has answered and the slow
// nodes finish in the background.
//
// The proxies outlive the runs: go-redis may still be redialling after its
// clients were closed, and would log every refused dial in the middle of the
// results.
func BenchmarkAcquireReleaseFault(b *testing.B) {
	servers := redistest.StartT(b, 5)
	cases := []struct {
		name  string
		slow  int
		apply func(*faultproxy.Proxy)
	}{
		{"delay=20ms/slow=1", 1, func(p *faultproxy.Proxy) { p.SetDelay(20 * time.Millisecond) }},
		{"delay=20ms/slow=2", 2, func(p *faultproxy.Proxy) { p.SetDelay(20 * time.Millisecond) }},
		{"blackhole/slow=1", 1, func(p *faultproxy.Proxy) { p.SetBlackhole(true) }},
	}
	for _, tc := range cases {
		addrs := testbed.Addrs(servers)
		proxies := make([]*faultproxy.Proxy, tc.slow)
		for i := range proxies {
			proxies[i] = testbed.Proxy(b, servers[i].Addr())
			addrs[i] = proxies[i].Addr()
		}
		b.Run(tc.name, func(b *testing.B) {
			benchUncontended(b, addrs, tc.slow, func() {
				for _, p := range proxies {
					tc.apply(p)
				}
			}, func() {
				// Calls stuck on a blackholed node would hold the teardown
				// until go-redis's read timeout: reset their connections,
				// and let the retries that go-redis makes go through.
				for _, p := range proxies {
					p.SetRefuse(true)
					p.Reset()
				}
			})
		})
	}
}

// BenchmarkContention has many goroutines competing for one key on 5 nodes
// with the default retry strategy, each holding it for benchHold. b.N counts
// acquisitions by all of them. handoff is the wait from the moment a holder
// starts its Release to the moment the next holder's Acquire returns: at best
// one release and one acquire round trip, so its floor is the same as an
// uncontended operation's. wait is each acquirer's, from calling Acquire to
// getting the lock.
func BenchmarkContention(b *testing.B) {
	servers := redistest.StartT(b, 5)
	for _, g := range []int{16, 64} {
		b.Run("nodes=5/goroutines="+strconv.Itoa(g), func(b *testing.B) {
			benchContention(b, testbed.Addrs(servers), g)
		})
	}
}

// BenchmarkManyKeys has 64 goroutines each taking and releasing its own key
// on 5 nodes: the throughput of a Client shared by a busy service.
func BenchmarkManyKeys(b *testing.B) {
	servers := redistest.StartT(b, 5)
	b.Run("nodes=5/goroutines=64", func(b *testing.B) {
		benchManyKeys(b, testbed.Addrs(servers), 64)
	})
}

// BenchmarkFencedAcquireRelease prices fencing: on the same 5 nodes, one
// plain and one fenced Acquire+Release alternate in each iteration, so both
// see the same machine load. extra-p50-ns is what fencing adds to an
// uncontended acquisition and its release.
func BenchmarkFencedAcquireRelease(b *testing.B) {
	nodes := benchNodes(b, 5)
	ctx := context.Background()
	plain, fenced := benchLockClient(b, nodes), benchLockClient(b, nodes, redlock.WithFencing())
	op := func(c *redlock.Client, key string) time.Duration {
		return benchTimed(b, func() (*redlock.Lock, error) { return c.Acquire(ctx, key, benchTTL) })
	}
	keys := benchKeyRing("bench:fenced:" + b.Name())
	for i := range 64 {
		op(plain, keys[i])
		op(fenced, keys[i])
	}
	var p, f []time.Duration
	b.ResetTimer()
	for i := range b.N {
		key := keys[i%len(keys)]
		if i%2 == 0 {
			p = append(p, op(plain, key))
			f = append(f, op(fenced, key))
		} else {
			f = append(f, op(fenced, key))
			p = append(p, op(plain, key))
		}
	}
	b.StopTimer()
	pp, fp := benchkit.Percentile(p, 50), benchkit.Percentile(f, 50)
	b.ReportMetric(float64(pp.Nanoseconds()), "plain-p50-ns")
	b.ReportMetric(float64(fp.Nanoseconds()), "fenced-p50-ns")
	b.ReportMetric(float64((fp - pp).Nanoseconds()), "extra-p50-ns")
}

// BenchmarkAcquireAll prices a Lock of several keys: on the same 5 nodes,
// an Acquire+Release of one key and an AcquireAll+Release of keys=k
// alternate in each iteration, so both see the same machine load. ratio is
// AcquireAll's p50 over Acquire's: one script per node takes all the keys,
// so it stays near 1 rather than growing with k.
func BenchmarkAcquireAll(b *testing.B) {
	ctx := context.Background()
	c := benchLockClient(b, benchNodes(b, 5))
	for _, k := range []int{1, 8} {
		b.Run("nodes=5/keys="+strconv.Itoa(k), func(b *testing.B) {
			ring := benchKeyRing("bench:all:" + b.Name())
			one := func(i int) time.Duration {
				return benchTimed(b, func() (*redlock.Lock, error) { return c.Acquire(ctx, ring[i%len(ring)], benchTTL) })
			}
			sets := make([][]string, len(ring))
			for i := range sets {
				for j := range k {
					sets[i] = append(sets[i], ring[(i+j)%len(ring)]+":all")
				}
			}
			all := func(i int) time.Duration {
				return benchTimed(b, func() (*redlock.Lock, error) { return c.AcquireAll(ctx, sets[i%len(sets)], benchTTL) })
			}
			benchRatio(b, one, all, "acquire-p50-ns", "all-p50-ns")
		})
	}
}

// benchNodes starts n servers and returns a go-redis client with its
// defaults on each.
func benchNodes(b *testing.B, n int) []redis.UniversalClient {
	var nodes []redis.UniversalClient
	for _, s := range redistest.StartT(b, n) {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
		b.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	return nodes
}

// benchLockClient is a lock client over nodes, warmed, closed at cleanup.
func benchLockClient(b *testing.B, nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := c.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

// benchTimed returns how long acquire and the Lock's Release took.
func benchTimed(b *testing.B, acquire func() (*redlock.Lock, error)) time.Duration {
	start := time.Now()
	l, err := acquire()
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Release(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchUncontended measures Acquire+Release in a loop, in blocks alternating
// with floor samples taken with the timer stopped. fault, if not nil, is
// applied after the warm-up, so connections exist and the scripts are loaded
// when the nodes go bad, as in production; unfault runs first at cleanup.
func benchUncontended(b *testing.B, addrs []string, slow int, fault, unfault func(), lockOpts ...func(*redis.Options)) {
	ctx := context.Background()
	rl, fl := benchSetup(b, addrs, lockOpts...)
	bare := benchBare(b, addrs[slow:], len(addrs)/2+1)
	if unfault != nil {
		b.Cleanup(unfault)
	}
	keys := benchKeyRing("bench:uncontended:" + b.Name())

	op := func(key string) error {
		l, err := rl.Acquire(ctx, key, benchTTL)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	}
	for i := range 32 {
		if err := op(keys[i]); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
		fl.Pair(ctx)
		bare.Pair()
	}
	if fault != nil {
		fault()
	}

	lat := make([]time.Duration, 0, b.N)
	floors := make([]time.Duration, 0, b.N)
	bares := make([]time.Duration, 0, b.N)
	var failed int
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(benchBlock, b.N-done)
		b.StartTimer()
		for i := range k {
			start := time.Now()
			if err := op(keys[(done+i)%len(keys)]); err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		for range k {
			floors = append(floors, fl.Pair(ctx))
			bares = append(bares, bare.Pair())
		}
		done += k
	}
	benchReportLatency(b, lat, floors)
	if len(lat) > 0 {
		f := benchkit.Percentile(bares, 50)
		b.ReportMetric(float64(f.Nanoseconds()), "bare-p50-ns")
		b.ReportMetric(float64(benchkit.Percentile(lat, 50))/float64(f), "p50/bare")
	}
	if failed > 0 {
		b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
	}
}

func benchContention(b *testing.B, addrs []string, goroutines int) {
	ctx := context.Background()
	rl, fl := benchSetup(b, addrs)
	key := "bench:contention:" + b.Name() + ":" + strconv.Itoa(b.N)
	if l, err := rl.Acquire(ctx, key, benchTTL); err != nil {
		b.Fatalf("warm-up: %v", err)
	} else if err := l.Release(ctx); err != nil {
		b.Fatalf("warm-up: %v", err)
	}

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	c := benchkit.Contend(ctx, benchkit.Run{Goroutines: goroutines, Ops: b.N, Hold: benchHold},
		func(ctx context.Context) (*redlock.Lock, error) { return rl.Acquire(ctx, key, benchTTL) },
		func(ctx context.Context, l *redlock.Lock) error { return l.Release(ctx) })
	elapsed := time.Since(start)
	b.StopTimer()

	// Two holders at once would be a bug, not a slow run: with healthy nodes
	// and a 10s TTL nothing excuses it.
	if c.Overlaps > 0 {
		b.Errorf("%d acquisitions overlapped another holder", c.Overlaps)
	}
	if c.Failures > 0 {
		b.ReportMetric(float64(c.Failures)/float64(b.N), "failed/op")
		b.Logf("first failure: %v", c.FirstErr)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "locks/s")
	if len(c.Handoffs) > 0 {
		f := benchkit.Percentile(fl.Pairs(ctx, 64), 50)
		p50, p99 := benchkit.Percentile(c.Handoffs, 50), benchkit.Percentile(c.Handoffs, 99)
		b.ReportMetric(float64(p50.Nanoseconds()), "handoff-p50-ns")
		b.ReportMetric(float64(p99.Nanoseconds()), "handoff-p99-ns")
		b.ReportMetric(float64(f.Nanoseconds()), "floor-p50-ns")
		b.ReportMetric(float64(p50)/float64(f), "handoff-p50/floor")
	}
	if len(c.Waits) > 0 {
		b.ReportMetric(float64(benchkit.Percentile(c.Waits, 50).Nanoseconds()), "wait-p50-ns")
		b.ReportMetric(float64(benchkit.Percentile(c.Waits, 99).Nanoseconds()), "wait-p99-ns")
	}
}

func benchManyKeys(b *testing.B, addrs []string, goroutines int) {
	ctx := context.Background()
	rl, fl := benchSetup(b, addrs)
	keys := make([]string, goroutines)
	for i := range keys {
		keys[i] = "bench:manykeys:" + b.Name() + ":" + strconv.Itoa(b.N) + ":" + strconv.Itoa(i)
		l, err := rl.Acquire(ctx, keys[i], benchTTL)
		if err != nil {
			b.Fatalf("warm-up: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	p := benchkit.ManyKeys(ctx, benchkit.Run{Goroutines: goroutines, Ops: b.N}, func(ctx context.Context, g int) error {
		l, err := rl.Acquire(ctx, keys[g], benchTTL)
		if err != nil {
			return err
		}
		return l.Release(ctx)
	})
	elapsed := time.Since(start)
	b.StopTimer()

	if p.Failures > 0 {
		b.ReportMetric(float64(p.Failures)/float64(b.N), "failed/op")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "locks/s")
	benchReportLatency(b, p.Latencies, fl.Pairs(ctx, 64))
}

// benchSetup makes a redlock Client and a floor over addrs, each with its own
// go-redis clients in default options (as users make them) unless lockOpts
// change the lock's, and registers
// their cleanup: the lock client is closed first so that its background work
// ends before the connections go.
func benchSetup(b *testing.B, addrs []string, lockOpts ...func(*redis.Options)) (*redlock.Client, *pingfloor.Floor) {
	b.Helper()
	lockNodes := make([]redis.UniversalClient, len(addrs))
	for i, c := range testbed.Dial(b, addrs, func(o *redis.Options) {
		for _, f := range lockOpts {
			f(o)
		}
	}) {
		lockNodes[i] = c
	}
	floorNodes := testbed.Dial(b, addrs, nil)
	rl, err := redlock.New(lockNodes)
	if err != nil {
		b.Fatal(err)
	}
	fl := pingfloor.New(floorNodes, benchFloorTimeout)
	// Registered after the clients' cleanup, so it runs before it.
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rl.Close(ctx); err != nil {
			b.Errorf("closing the lock client: %v", err)
		}
		fl.Wait()
	})
	return rl, fl
}

// benchBare is the bare floor (pingfloor.Bare) over addrs, the nodes that
// answer, with the quorum of the whole set.
func benchBare(b *testing.B, addrs []string, quorum int) *pingfloor.Bare {
	nodes := testbed.Dial(b, addrs, nil)
	// Registered after the clients' cleanup, so it runs before it: the
	// bare floor does not wait for its late PINGs, and closing a client
	// under one makes go-redis log.
	b.Cleanup(func() { time.Sleep(50 * time.Millisecond) })
	return pingfloor.NewBare(nodes, quorum)
}

func benchReportLatency(b *testing.B, lat, floors []time.Duration) {
	if len(lat) == 0 {
		return
	}
	p50, p99 := benchkit.Percentile(lat, 50), benchkit.Percentile(lat, 99)
	b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns/op")
	b.ReportMetric(float64(p99.Nanoseconds()), "p99-ns/op")
	if len(floors) > 0 {
		f := benchkit.Percentile(floors, 50)
		b.ReportMetric(float64(f.Nanoseconds()), "floor-p50-ns")
		b.ReportMetric(float64(p50)/float64(f), "p50/floor")
		b.ReportMetric(float64(p99)/float64(f), "p99/floor")
	}
}

func benchKeyRing(prefix string) []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return keys
}

// BenchmarkShared: a shared Acquire+Release of a free key against an
// exclusive one, interleaved on the same 5 nodes, with the p50 of each and
// their ratio; "readers=4" takes the share beside 4 live shares of others.
func BenchmarkShared(b *testing.B) {
	ctx := context.Background()
	c := benchLockClient(b, benchNodes(b, 5))
	for _, others := range []int{0, 4} {
		prepared := false // b.Run runs the function once with b.N = 1 first
		b.Run("nodes=5/readers="+strconv.Itoa(others), func(b *testing.B) {
			ring := benchKeyRing("bench:shared:" + b.Name())
			for _, k := range ring {
				if prepared {
					break
				}
				for range others {
					if _, err := c.Acquire(ctx, k+":shared", time.Hour, redlock.Shared()); err != nil { // retried: a loaded machine may time one out
						b.Fatal(err)
					}
				}
			}
			prepared = true
			one := func(i int) time.Duration {
				return benchTimed(b, func() (*redlock.Lock, error) { return c.Acquire(ctx, ring[i%len(ring)], benchTTL) })
			}
			shared := func(i int) time.Duration {
				return benchTimed(b, func() (*redlock.Lock, error) {
					return c.Acquire(ctx, ring[i%len(ring)]+":shared", benchTTL, redlock.Shared())
				})
			}
			benchRatio(b, one, shared, "acquire-p50-ns", "shared-p50-ns")
		})
	}
}

// BenchmarkPermits: TryAcquire with Permits(n) and Release on a key with
// free permits, against Acquire and Release of a free key, interleaved on
// the same 5 nodes, with the p50 of each and their ratio; held=half takes
// the permit beside n/2 held by others.
func BenchmarkPermits(b *testing.B) {
	ctx := context.Background()
	c := benchLockClient(b, benchNodes(b, 5))
	for _, n := range []int{1, 4, 16} {
		for _, held := range []string{"none", "half"} {
			if n == 1 && held == "half" {
				continue
			}
			prepared := false // b.Run runs the function once with b.N = 1 first
			b.Run("nodes=5/n="+strconv.Itoa(n)+"/held="+held, func(b *testing.B) {
				ring := benchKeyRing("bench:permits:" + b.Name())
				if held == "half" && !prepared {
					for _, k := range ring {
						for range n / 2 {
							if _, err := c.Acquire(ctx, k+":permits", time.Hour, redlock.Permits(n)); err != nil { // retried: a loaded machine may time one out
								b.Fatal(err)
							}
						}
					}
				}
				prepared = true
				one := func(i int) time.Duration {
					return benchTimed(b, func() (*redlock.Lock, error) { return c.Acquire(ctx, ring[i%len(ring)], benchTTL) })
				}
				permit := func(i int) time.Duration {
					return benchTimed(b, func() (*redlock.Lock, error) {
						k := ring[i%len(ring)] + ":permits"
						l, err := c.TryAcquire(ctx, k, benchTTL, redlock.Permits(n))
						if err != nil { // a loaded machine's timeout, in the sample: p50 is what counts
							return c.Acquire(ctx, k, benchTTL, redlock.Permits(n))
						}
						return l, nil
					})
				}
				benchRatio(b, one, permit, "acquire-p50-ns", "permit-p50-ns")
			})
		}
	}
}

// benchRatio times a(i) and z(i) b.N times each, interleaved and
// alternating which goes first, after a warm-up of 64 each, and reports
// their p50s, as nameA and nameZ, and the ratio of z's to a's.
func benchRatio(b *testing.B, a, z func(i int) time.Duration, nameA, nameZ string) {
	for i := range 64 {
		a(i)
		z(i)
	}
	var as, zs []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			as = append(as, a(i))
			zs = append(zs, z(i))
		} else {
			zs = append(zs, z(i))
			as = append(as, a(i))
		}
	}
	b.StopTimer()
	pa, pz := benchkit.Percentile(as, 50), benchkit.Percentile(zs, 50)
	b.ReportMetric(float64(pa.Nanoseconds()), nameA)
	b.ReportMetric(float64(pz.Nanoseconds()), nameZ)
	b.ReportMetric(float64(pz)/float64(pa), "ratio")
}
