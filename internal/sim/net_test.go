package sim

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneNode is a node behind the network, in the calling bubble, and a
// go-redis client of client 0 with default options through it.
func oneNode(t *testing.T, latency time.Duration) (*Node, *Network, *redis.Client) {
	t.Helper()
	nd := NewNode(0, rand.New(rand.NewPCG(1, 2)), NewTrace())
	nw := NewNetwork(NetConfig{Latency: latency, QueueBytes: 1 << 20}, []*Node{nd}, 1, nil)
	c := redis.NewClient(&redis.Options{
		Addr:                     "10.0.0.1:6379",
		Dialer:                   func(ctx context.Context, _, _ string) (net.Conn, error) { return nw.Dial(ctx, 0, 0) },
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	t.Cleanup(func() {
		_ = c.Close()
		nd.Close()
		time.Sleep(5 * time.Second) // go-redis's background dials end
	})
	return nd, nw, c
}

// TestHoldResetResends is the fault the tombstones were made for, with go-redis
// alone: the SET's bytes are held back, its connection is reset under the
// client, go-redis sends it again on a new connection and gets OK; the key
// is deleted; then the first copy lands and sets the key again.
func TestHoldResetResends(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, nw, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		require.NoError(t, c.Ping(ctx).Err()) // a warm connection
		nw.HoldNext(0, 0, 300*time.Millisecond, 2*time.Millisecond)
		start := time.Now()
		require.NoError(t, c.Set(ctx, "k", "first", 0).Err(), "go-redis sends it again and gets OK")
		assert.Less(t, time.Since(start), 100*time.Millisecond)
		assert.Equal(t, 1, nw.Pending(0), "the first copy is still on its way")
		require.NoError(t, c.Del(ctx, "k").Err())
		assert.Empty(t, nd.Keys("k"))
		time.Sleep(400 * time.Millisecond)
		assert.Equal(t, 0, nw.Pending(0))
		kv := nd.Keys("k")
		require.Len(t, kv, 1, "the held copy landed after the delete")
		assert.Equal(t, "first", kv[0].Value)
	})
}

// TestHoldResetNoRetries: with MaxRetries -1 the same fault is an error, as
// the resend control says.
func TestHoldResetNoRetries(t *testing.T) {
	bubble(t, func(t *testing.T) {
		_, nw, c := oneNode(t, time.Millisecond)
		c.Options().MaxRetries = -1
		c2 := redis.NewClient(c.Options())
		defer c2.Close()
		ctx := context.Background()
		require.NoError(t, c2.Ping(ctx).Err())
		nw.HoldNext(0, 0, 300*time.Millisecond, 2*time.Millisecond)
		err := c2.Set(ctx, "k", "v", 0).Err()
		require.Error(t, err)
		assert.True(t, errors.Is(err, syscall.ECONNRESET), "%v", err)
	})
}

// TestBlackholeKeepsOrder: chunks held by a blackhole arrive at its heal,
// in order, and a reader's deadline passes meanwhile.
func TestBlackholeKeepsOrder(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, nw, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		require.NoError(t, c.Ping(ctx).Err())
		nw.Blackhole(0, 0, true)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { _ = c.RPush(ctx, "l", i).Err() })
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Second)
		assert.Empty(t, nd.Keys("l"), "nothing arrives while cut")
		nw.Blackhole(0, 0, false)
		wg.Wait()
		got, err := c.LRange(ctx, "l", 0, -1).Result()
		require.NoError(t, err)
		assert.Len(t, got, 3)
	})
}

// TestDropReplies: a dropped reply leaves the client to its ReadTimeout
// (context deadline here), and the command ran.
func TestDropReplies(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, nw, c := oneNode(t, time.Millisecond)
		require.NoError(t, c.Ping(context.Background()).Err())
		nw.DropReplies(0, 0, true)
		start := time.Now()
		err := c.Set(context.Background(), "k", "v", 0).Err()
		require.Error(t, err)
		assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "go-redis waits for its ReadTimeout: %v", err)
		nw.DropReplies(0, 0, false)
		require.Len(t, nd.Keys("k"), 1, "the command ran")
	})
}

// TestFar: a far fault makes every round trip to the node take two of its
// one-way delays, each from half its base to all of it; a second fault of
// a shorter base changes nothing while the first acts, and lifting both
// brings the node's own latency back.
func TestFar(t *testing.T) {
	bubble(t, func(t *testing.T) {
		_, nw, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		ping := func() time.Duration {
			start := time.Now()
			require.NoError(t, c.Ping(ctx).Err())
			return time.Since(start)
		}
		ping() // a warm connection
		assert.LessOrEqual(t, ping(), 2*time.Millisecond, "near")
		nw.Far(0, 60*time.Millisecond, true)
		nw.Far(0, 20*time.Millisecond, true)
		for range 20 {
			rtt := ping()
			assert.GreaterOrEqual(t, rtt, 60*time.Millisecond)
			assert.LessOrEqual(t, rtt, 120*time.Millisecond)
		}
		nw.Far(0, 60*time.Millisecond, false)
		rtt := ping()
		assert.GreaterOrEqual(t, rtt, 20*time.Millisecond, "the shorter fault still acts")
		assert.LessOrEqual(t, rtt, 40*time.Millisecond)
		nw.Far(0, 20*time.Millisecond, false)
		assert.LessOrEqual(t, ping(), 2*time.Millisecond, "near again")
	})
}

