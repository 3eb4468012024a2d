package redlock_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
)

// Writes that land late (docs/late-writes.md): every write a Lock sends
// carries the node-clock time after which it changes nothing, so a copy
// held in the network, in a stopped node's socket or behind a hot key
// cannot land after its Lock's delete, however long it is held. The tests
// below each hold a write until its Lock's delete ran, then let it land:
// no value of a released Lock, of a failed attempt, or of a waiter handed
// the key, may stay on a node.

// scriptRuns watches server i (MONITOR, on a connection of its own) and
// returns how many times it has run the script that file ends since, live,
// and a function that stops watching.
func (e *env) scriptRuns(i int, file string) (runs func() int, stop func()) {
	e.t.Helper()
	sha := scriptSHA(e.t, file)
	conn, err := net.DialTimeout("tcp", e.servers[i].Addr(), 5*time.Second)
	require.NoError(e.t, err)
	rd := bufio.NewReader(conn)
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(e.t, err)
	line, err := rd.ReadString('\n')
	require.NoError(e.t, err)
	require.Equal(e.t, "+OK\r\n", line)
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		want := []byte(`"evalsha" "` + string(sha) + `"`)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				return
			}
			if bytes.Contains(line, want) {
				n.Add(1)
			}
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = conn.Close()
			wg.Wait()
		})
	}
	e.t.Cleanup(stop)
	return func() int { return int(n.Load()) }, stop
}

// awaitRuns waits until runs reports at least n.
func awaitRuns(t *testing.T, runs func() int, n int, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return runs() >= n }, 10*time.Second, time.Millisecond, "%s: %d runs, want %d", what, runs(), n)
}

// holdDeleteOf arms node i's proxy to hold the next delete (a Release or a
// rollback of one key) of token's Lock.
func holdDeleteOf(t *testing.T, e *env, i int, token string) <-chan struct{} {
	sha, tok := scriptSHA(t, "release_one.lua"), []byte(token)
	return e.proxies[i].HoldNextMatch(func(b []byte) bool { return bytes.Contains(b, sha) && bytes.Contains(b, tok) }, false)
}

// handoverOffered starts, while a holds key, an Acquire of key on c that
// waits for it, and returns once the Acquire waits with its offer posted:
// a's Release will hand it the key (handover.go). The Acquire's Lock comes
// on the channel, its error on the other.
func handoverOffered(t *testing.T, e *env, c *redlock.Client, ctx context.Context, key string) (<-chan *redlock.Lock, <-chan error) {
	t.Helper()
	got, failed := make(chan *redlock.Lock, 1), make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, key, resendTTL)
		if err != nil {
			failed <- err
			return
		}
		got <- l
	}()
	e.awaitSubscribers(key, 1)
	time.Sleep(200 * time.Millisecond) // refused once: it waits at the head of its queue
	return got, failed
}

// TestLateHandoverCopy: a Release hands the key to a waiter of its Client
// (handover.lua). The handover's write to node 2 is held, and so is the
// leaving Lock's own delete there. The waiter holds on nodes 0 and 1 and is
// released; its delete reaches node 2 first, where the leaving Lock's value
// still is. Then the handover lands. It wrote the released waiter's value
// back for its whole TTL: handover.lua's first branch, the leaving Lock's
// value still there, took no notice of what refuses the waiter's writes.
func TestLateHandoverCopy(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			c := e.client(slowRetry)
			ctx := t.Context()
			key := newKey(t)
			a, err := c.Acquire(ctx, key, resendTTL)
			require.NoError(t, err)
			e.awaitHolders(key, a.Token())
			got, failed := handoverOffered(t, e, c, ctx, key)

			releases, stopR := e.scriptRuns(2, "release_one.lua")
			defer stopR()
			handovers, stopH := e.scriptRuns(2, "handover.lua")
			defer stopH()
			caught := e.proxies[2].HoldNext(scriptSHA(t, "handover.lua"))
			require.NoError(t, a.Release(ctx))
			waitClosed(t, caught, "the handover to node 2 was not held")
			// The leaving Lock's delete of node 2, sent when the handover's
			// reply does not come, is held too: the waiter's gets there first.
			holdDeleteOf(t, e, 2, a.Token())
			var w *redlock.Lock
			select {
			case w = <-got:
			case err := <-failed:
				t.Fatalf("the waiter was not handed the key: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter never acquired")
			}
			require.NoError(t, w.Release(ctx))
			awaitRuns(t, releases, 1, "the waiter's delete on node 2")
			require.True(t, e.proxies[2].ReleaseFirst())
			awaitRuns(t, handovers, 1, "the held handover on node 2")
			e.proxies[2].ReleaseHeld()
			noValueOf(t, e, key, w.Token())
			noValueOf(t, e, key, a.Token())
			l, err := e.client().TryAcquire(ctx, key, time.Second)
			require.NoError(t, err, "the key is locked out: %q", e.rawValues(key))
			require.NoError(t, l.Release(ctx))
		})
	}
}

