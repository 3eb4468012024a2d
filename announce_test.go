package redlock_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/testbed"
)

// The tests of a waiting writer's announcement (docs/shared.md): it holds
// new readers back only while its waiter lives and waits, and readers are
// not starved by a stream of writers.

// heldBackBound is how long after a waiting writer stopped (SIGSTOP),
// was cut off or killed these tests let new readers stay refused: the
// writer's announcement lives at most its time to live from its last
// renewal (a few node timeouts plus the renewal interval, under a second
// for the writers here), and the tests share two loaded cores.
const heldBackBound = 4 * time.Second

// announceWriterEnv holds the nodes and key of a writer process
// (TestAnnounceWriterProcess); without it that test skips.
const announceWriterEnv = "REDLOCK_ANNOUNCE_WRITER"

type announceWriterConfig struct {
	Nodes []string
	Key   string
}

// TestAnnounceWriterProcess is the process of a waiting writer, which
// TestSharedWriterStopped starts and then stops or kills: it waits for an
// exclusive Lock of the key until its stdin ends, and says on stdout
// when it starts waiting and whether it got the key.
func TestAnnounceWriterProcess(t *testing.T) {
	raw := os.Getenv(announceWriterEnv)
	if raw == "" {
		t.Skip("the writer process of TestSharedWriterStopped, which starts it")
	}
	var cfg announceWriterConfig
	require.NoError(t, json.Unmarshal([]byte(raw), &cfg))
	var nodes []redis.UniversalClient
	for _, a := range cfg.Nodes {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true}))
	}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	require.NoError(t, c.Warm(ctx))
	os.Stdout.WriteString("waiting\n")
	l, err := c.Acquire(ctx, cfg.Key, time.Minute)
	if err == nil {
		os.Stdout.WriteString("acquired\n")
		_ = l.Release(context.Background())
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_ = c.Close(cctx)
}

// startWriterProcess starts TestAnnounceWriterProcess over nodes for key
// and returns it once it waits; it is killed when the test ends.
func startWriterProcess(t *testing.T, nodes []string, key string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	raw, err := json.Marshal(announceWriterConfig{Nodes: nodes, Key: key})
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestAnnounceWriterProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), announceWriterEnv+"="+string(raw))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "the writer process ended before it waited")
			if strings.HasPrefix(line, "waiting") {
				go func() { // drain, so that the process never blocks on its stdout
					for range lines {
					}
				}()
				return cmd
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the writer process did not start waiting")
		}
	}
}

// waitSignalled waits until process pid is stopped (SIGSTOP) or gone
// (SIGKILL), as /proc shows its state.
func waitSignalled(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return sig == syscall.SIGKILL // reaped
		}
		// pid (comm) state ...: comm may hold spaces, the state follows
		// the last ")".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false
		}
		state := b[i+2]
		if sig == syscall.SIGSTOP {
			return state == 'T' || state == 't'
		}
		return state == 'Z' || state == 'X'
	}, 20*time.Second, time.Millisecond, "process %d did not take %v", pid, sig)
}

// readersHeldBack waits until a new shared Lock of key is refused (a writer
// waits), releasing those admitted meanwhile.
func readersHeldBack(t *testing.T, c *redlock.Client, key string) {
	t.Helper()
	ctx := t.Context()
	require.Eventually(t, func() bool {
		l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		if err == nil {
			require.NoError(t, l.Release(ctx))
		}
		return err != nil
	}, 20*time.Second, 10*time.Millisecond, "the waiting writer did not hold new readers back")
}