// TestNodeLatencies: each seed's draw is its own, the same every time;
// the away nodes are a minority but in about one run in AwayEvery, each
// another zone's or another region's, the rest near; and the draws reach
// both kinds, up to Far.
func TestNodeLatencies(t *testing.T) {
	const runs = 4000
	cfg := Guarded(1, time.Minute)
	require.Nil(t, NodeLatencies(Config{Seed: 1, Nodes: 5, Latency: cfg.Latency}), "no Far: every node near")
	beyond, zones, regions, longest := 0, 0, 0, time.Duration(0)
	for seed := range uint64(runs) {
		cfg.Seed = seed + 1
		bases := NodeLatencies(cfg)
		require.Equal(t, bases, NodeLatencies(cfg))
		require.Len(t, bases, cfg.Nodes)
		away := 0
		for _, b := range bases {
			switch {
			case b == cfg.Latency:
				continue
			case b >= time.Millisecond && b <= 10*time.Millisecond:
				zones++
			case b >= 20*time.Millisecond && b <= cfg.Far:
				regions++
			default:
				t.Fatalf("seed %d: a base latency of %v", cfg.Seed, b)
			}
			away++
			longest = max(longest, b)
		}
		require.GreaterOrEqual(t, away, 1, "seed %d", cfg.Seed)
		require.LessOrEqual(t, away, 3, "seed %d", cfg.Seed)
		if away == 3 {
			beyond++
		}
	}
	assert.InDelta(t, runs/AwayEvery, beyond, runs/AwayEvery/4, "runs with a quorum away")
	assert.InDelta(t, zones, regions, float64(zones+regions)/10, "zones and regions as often")
	assert.Greater(t, longest, cfg.Far-5*time.Millisecond)
}

// TestCrashKeepsData: a crash with the data kept brings the keys back with
// their expiry on the node's clock, a new run_id and no scripts; a crash
// without it, nothing.
func TestCrashKeepsData(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, _, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		set := time.Now()
		require.NoError(t, c.Set(ctx, "k", "v", 10*time.Second).Err())
		require.NoError(t, c.Set(ctx, "short", "v", time.Second).Err())
		sha, err := c.ScriptLoad(ctx, "return 1").Result()
		require.NoError(t, err)
		id := nd.RunID()
		nd.Crash(true)
		_, err = c.Get(ctx, "k").Result()
		require.Error(t, err, "the node is down")
		time.Sleep(2 * time.Second)
		nd.Restart()
		kv := nd.Keys("")
		require.Len(t, kv, 1, "the short key expired while the node was down")
		assert.InDelta(t, 10*time.Second-time.Since(set), kv[0].TTL, float64(10*time.Millisecond))
		assert.NotEqual(t, id, nd.RunID())
		err = c.EvalSha(ctx, sha, nil).Err()
		assert.True(t, err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT"), "%v", err)
		nd.Crash(false)
		nd.Restart()
		assert.Empty(t, nd.Keys(""))
	})
}

// TestClockSteps: a node's clock stepped forward brings its keys' expiry
// closer, stepped back moves it away (Redis keeps an absolute expiry), and
// a rate makes its TTLs run fast.
func TestClockSteps(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, _, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		require.NoError(t, c.Set(ctx, "k", "v", 10*time.Second).Err())
		nd.Step(3 * time.Second)
		ttl := nd.Keys("k")[0].TTL
		assert.InDelta(t, 7*time.Second, ttl, float64(10*time.Millisecond))
		nd.Step(-5 * time.Second)
		ttl = nd.Keys("k")[0].TTL
		assert.InDelta(t, 12*time.Second, ttl, float64(10*time.Millisecond))
		nd.SetRate(2)
		time.Sleep(time.Second)
		ttl = nd.Keys("k")[0].TTL
		assert.InDelta(t, 10*time.Second, ttl, float64(10*time.Millisecond))
		tm, err := c.Time(ctx).Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(-time.Second), float64(time.Until(tm)), float64(10*time.Millisecond), "the node's clock: +3 s, -5 s, then a second gained at twice the rate")
	})
}