// TestLateHandoverAfterFailedHandover: the handover's writes to nodes 1
// and 2 are held, so the round fails with node 0 alone, and the waiter's
// Acquire gives up (its context ends). Its rollback reaches nodes 1 and 2,
// where the leaving Lock's value still is (its own deletes there are
// held). Then the handover's copies land: they wrote the value of an
// Acquire that failed on a majority, for its whole TTL, and nobody could
// take the key.
func TestLateHandoverAfterFailedHandover(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			c := e.client(slowRetry)
			ctx := t.Context()
			key := newKey(t)
			a, err := c.Acquire(ctx, key, resendTTL)
			require.NoError(t, err)
			e.awaitHolders(key, a.Token())
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, failed := handoverOffered(t, e, c, wctx, key)

			var releases, handovers [3]func() int
			var caught [3]<-chan struct{}
			for _, i := range []int{1, 2} {
				var stop func()
				releases[i], stop = e.scriptRuns(i, "release_one.lua")
				defer stop()
				handovers[i], stop = e.scriptRuns(i, "handover.lua")
				defer stop()
				caught[i] = e.proxies[i].HoldNext(scriptSHA(t, "handover.lua"))
			}
			released := make(chan error, 1)
			go func() { released <- a.Release(context.Background()) }()
			for _, i := range []int{1, 2} {
				waitClosed(t, caught[i], fmt.Sprintf("the handover to node %d was not held", i))
				holdDeleteOf(t, e, i, a.Token())
			}
			cancel()
			select {
			case err := <-failed:
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter's Acquire did not give up")
			}
			for _, i := range []int{1, 2} {
				awaitRuns(t, releases[i], 1, fmt.Sprintf("the waiter's rollback on node %d", i))
			}
			for _, i := range []int{1, 2} {
				require.True(t, e.proxies[i].ReleaseFirst())
				awaitRuns(t, handovers[i], 1, fmt.Sprintf("the held handover on node %d", i))
			}
			for _, i := range []int{1, 2} {
				e.proxies[i].ReleaseHeld()
			}
			<-released
			l, err := e.client().TryAcquire(ctx, key, time.Second)
			require.NoError(t, err, "the key is locked out: %q", e.rawValues(key))
			require.NoError(t, l.Release(ctx))
		})
	}
}