// readerAdmitted tries a shared Lock of key every 20 ms until one is
// admitted or within passed, and returns how long it took since from.
func readerAdmitted(t *testing.T, c *redlock.Client, key string, from time.Time, within time.Duration) time.Duration {
	t.Helper()
	ctx := t.Context()
	for time.Since(from) < within {
		l, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
		if err == nil {
			took := time.Since(from)
			require.NoError(t, l.Release(ctx))
			return took
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(from)
}

// TestSharedWriterStopped: a process that waits for an exclusive Lock is
// stopped (SIGSTOP; its host alive, the nodes on tcp-keepalive 1, so its
// connections stay up) or killed; the key is free, as an exclusive
// TryAcquire shows. New readers are admitted again within heldBackBound:
// the stopped writer's announcement expires on the nodes' clocks.
func TestSharedWriterStopped(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			servers := redistest.StartT(t, 3, redistest.WithArgs("--tcp-keepalive", "1"))
			addrs := testbed.Addrs(servers)
			nodes := testbed.Dial(t, addrs, fastClients)
			var ucs []redis.UniversalClient
			for _, n := range nodes {
				ucs = append(ucs, n)
			}
			c, err := redlock.New(ucs, redlock.WithNodeTimeout(testNodeTimeout))
			require.NoError(t, err)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				require.NoError(t, c.Close(ctx))
			})
			ctx := t.Context()
			require.NoError(t, c.Warm(ctx))
			key := newKey(t)
			r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
			require.NoError(t, err)

			cmd := startWriterProcess(t, addrs, key)
			readersHeldBack(t, c, key)
			require.NoError(t, cmd.Process.Signal(sig))
			// The signal takes effect asynchronously: a writer still
			// running would take the key at the Release, as it should.
			waitSignalled(t, cmd.Process.Pid, sig)
			require.NoError(t, r.Release(ctx))
			stopped := time.Now()

			w, err := c.TryAcquire(ctx, key, time.Minute)
			require.NoError(t, err, "the key is free: a writer takes it at once")
			require.NoError(t, w.Release(ctx))
			took := readerAdmitted(t, c, key, stopped, 15*time.Second)
			t.Logf("readers admitted %v after the waiting writer's process got %v", took.Round(time.Millisecond), sig)
			assert.Less(t, took, heldBackBound, "readers held back by a writer whose process got %v", sig)
		})
	}
}

// TestSharedWriterCutOff: a writer that waits is cut off (every packet
// between it and the nodes dropped, as when its host dies), and a reader
// releases after that, whose release message the nodes queue for it. New
// readers are admitted again within heldBackBound.
func TestSharedWriterCutOff(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)

	its := startWaitingWriter(t, e, key)
	readersHeldBack(t, c, key)
	for _, p := range its {
		p.SetBlackhole(true)
	}
	cut := time.Now()
	require.NoError(t, r.Release(ctx)) // its message is queued for the dead subscriber
	took := readerAdmitted(t, c, key, cut, 20*time.Second)
	t.Logf("readers admitted %v after the waiting writer was cut off", took.Round(time.Millisecond))
	assert.Less(t, took, heldBackBound, "readers held back by a writer cut off from the nodes")
}

// TestReadersNotStarved: two writers take the key in turns, each holding
// it 30 ms and asking again at once, so that one always waits; a shared
// Acquire that waits still gets the key within a writer's turn or two
// (phase-fair: readers waiting when a writer releases go before the next
// writer). With the writers in two Clients, and in one (whose Release
// hands the key over to its own waiter).
func TestReadersNotStarved(t *testing.T) {
	for _, same := range []bool{false, true} {
		name := map[bool]string{false: "two-clients", true: "one-client"}[same]
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 3, fastClients)
			w1 := e.client()
			w2 := w1
			if !same {
				w2 = e.client()
			}
			readers := e.client()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			key := newKey(t)
			var turns atomic.Int64
			var writing atomic.Int32
			var overlap atomic.Bool
			var wg sync.WaitGroup
			for _, w := range []*redlock.Client{w1, w2} {
				wg.Go(func() {
					for ctx.Err() == nil {
						l, err := w.Acquire(ctx, key, 5*time.Second)
						if err != nil {
							continue
						}
						writing.Add(1)
						turns.Add(1)
						select {
						case <-time.After(30 * time.Millisecond):
						case <-ctx.Done():
						}
						writing.Add(-1)
						_ = l.Release(context.Background())
					}
				})
			}
			require.Eventually(t, func() bool { return turns.Load() >= 10 }, 20*time.Second, time.Millisecond, "the writers did not take turns")
			for range 3 {
				before := turns.Load()
				start := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				r, err := readers.Acquire(rctx, key, 5*time.Second, redlock.Shared())
				rcancel()
				require.NoError(t, err, "the reader starved while the writers took %d turns", turns.Load()-before)
				took := time.Since(start)
				if writing.Load() > 0 {
					overlap.Store(true)
				}
				t.Logf("reader waited %v, %d writer turns", took.Round(time.Millisecond), turns.Load()-before)
				assert.Less(t, took, 2*time.Second, "the reader waited too long")
				time.Sleep(20 * time.Millisecond)
				if writing.Load() > 0 {
					overlap.Store(true)
				}
				require.NoError(t, r.Release(ctx))
				// The writers go on after the reader.
				after := turns.Load()
				require.Eventually(t, func() bool { return turns.Load() > after }, 10*time.Second, time.Millisecond, "the writers did not resume")
			}
			cancel()
			wg.Wait()
			assert.False(t, overlap.Load(), "a reader and a writer held together")
		})
	}
}