// TestPubSubIsFree: a pub/sub connection takes no time and no fault (see
// pubSubDial), so that go-redis's PubSub, which dials under its mutex,
// never stops the bubble's clock.
func TestPubSubIsFree(t *testing.T) {
	bubble(t, func(t *testing.T) {
		_, nw, c := oneNode(t, time.Millisecond)
		ctx := context.Background()
		nw.Blackhole(0, 0, true)
		ps := c.Subscribe(ctx, "ch")
		defer ps.Close()
		_, err := ps.Receive(ctx) // the subscription's confirmation, through the blackhole
		require.NoError(t, err)
		nw.Blackhole(0, 0, false)
		require.NoError(t, c.Publish(ctx, "ch", "m").Err())
		msg, err := ps.ReceiveMessage(ctx)
		require.NoError(t, err)
		assert.Equal(t, "m", msg.Payload)
	})
}

// TestConnEOF: a node's crash closes its connections: the client reads EOF
// after what was on its way.
func TestConnEOF(t *testing.T) {
	bubble(t, func(t *testing.T) {
		nd, nw, _ := oneNode(t, time.Millisecond)
		conn, err := nw.Dial(context.Background(), 0, 0)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		require.NoError(t, err)
		buf := make([]byte, 64)
		n, err := conn.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, "+PONG\r\n", string(buf[:n]))
		nd.Crash(false)
		_, err = conn.Read(buf)
		assert.ErrorIs(t, err, io.EOF)
		_, err = nw.Dial(context.Background(), 0, 0)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		nd.Restart()
	})
}

// TestWatchdog: a bubble whose clock stops (a goroutine waits on a mutex
// that a sleeping goroutine holds: time cannot pass) is reported, with
// every goroutine's stack, and the report names the seed; the watchdog
// does not wait for the bubble. The stalled bubble is then freed.
func TestWatchdog(t *testing.T) {
	var progress atomic.Int64
	reported := make(chan string, 1)
	stop := watchdog(42, "go test -run X -sim.seed=42", &progress, 200*time.Millisecond, func(s string) { reported <- s })
	defer stop()
	var mu sync.Mutex
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		synctest.Test(t, func(t *testing.T) {
			progress.Store(time.Now().UnixNano())
			mu.Lock()
			go func() {
				mu.Lock() // not durably blocked: the bubble's clock stops
				progress.Add(1)
				mu.Unlock()
			}()
			go func() {
				<-release // from outside the bubble
				mu.Unlock()
			}()
			time.Sleep(time.Second) // never ends while the mutex is wanted
		})
	}()
	select {
	case s := <-reported:
		assert.Contains(t, s, "seed 42")
		assert.Contains(t, s, "-sim.seed=42")
		assert.Contains(t, s, "goroutine ")
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog did not report the stalled bubble")
	}
	close(release)
	<-done
}

// TestStaleConnectionsWithoutPoolCheck: built for wasip1, go-redis does not
// check a pooled connection before handing it out (its check reads a unix
// socket), so after a crash every connection the node closed would fail
// one command, sent once as the library's are: a delete parked for seconds
// where Linux's client sends it at once. The simulator's clients' hook
// (staleHook) sends such a command again, since nothing of it was written
// (ErrStale). Here the client's connections hide SyscallConn, as on wasip1.
func TestStaleConnectionsWithoutPoolCheck(t *testing.T) {
	const pooled = 4
	for _, hook := range []bool{false, true} {
		t.Run(map[bool]string{false: "without the hook", true: "with the hook"}[hook], func(t *testing.T) {
			bubble(t, func(t *testing.T) {
				nd := NewNode(0, rand.New(rand.NewPCG(1, 2)), NewTrace())
				nw := NewNetwork(NetConfig{Latency: time.Millisecond, QueueBytes: 1 << 20}, []*Node{nd}, 1, nil)
				c := redis.NewClient(&redis.Options{
					Addr: "10.0.0.1:6379",
					Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
						cn, err := nw.Dial(ctx, 0, 0)
						if err != nil {
							return nil, err
						}
						return struct{ net.Conn }{cn}, nil // no SyscallConn: no pool check
					},
					MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
					PoolSize:                 pooled,
				})
				if hook {
					c.AddHook(staleHook{tries: pooled})
				}
				t.Cleanup(func() {
					_ = c.Close()
					nd.Close()
					time.Sleep(5 * time.Second) // go-redis's background dials end
				})
				ctx := context.Background()
				fillPool(t, ctx, c, pooled)
				nd.Crash(true)
				nd.Restart()
				time.Sleep(100 * time.Millisecond) // the EOF reaches the client
				failed := 0
				for range pooled + 1 {
					cmd := redis.NewStatusCmd(ctx, "ping")
					if c.Process(ctx, noRetry{cmd}) != nil {
						failed++
					}
				}
				if hook {
					assert.Zero(t, failed, "a command sent once failed on a connection the crash closed")
				} else {
					assert.Positive(t, failed, "without a pool check, the crash's connections fail commands: the gap the hook closes")
				}
			})
		})
	}
}
