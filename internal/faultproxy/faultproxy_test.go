package faultproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup starts a real redis-server and a proxy in front of it. It returns the
// proxy and a direct client, which bypasses the proxy so tests can check what
// the server really executed.
func setup(t *testing.T) (*Proxy, *redis.Client) {
	t.Helper()
	srv := redistest.StartT(t, 1)[0]
	p, err := New(srv.Addr())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	direct := srv.Client()
	t.Cleanup(func() { _ = direct.Close() })
	return p, direct
}

// proxied returns a client through the proxy. PoolSize 1 makes every command
// reuse the same pooled connection, which proves that faults reach
// connections opened before the fault was set. Deadlines come from the
// context, and retries are off so each fault is observed exactly once.
func proxied(t *testing.T, p *Proxy) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  p.Addr(),
		PoolSize:              1,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustPing(t *testing.T, c *redis.Client) {
	t.Helper()
	if err := c.Ping(ctxFor(t, 5*time.Second)).Err(); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}
}

func TestForwards(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	ctx := ctxFor(t, 5*time.Second)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through proxy: %v", err)
	}
	if got, err := direct.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("direct GET = %q, %v; want v", got, err)
	}
	// A value larger than one read buffer must arrive intact both ways.
	big := make([]byte, 3*readBufSize+17)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatalf("SET big: %v", err)
	}
	if got, err := c.Get(ctx, "big").Result(); err != nil || got != string(big) {
		t.Fatalf("GET big through proxy: len %d, %v; want len %d", len(got), err, len(big))
	}
}

func TestDelayAddsLatency(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c) // open the pooled connection before the fault

	const d = 150 * time.Millisecond
	p.SetDelay(d)
	start := time.Now()
	mustPing(t, c)
	if elapsed := time.Since(start); elapsed < d {
		t.Fatalf("PING with %v delay took %v, want >= %v", d, elapsed, d)
	}

	p.SetDelay(0)
	mustPing(t, c)
}

// TestDelayKeepsOrder sends separate writes over a raw connection while the
// delay changes underneath: a shorter delay must not let later chunks
// overtake earlier ones.
func TestDelayKeepsOrder(t *testing.T) {
	p, direct := setup(t)
	conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}

	const n = 10
	p.SetDelay(300 * time.Millisecond)
	for i := range n {
		if i == n/2 {
			p.SetDelay(0) // queued chunks become due now; new ones too
		}
		if _, err := fmt.Fprintf(conn, "RPUSH order %d\r\n", i); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		time.Sleep(5 * time.Millisecond) // keep the writes in separate chunks
	}
	r := bufio.NewReader(conn)
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if want := ":" + strconv.Itoa(i+1) + "\r\n"; line != want {
			t.Fatalf("reply %d = %q, want %q", i, line, want)
		}
	}
	got, err := direct.LRange(ctxFor(t, 5*time.Second), "order", 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	for i, v := range got {
		if v != strconv.Itoa(i) {
			t.Fatalf("server saw %v, want 0..%d in order", got, n-1)
		}
	}
	if len(got) != n {
		t.Fatalf("server saw %d items, want %d", len(got), n)
	}
}

func TestBlackhole(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c)

	p.SetBlackhole(true)
	err := c.Set(ctxFor(t, 200*time.Millisecond), "bh", "1", 0).Err()
	if !nodetest.IsTimeout(err) {
		t.Fatalf("SET through blackhole: err=%v, want a timeout", err)
	}
	// A new connection is accepted but stalls as well.
	c2 := proxied(t, p)
	if err := c2.Ping(ctxFor(t, 200*time.Millisecond)).Err(); !nodetest.IsTimeout(err) {
		t.Fatalf("PING on a new connection through blackhole: err=%v, want a timeout", err)
	}

	p.SetBlackhole(false)
	mustPing(t, c)
	// Bytes sent during the blackhole were dropped, not delivered late.
	if err := direct.Get(ctxFor(t, 5*time.Second), "bh").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("direct GET bh: err=%v, want redis.Nil (blackholed SET must not execute)", err)
	}
}

func TestDropReplies(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c)

	p.SetDropReplies(true)
	err := c.Set(ctxFor(t, 200*time.Millisecond), "dr", "landed", 0).Err()
	if !nodetest.IsTimeout(err) {
		t.Fatalf("SET with dropped replies: err=%v, want a timeout", err)
	}
	// The write itself reached the server. It was forwarded before the
	// client timed out, so it has executed by now; poll only to be tolerant
	// of scheduling.
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := direct.Get(ctxFor(t, time.Second), "dr").Result()
		if err == nil && got == "landed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("direct GET dr = %q, %v; want the SET to have executed", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	p.Reset()
	mustPing(t, c)
}