// TestLateCopyPastManyHolders: a TryAcquire's writes to nodes 1 and 2 are
// held, so it fails, and its rollback reaches them first. Then other Locks
// take the key and release it, one after another, eight of them, or
// (refused) seven other attempts roll back past a holder's value; then the
// held copies land. Refusals kept as entries, eight at most, had all been
// pushed out by then: the failed attempt's value took a majority for its
// whole TTL.
func TestLateCopyPastManyHolders(t *testing.T) {
	for _, cc := range clientConfigs {
		for _, refused := range []bool{false, true} {
			name := cc.name + "/holders"
			if refused {
				name = cc.name + "/refused-attempts"
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, 3, cc.o)
				c, others := e.client(), e.client()
				ctx := t.Context()
				key := newKey(t)
				var holder *redlock.Lock
				if refused {
					var err error
					holder, err = others.Acquire(ctx, key, resendTTL)
					require.NoError(t, err)
					e.awaitHolders(key, holder.Token())
				}
				var runs [3]func() int
				var caught [3]<-chan struct{}
				for _, i := range []int{1, 2} {
					var stop func()
					runs[i], stop = e.scriptRuns(i, "release_one.lua")
					defer stop()
					caught[i] = e.proxies[i].HoldNext([]byte(key))
				}
				_, err := c.TryAcquire(ctx, key, resendTTL)
				require.ErrorIs(t, err, redlock.ErrNotAcquired)
				for _, i := range []int{1, 2} {
					waitClosed(t, caught[i], fmt.Sprintf("node %d's write was not held", i))
					awaitRuns(t, runs[i], 1, fmt.Sprintf("the rollback on node %d", i))
				}
				token := holderOfWritten(t, e, 1, key)
				if refused {
					// Their writes reach nodes 1 and 2 after their node
					// deadline: unknown there, so each rolls back there too,
					// and finds the holder's value.
					hasty := e.client(redlock.WithNodeTimeout(20 * time.Millisecond))
					for _, i := range []int{1, 2} {
						e.proxies[i].SetDelay(60 * time.Millisecond)
					}
					for range 7 {
						_, err := hasty.TryAcquire(ctx, key, resendTTL)
						require.ErrorIs(t, err, redlock.ErrNotAcquired)
					}
					for _, i := range []int{1, 2} {
						awaitRuns(t, runs[i], 8, fmt.Sprintf("the refused attempts' rollbacks on node %d", i))
						e.proxies[i].SetDelay(0)
					}
					quiet(t, hasty)
					require.NoError(t, holder.Release(ctx))
				} else {
					for range 8 {
						l, err := others.Acquire(ctx, key, resendTTL)
						require.NoError(t, err)
						require.NoError(t, l.Release(ctx))
					}
				}
				quiet(t, others)
				for _, i := range []int{1, 2} {
					landHeld(t, e, i)
				}
				noValueOf(t, e, key, token)
				l, err := others.TryAcquire(ctx, key, time.Second)
				require.NoError(t, err, "the key is locked out: %q", e.rawValues(key))
				require.NoError(t, l.Release(ctx))
			})
		}
	}
}

// TestLateWritesUnderJitter: sixteen goroutines take one key in turn while
// node 2's link delays every request by 50 to 500 ms, drawn afresh for
// each (default options: the node deadline is 50 ms). Many writes reach
// node 2 after their attempt's rollback or their Lock's Release was sent,
// and some after it ran there. None of those may change the key: node 2's
// MONITOR stream is read as it runs, and a Lock's value written by a
// script after a delete of that Lock's generation ran (release.lua) is a
// write that landed after its delete. At the end no value may stay.
func TestLateWritesUnderJitter(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			c, err := redlock.New(e.nodes)
			require.NoError(t, err)
			require.NoError(t, c.Warm(t.Context()))
			t.Cleanup(func() { e.settle(c) })
			key := newKey(t)
			late := e.lateWritesSeen(2, key)
			e.proxies[2].SetDelay(50 * time.Millisecond)
			e.proxies[2].SetJitter(450 * time.Millisecond)
			ctx, stop := context.WithTimeout(t.Context(), 20*time.Second)
			defer stop()
			var wg sync.WaitGroup
			var held atomic.Int64
			for g := range 16 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for ctx.Err() == nil {
						var l *redlock.Lock
						var err error
						if g%2 == 0 {
							l, err = c.TryAcquire(ctx, key, 10*time.Second)
						} else {
							actx, cancel := context.WithTimeout(ctx, time.Duration(50+rng.IntN(450))*time.Millisecond)
							l, err = c.Acquire(actx, key, 10*time.Second)
							cancel()
						}
						if err != nil {
							time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
							continue
						}
						held.Add(1)
						time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
						_ = l.Release(context.Background())
					}
				})
			}
			wg.Wait()
			// What is still in node 2's link lands with the delay it drew.
			time.Sleep(600 * time.Millisecond)
			e.proxies[2].Reset()
			quiet(t, c)
			deletes, found := late()
			t.Logf("%d holds; node 2 ran deletes of %d Locks", held.Load(), deletes)
			require.Positive(t, held.Load())
			require.Positive(t, deletes)
			assert.Empty(t, found, "writes that landed on node 2 after their Lock's delete there")
			require.Eventually(t, func() bool {
				for i := range e.direct {
					if e.value(i, key) != "" {
						return false
					}
				}
				return true
			}, 3*time.Second, 10*time.Millisecond, "a lock's value stayed after every Lock's delete: %q", e.rawValues(key))
		})
	}
}