// TestAcquireAllAnnouncesWhereShared: AcquireAll(A, B, C) waits because
// an exclusive Lock holds A. B is free, and readers hold C: readers of
// both are admitted (and a writer of B), since holding them back protects
// nothing while A is held. Once A is released, readers of C refuse the
// AcquireAll, and new readers of C wait behind it.
func TestAcquireAllAnnouncesWhereShared(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	ctx := t.Context()
	base := newKey(t)
	a, b, cc := base+":a", base+":b", base+":c"
	h, err := c.TryAcquire(ctx, a, time.Minute)
	require.NoError(t, err)
	r, err := c.TryAcquire(ctx, cc, time.Minute, redlock.Shared())
	require.NoError(t, err)
	var attempts atomic.Int32
	all := e.client(redlock.WithHooks(redlock.Hooks{Attempt: func(redlock.Event) { attempts.Add(1) }}))
	actx, acancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		l, err := all.AcquireAll(actx, []string{a, b, cc}, time.Minute)
		if err == nil {
			err = l.Release(context.Background())
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return attempts.Load() >= 3 }, 10*time.Second, time.Millisecond, "AcquireAll did not wait")
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, k := range []string{b, cc} {
			l, err := c.TryAcquire(ctx, k, time.Minute, redlock.Shared())
			require.NoError(t, err, "a reader of %s, while AcquireAll(A, B, C) waits for A", k[len(base):])
			require.NoError(t, l.Release(ctx))
		}
		time.Sleep(50 * time.Millisecond)
	}
	w, err := c.TryAcquire(ctx, b, time.Minute)
	require.NoError(t, err, "a writer of B")
	require.NoError(t, w.Release(ctx))
	require.NoError(t, h.Release(ctx))
	readersHeldBack(t, c, cc)
	require.NoError(t, r.Release(ctx))
	select {
	case err := <-done:
		require.NoError(t, err, "AcquireAll once the readers of C left")
	case <-time.After(20 * time.Second):
		acancel()
		t.Fatal("AcquireAll did not get the keys once they were free")
	}
	acancel()
}

// TestWriterWaitingReason: a reader refused only because a writer waits
// (the key holds shares alone, which would admit it) is told so by every
// node: ErrWriterWaiting, not ErrHeldByOther, in its NodeError and its
// message. A waiting reader that is told so sleeps no longer than the
// writer's announcement lives, whatever its RetryStrategy says: once a
// cut-off writer's announcement expires it is in, without a release to
// wake it.
func TestWriterWaitingReason(t *testing.T) {
	e := newEnv(t, 3, fastClients)
	c := e.client()
	sleepy := e.client(redlock.WithRetry(redlock.ExponentialBackoff(time.Minute, time.Minute)))
	ctx := t.Context()
	key := newKey(t)
	r, err := c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.NoError(t, err)

	its := startWaitingWriter(t, e, key)
	readersHeldBack(t, c, key)

	_, err = c.TryAcquire(ctx, key, time.Minute, redlock.Shared())
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	refusals := 0
	for _, ne := range qe.Nodes {
		if errors.Is(ne, redlock.ErrNotAwaited) { // decided without it
			continue
		}
		refusals++
		assert.ErrorIs(t, ne, redlock.ErrWriterWaiting, "node %d", ne.Node)
		assert.NotErrorIs(t, ne, redlock.ErrHeldByOther, "node %d: nobody holds the key but readers", ne.Node)
	}
	assert.GreaterOrEqual(t, refusals, 2, "a quorum refused")
	assert.NotContains(t, err.Error(), "held by another token")
	assert.Contains(t, err.Error(), "writer")
	t.Logf("refused: %v", err)

	// A waiting reader that would sleep a minute between attempts: the
	// writer is cut off, and the reader is in once its announcement
	// expired, though no release wakes it.
	got := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := sleepy.Acquire(rctx, key, time.Minute, redlock.Shared())
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond) // refused once, asleep
	for _, p := range its {
		p.SetBlackhole(true)
	}
	cut := time.Now()
	select {
	case err := <-got:
		require.NoError(t, err)
		t.Logf("the sleeping reader was admitted %v after the writer was cut off", time.Since(cut).Round(time.Millisecond))
		assert.Less(t, time.Since(cut), heldBackBound)
	case <-time.After(20 * time.Second):
		t.Fatal("the reader slept past the writer's announcement")
	}
	require.NoError(t, r.Release(ctx))
}