// TestDropRepliesFrom: the drop starts with the matching chunk, whose
// command runs and whose reply is lost; calls before it are answered, and
// the fault stays on for calls after it until turned off, which also
// disarms a catch that never came.
func TestDropRepliesFrom(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c)

	started := p.DropRepliesFrom(func(b []byte) bool { return bytes.Contains(b, []byte("drf")) })
	if err := c.Set(ctxFor(t, time.Second), "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET before the match: %v, want an answer", err)
	}
	select {
	case <-started:
		t.Fatal("the drop started before the matching chunk")
	default:
	}
	err := c.Set(ctxFor(t, 200*time.Millisecond), "drf", "landed", 0).Err()
	if !nodetest.IsTimeout(err) {
		t.Fatalf("the matching SET: err=%v, want a timeout", err)
	}
	<-started
	if got := nodetest.Get(t, context.Background(), direct, "drf"); got != "landed" {
		t.Fatalf("direct GET drf = %q; want the matching SET to have run", got)
	}
	if err := c.Set(ctxFor(t, 200*time.Millisecond), "after", "1", 0).Err(); !nodetest.IsTimeout(err) {
		t.Fatalf("a SET after the match: err=%v, want a timeout (the drop stays on)", err)
	}
	p.SetDropReplies(false)
	mustPing(t, c)

	p.DropRepliesFrom(func(b []byte) bool { return bytes.Contains(b, []byte("never")) })
	p.SetDropReplies(false)
	if err := c.Set(ctxFor(t, time.Second), "never", "1", 0).Err(); err != nil {
		t.Fatalf("a SET that matches a disarmed catch: %v, want an answer", err)
	}
}

func TestRefuse(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c)

	p.SetRefuse(true)
	// A long deadline: the error must come from the reset, not a timeout.
	err := c.Ping(ctxFor(t, 10*time.Second)).Err()
	if err == nil || nodetest.IsTimeout(err) {
		t.Fatalf("PING on a refused existing connection: err=%v, want an immediate non-timeout error", err)
	}
	c2 := proxied(t, p)
	err = c2.Ping(ctxFor(t, 10*time.Second)).Err()
	if err == nil || nodetest.IsTimeout(err) {
		t.Fatalf("PING on a new refused connection: err=%v, want an immediate non-timeout error", err)
	}

	p.Reset()
	mustPing(t, c)
	mustPing(t, c2)
}

func TestResetClearsAllFaults(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	p.SetDelay(time.Hour)
	p.SetBlackhole(true)
	p.SetDropReplies(true)
	p.SetRefuse(true)
	p.Reset()
	mustPing(t, c)
}