// lateWritesSeen watches server i (MONITOR) for writes of a lock's value
// under key that a script made after a delete of the same Lock, up to
// that value's generation, ran there. It returns a function that stops
// watching and returns how many Locks' deletes ran and what was found.
func (e *env) lateWritesSeen(i int, key string) func() (int, []string) {
	e.t.Helper()
	release := `"evalsha" "` + string(scriptSHA(e.t, "release_one.lua")) + `"`
	conn, err := net.DialTimeout("tcp", e.servers[i].Addr(), 5*time.Second)
	require.NoError(e.t, err)
	rd := bufio.NewReaderSize(conn, 1<<20)
	_, err = conn.Write([]byte("MONITOR\r\n"))
	require.NoError(e.t, err)
	line, err := rd.ReadString('\n')
	require.NoError(e.t, err)
	require.Equal(e.t, "+OK\r\n", line)
	prefix := regexp.MustCompile(`^[A-Z2-7]{26}(~[A-Za-z0-9]+)?\.$`)
	deleted := make(map[string]uint64) // a Lock's prefix: the highest generation its deletes covered
	var found []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			args := monitorArgs(line)
			switch {
			case strings.Contains(line, release):
				for k, a := range args {
					if prefix.MatchString(a) && k+2 < len(args) {
						gone, _ := strconv.ParseUint(args[k+2], 10, 64)
						deleted[a] = max(deleted[a], gone)
						break
					}
				}
			case strings.Contains(line, " lua] ") && len(args) >= 3 && strings.EqualFold(args[0], "set") && args[1] == key:
				v, _, _ := strings.Cut(args[2], ",") // what an earlier version carried
				v, _, _ = strings.Cut(v, "|")        // what an owner's takeover replaced
				if dot := strings.LastIndexByte(v, '.'); dot > 0 {
					gen, err := strconv.ParseUint(v[dot+1:], 10, 64)
					if g, ok := deleted[v[:dot+1]]; ok && err == nil && gen <= g {
						found = append(found, fmt.Sprintf("%s after its delete of generations up to %d", v, g))
					}
				}
			}
		}
	})
	return func() (int, []string) {
		time.Sleep(100 * time.Millisecond) // the monitor's last lines
		_ = conn.Close()
		wg.Wait()
		return len(deleted), found
	}
}

// monitorArgs is the quoted arguments of a MONITOR line, unescaped as far
// as a lock's keys and values need (they hold no quote or backslash).
func monitorArgs(line string) []string {
	var out []string
	for {
		i := strings.IndexByte(line, '"')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(line[i+1:], '"')
		if j < 0 {
			return out
		}
		out = append(out, line[i+1:i+1+j])
		line = line[i+j+2:]
	}
}

// TestStoppedNodeRunsLateAcquire: nodes 1 and 2 are stopped (SIGSTOP, as
// a VM pause or a fork under memory pressure stops a server) while a
// TryAcquire of a 2-hour lock writes to them: its writes wait in their
// sockets. The attempt fails on node 0 alone; its rollback cannot reach
// them, and Close gives it up. When the nodes continue they run what sat in
// their sockets: the acquire landed and held the key on a majority for
// 1 h 59 min, the incident this library was written for.
func TestStoppedNodeRunsLateAcquire(t *testing.T) {
	for _, cc := range clientConfigs {
		t.Run(cc.name, func(t *testing.T) {
			e := newEnv(t, 3, cc.o)
			c, err := redlock.New(e.nodes)
			require.NoError(t, err)
			require.NoError(t, c.Warm(t.Context()))
			ctx := t.Context()
			key := newKey(t)
			before := [3]int{}
			for _, i := range []int{1, 2} {
				before[i] = e.calls(i, "evalsha")
				require.NoError(t, e.servers[i].Pause())
				t.Cleanup(func() { _ = e.servers[i].Resume() })
			}
			_, err = c.TryAcquire(ctx, key, 2*time.Hour)
			require.ErrorIs(t, err, redlock.ErrNotAcquired)
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_ = c.Close(cctx) // gives up the rollback's deletes to the stopped nodes
			cancel()
			for _, i := range []int{1, 2} {
				require.NoError(t, e.servers[i].Resume())
			}
			for _, i := range []int{1, 2} {
				require.Eventually(t, func() bool { return e.calls(i, "evalsha") > before[i] },
					10*time.Second, 5*time.Millisecond, "node %d never ran the acquire that sat in its socket", i)
			}
			for i := range e.direct {
				v := e.bed.Get(i, key)
				assert.True(t, v == "" || strings.HasPrefix(v, "!"), "node %d holds %q, %v left", i, v, e.direct[i].PTTL(ctx, key).Val())
			}
		})
	}
}