// TestWaitRoomOnCluster: on a Redis Cluster node a key's waiting room is
// in the key's slot when the key has a {hash tag}: there a waiting writer
// holds new readers back as on single nodes. Without one, the room lies in
// another slot, here served by another master, and cannot be used: locks,
// shared and exclusive, work as if nobody waited, and nothing fails.
func TestWaitRoomOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(func(o *redis.ClusterOptions) { o.ContextTimeoutEnabled = true })
	t.Cleanup(func() { _ = cc.Close() })
	newClient := func() *redlock.Client {
		c, err := redlock.New([]redis.UniversalClient{cc}, redlock.WithNodeTimeout(testNodeTimeout))
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			require.NoError(t, c.Close(ctx))
		})
		return c
	}
	c, writer := newClient(), newClient()
	ctx := t.Context()
	untagged := t.Name() + ":untagged"
	master := func(key string) int { return int(script.Slot(key)) * 3 / 16384 } // redistest's slot ranges
	for i := 0; master(untagged) == master(untagged+":redlock:wait"); i++ {
		untagged = t.Name() + ":untagged:" + strconv.Itoa(i)
	}
	for _, tc := range []struct {
		key    string
		tagged bool
	}{{"{" + t.Name() + "}:tagged", true}, {untagged, false}} {
		r, err := c.TryAcquire(ctx, tc.key, time.Minute, redlock.Shared())
		require.NoError(t, err, tc.key)
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if l, err := writer.Acquire(wctx, tc.key, time.Minute); err == nil {
				_ = l.Release(context.Background())
			}
		}()
		if tc.tagged {
			readersHeldBack(t, c, tc.key)
			_, err := c.TryAcquire(ctx, tc.key, time.Minute, redlock.Shared())
			require.ErrorIs(t, err, redlock.ErrWriterWaiting)
		} else {
			time.Sleep(time.Second) // the writer waits, and announces where it can
			for range 5 {
				l, err := c.TryAcquire(ctx, tc.key, time.Minute, redlock.Shared())
				require.NoError(t, err, "no waiting room in the key's slot: readers are admitted")
				require.NoError(t, l.Release(ctx))
			}
		}
		require.NoError(t, r.Release(ctx))
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the writer did not get the key once the reader left", tc.key)
		}
		wcancel()
		w, err := c.TryAcquire(ctx, tc.key, time.Minute)
		require.NoError(t, err, "%s: an exclusive TryAcquire, by the fast path", tc.key)
		require.NoError(t, w.Release(ctx))
	}
}

// startWaitingWriter starts a writer that waits for key (an exclusive
// Acquire) from a host of its own: proxies to e's servers, returned to be
// blackholed, which cuts it off. The test's cleanup lifts the blackholes,
// stops the writer and closes its Client.
func startWaitingWriter(t *testing.T, e *env, key string) []interface{ SetBlackhole(bool) } {
	t.Helper()
	ctx := t.Context()
	var proxied []string
	var its []interface{ SetBlackhole(bool) }
	for _, s := range e.servers {
		p := testbed.Proxy(t, s.Addr())
		proxied = append(proxied, p.Addr())
		its = append(its, p)
	}
	var wnodes []redis.UniversalClient
	for _, n := range testbed.Dial(t, proxied, fastClients) {
		wnodes = append(wnodes, n)
	}
	writer, err := redlock.New(wnodes, redlock.WithNodeTimeout(100*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, writer.Warm(ctx))
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := writer.Acquire(wctx, key, time.Minute); err == nil {
			_ = l.Release(context.Background())
		}
	}()
	t.Cleanup(func() {
		wcancel()
		for _, p := range its {
			p.SetBlackhole(false)
		}
		<-done
		cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = writer.Close(cctx)
	})
	return its
}