// TestCloseWithPendingTraffic closes the proxy while a chunk waits out a long
// delay and another connection is blackholed: Close must not wait for the
// delay, and goleak in TestMain checks that every goroutine exited.
func TestCloseWithPendingTraffic(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c)

	p.SetDelay(time.Hour)
	errc := make(chan error, 1)
	ctx := ctxFor(t, 30*time.Second)
	go func() { errc <- c.Ping(ctx).Err() }()
	raw, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer raw.Close()
	if _, err := raw.Write([]byte("PING\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // let the chunks be queued

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err == nil || nodetest.IsTimeout(err) {
		t.Fatalf("PING in flight during Close: err=%v, want a connection error", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepts connections after Close")
	}
}

// TestTargetDown checks that a dead target surfaces as an immediate error.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()

	p, err := New(dead)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer p.Close()
	c := proxied(t, p)
	if err := c.Ping(ctxFor(t, 10*time.Second)).Err(); err == nil || nodetest.IsTimeout(err) {
		t.Fatalf("PING to a dead target: err=%v, want an immediate non-timeout error", err)
	}
}

// waitCaught fails the test unless the hold catches a chunk within 5 s.
func waitCaught(t *testing.T, caught <-chan struct{}) {
	t.Helper()
	select {
	case <-caught:
	case <-time.After(5 * time.Second):
		t.Fatal("HoldNext caught nothing within 5 s")
	}
}

// TestHoldDeleteLandsAfterLaterWrite is the scenario HoldNext exists for: a
// DEL is held on its connection, the client gives up on it at its deadline,
// the next command goes out on a new connection and executes, and then the
// released DEL lands late and removes what that command wrote.
func TestHoldDeleteLandsAfterLaterWrite(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c)
	ctx := ctxFor(t, 10*time.Second)

	caught := p.HoldNext([]byte("held-key"))
	if err := c.Del(ctxFor(t, 200*time.Millisecond), "held-key").Err(); !nodetest.IsTimeout(err) {
		t.Fatalf("held DEL: err=%v, want a timeout", err)
	}
	waitCaught(t, caught)
	if n := p.HeldCount(); n != 1 {
		t.Fatalf("HeldCount() = %d, want 1", n)
	}
	// The hold caught one chunk only: the SET, on a new connection because
	// go-redis closed the one whose deadline passed, goes through.
	if err := c.Set(ctx, "held-key", "later", 0).Err(); err != nil {
		t.Fatalf("SET after the held DEL: %v", err)
	}
	if got, err := direct.Get(ctx, "held-key").Result(); err != nil || got != "later" {
		t.Fatalf("direct GET before release = %q, %v; want later", got, err)
	}

	p.ReleaseHeld()
	if n := p.HeldCount(); n != 0 {
		t.Fatalf("HeldCount() after ReleaseHeld = %d, want 0", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := direct.Get(ctx, "held-key").Err()
		if errors.Is(err, redis.Nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("direct GET after release: err=%v, want redis.Nil (the DEL must land)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mustPing(t, c)
}

// TestHoldKeepsItsConnectionInOrder holds a chunk on a connection opened
// after HoldNext, sends more on that connection, closes it, and checks
// that another connection, opened before, flowed meanwhile, and that the
// held bytes and those behind them reached the server, in order, after the
// client had gone.
func TestHoldKeepsItsConnectionInOrder(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c) // opened before HoldNext
	ctx := ctxFor(t, 10*time.Second)

	caught := p.HoldNext([]byte("RPUSH held"))
	if err := c.RPush(ctx, "other", "x").Err(); err != nil {
		t.Fatalf("non-matching RPUSH while armed: %v", err)
	}
	raw, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	defer raw.Close()
	if _, err := raw.Write([]byte("RPUSH held a\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	waitCaught(t, caught)
	if _, err := raw.Write([]byte("RPUSH held b\r\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	// Other connections flow, even with a command that matches the pattern:
	// the hold caught its one chunk already.
	if err := c.RPush(ctx, "held", "c").Err(); err != nil {
		t.Fatalf("RPUSH on another connection during the hold: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // let the proxy read b and the close
	if err := raw.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got, err := direct.LRange(ctx, "held", 0, -1).Result(); err != nil || len(got) != 1 {
		t.Fatalf("direct LRANGE before release = %v, %v; want [c]", got, err)
	}

	p.ReleaseHeld()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := direct.LRange(ctx, "held", 0, -1).Result()
		if err != nil {
			t.Fatalf("LRANGE: %v", err)
		}
		if fmt.Sprint(got) == "[c a b]" {
			break
		}
		if len(got) > 2 || time.Now().After(deadline) {
			t.Fatalf("server saw %v, want [c a b]", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReleaseHeldDisarms checks that ReleaseHeld with nothing caught
// returns at once and cancels the armed catch, and that Reset does the same.
func TestReleaseHeldDisarms(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c)
	p.ReleaseHeld()

	for _, end := range []struct {
		name string
		fn   func()
	}{{"ReleaseHeld", p.ReleaseHeld}, {"Reset", p.Reset}} {
		caught := p.HoldNext(nil) // would catch anything
		end.fn()
		mustPing(t, c)
		select {
		case <-caught:
			t.Fatalf("a hold cancelled by %s caught a chunk", end.name)
		default:
		}
		if n := p.HeldCount(); n != 0 {
			t.Fatalf("HeldCount() after %s = %d, want 0", end.name, n)
		}
	}
}

// TestCloseWhileHolding closes the proxy with a chunk held: Close must not
// wait for a release, ReleaseHeld afterwards must return, and goleak in
// TestMain checks that every goroutine exited.
func TestCloseWhileHolding(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c)
	caught := p.HoldNext([]byte("ping")) // go-redis writes command names in lower case
	errc := make(chan error, 1)
	ctx := ctxFor(t, 30*time.Second)
	go func() { errc <- c.Ping(ctx).Err() }()
	waitCaught(t, caught)

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; err == nil || nodetest.IsTimeout(err) {
		t.Fatalf("held PING during Close: err=%v, want a connection error", err)
	}
	p.ReleaseHeld()
}

// TestHoldResetMakesGoRedisSendAgain is the fault that makes a client send
// a write twice: the chunk is held, the client's connection reset under
// it. go-redis with its default retries sends the command again on a new
// connection and reports the copy's success; the held copy lands on
// release, after it. With retries off the client sees the reset instead.
func TestHoldResetMakesGoRedisSendAgain(t *testing.T) {
	p, direct := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	retrying := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 1})
	t.Cleanup(func() { _ = retrying.Close() })
	mustPing(t, retrying)

	caught := p.HoldNextReset([]byte("resent"), 1)
	if err := retrying.RPush(ctx, "resent", "x").Err(); err != nil {
		t.Fatalf("RPUSH with retries: %v (the copy sent again must succeed)", err)
	}
	waitCaught(t, caught)
	if got, err := direct.LRange(ctx, "resent", 0, -1).Result(); err != nil || len(got) != 1 {
		t.Fatalf("before release the server holds %v, %v; want the one copy sent again", got, err)
	}
	p.ReleaseHeld()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := direct.LRange(ctx, "resent", 0, -1).Result()
		if err != nil {
			t.Fatalf("LRANGE: %v", err)
		}
		if len(got) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held copy did not land: server holds %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}

	once := proxied(t, p) // MaxRetries -1
	mustPing(t, once)
	caught = p.HoldNextReset([]byte("once"), 1)
	if err := once.RPush(ctx, "once", "x").Err(); err == nil {
		t.Fatal("RPUSH without retries succeeded through a reset connection")
	}
	waitCaught(t, caught)
	p.ReleaseHeld()
	deadline = time.Now().Add(5 * time.Second)
	for direct.LLen(ctx, "once").Val() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the held copy of the command given up on did not land")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHoldResetCountsThePattern catches only a chunk that holds the
// pattern at least the given number of times: a pipeline, not a lone
// command.
func TestHoldResetCountsThePattern(t *testing.T) {
	p, direct := setup(t)
	c := proxied(t, p)
	mustPing(t, c)
	ctx := ctxFor(t, 10*time.Second)
	caught := p.HoldNextReset([]byte("piped"), 3)
	if err := c.RPush(ctx, "piped", "lone").Err(); err != nil {
		t.Fatalf("a lone command was caught: %v", err)
	}
	pipe := c.Pipeline()
	for i := range 3 {
		pipe.RPush(ctx, "piped", i)
	}
	if _, err := pipe.Exec(ctx); err == nil {
		t.Fatal("the pipeline went through a reset connection")
	}
	waitCaught(t, caught)
	if n := direct.LLen(ctx, "piped").Val(); n != 1 {
		t.Fatalf("before release the server holds %d elements, want 1", n)
	}
	p.ReleaseHeld()
	deadline := time.Now().Add(5 * time.Second)
	for direct.LLen(ctx, "piped").Val() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the held pipeline did not land whole: %d elements", direct.LLen(ctx, "piped").Val())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestJitterVariesDelay: with a jitter, PINGs on one connection take
// different times, within [delay, delay+jitter) and a margin, and still
// come back in order.
func TestJitterVariesDelay(t *testing.T) {
	p, _ := setup(t)
	c := proxied(t, p)
	mustPing(t, c)
	const delay, jitter = 20 * time.Millisecond, 100 * time.Millisecond
	p.SetDelay(delay)
	p.SetJitter(jitter)
	var lo, hi time.Duration
	for i := range 20 {
		start := time.Now()
		mustPing(t, c)
		took := time.Since(start)
		if took < delay {
			t.Fatalf("PING %d took %v, under the delay %v", i, took, delay)
		}
		if i == 0 || took < lo {
			lo = took
		}
		hi = max(hi, took)
	}
	if hi-lo < jitter/10 {
		t.Fatalf("20 PINGs took %v to %v: the jitter (%v) did not vary them", lo, hi, jitter)
	}
	p.Reset()
	start := time.Now()
	mustPing(t, c)
	if took := time.Since(start); took >= delay {
		t.Fatalf("after Reset a PING took %v", took)
	}
}

// TestReleaseFirstLandsInOrder: two chunks held on two connections land
// one at a time, in the order ReleaseFirst releases them, whatever order
// the connections would race in.
func TestReleaseFirstLandsInOrder(t *testing.T) {
	p, direct := setup(t)
	ctx := ctxFor(t, 10*time.Second)
	conns := make([]net.Conn, 2)
	for i := range conns {
		conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatalf("dial proxy: %v", err)
		}
		defer conn.Close()
		conns[i] = conn
	}
	for i, conn := range conns {
		caught := p.HoldNext([]byte("RPUSH released"))
		if _, err := fmt.Fprintf(conn, "RPUSH released %d\r\n", i); err != nil {
			t.Fatal(err)
		}
		waitCaught(t, caught)
	}
	if n := p.HeldCount(); n != 2 {
		t.Fatalf("HeldCount() = %d, want 2", n)
	}
	for i := range conns {
		if !p.ReleaseFirst() {
			t.Fatalf("ReleaseFirst %d: nothing held", i)
		}
		deadline := time.Now().Add(5 * time.Second)
		for direct.LLen(ctx, "released").Val() != int64(i+1) {
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d did not land", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if p.ReleaseFirst() {
		t.Fatal("ReleaseFirst with nothing held reported a chunk")
	}
	if got := direct.LRange(ctx, "released", 0, -1).Val(); len(got) != 2 || got[0] != "0" || got[1] != "1" {
		t.Fatalf("the server ran %v, want [0 1]", got)
	}
}
