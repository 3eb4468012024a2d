package redlockotel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
	redlockotel "github.com/redlock-go/redlock/otel"
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopExampleServers()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// env is three real redis-server processes, each behind a fault-injecting
// proxy, a span recorder and a manual metric reader: what the adapter
// reports is read back from the SDK. Lock clients talk through the proxies;
// direct clients bypass them.
type env struct {
	t       *testing.T
	nodes   []redis.UniversalClient
	direct  []*redis.Client
	proxies []*faultproxy.Proxy
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	e.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	e.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	t.Cleanup(func() {
		_ = e.tp.Shutdown(context.Background())
		_ = e.mp.Shutdown(context.Background())
	})
	for _, s := range redistest.StartT(t, 3) {
		p, err := faultproxy.New(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		e.proxies = append(e.proxies, p)
		d := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = d.Close() })
		e.direct = append(e.direct, d)
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		e.nodes = append(e.nodes, c)
	}
	return e
}

// client returns a Client whose hooks report to e's providers; it is closed,
// its background work done, when the test ends.
func (e *env) client(opts ...redlockotel.Option) *redlock.Client {
	e.t.Helper()
	return e.clientWith(nil, opts...)
}

// clientWith is client with redlock options as well.
func (e *env) clientWith(lockOpts []redlock.Option, opts ...redlockotel.Option) *redlock.Client {
	e.t.Helper()
	opts = append([]redlockotel.Option{redlockotel.WithTracerProvider(e.tp), redlockotel.WithMeterProvider(e.mp)}, opts...)
	return e.plainClient(append(lockOpts, redlock.WithHooks(redlockotel.Hooks(opts...)))...)
}

func (e *env) plainClient(opts ...redlock.Option) *redlock.Client {
	e.t.Helper()
	c, err := redlock.New(e.nodes, opts...)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { e.settle(c) })
	// Connections and scripts ready: a short TTL's per-node deadline need
	// not cover a dial.
	require.NoError(e.t, c.Warm(e.t.Context()))
	return c
}

// settle waits for c's background work (rollbacks, the deletes a Release
// did not wait for), so that every hook has been called, and closes c.
func (e *env) settle(c *redlock.Client) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for _, n := range c.Nodes() {
			if n.InFlight > 0 || n.PendingCleanups > 0 {
				return false
			}
		}
		return true
	}, 15*time.Second, 5*time.Millisecond, "background work did not end")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(e.t, c.Close(ctx))
}

// awaitKey waits until every node holds key.
func (e *env) awaitKey(key string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for _, d := range e.direct {
			if d.Exists(context.Background(), key).Val() != 1 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "not every node took the key")
}

// span returns the one ended span named name.
func (e *env) span(name string) sdktrace.ReadOnlySpan {
	e.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	require.Len(e.t, found, 1, "spans named %s", name)
	return found[0]
}

func (e *env) spanNames() []string {
	var names []string
	for _, s := range e.spans.Ended() {
		names = append(names, s.Name())
	}
	return names
}

// point is one data point of a sum or a histogram: its attributes and its
// value, or its count for a histogram.
type point struct {
	attrs attribute.Set
	value float64
}

// metrics collects every metric, by name.
func (e *env) metrics() map[string][]point {
	e.t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(e.t, e.reader.Collect(context.Background(), &rm))
	out := map[string][]point{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(e.t, redlockotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{p.Attributes, float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{p.Attributes, float64(p.Value)})
				}
			case metricdata.Histogram[float64]:
				assert.Equal(e.t, "s", m.Unit)
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], point{p.Attributes, float64(p.Count)})
				}
			default:
				e.t.Fatalf("metric %s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// sum adds up the points whose attributes include every one of want.
func sum(points []point, want ...attribute.KeyValue) float64 {
	total := 0.0
	for _, p := range points {
		match := true
		for _, kv := range want {
			if v, ok := p.attrs.Value(kv.Key); !ok || v != kv.Value {
				match = false
			}
		}
		if match {
			total += p.value
		}
	}
	return total
}

func attr(attrs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range attrs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func events(s sdktrace.ReadOnlySpan, name string) []sdktrace.Event {
	var out []sdktrace.Event
	for _, ev := range s.Events() {
		if ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// noSecrets fails when any attribute of a span, an event or a metric, or a
// span's status, holds one of secrets.
func (e *env) noSecrets(secrets ...string) {
	e.t.Helper()
	e.noSecretsInSpans(secrets...)
	for name, points := range e.metrics() {
		for _, p := range points {
			noSecretIn(e.t, name, p.attrs.ToSlice(), secrets)
		}
	}
}

func (e *env) noSecretsInSpans(secrets ...string) {
	e.t.Helper()
	for _, s := range e.spans.Ended() {
		noSecretIn(e.t, s.Name(), s.Attributes(), secrets)
		for _, ev := range s.Events() {
			noSecretIn(e.t, s.Name()+"/"+ev.Name, ev.Attributes, secrets)
		}
		for _, sec := range secrets {
			assert.NotContains(e.t, s.Status().Description, sec, s.Name())
		}
	}
}

func noSecretIn(t *testing.T, where string, attrs []attribute.KeyValue, secrets []string) {
	t.Helper()
	for _, kv := range attrs {
		for _, s := range secrets {
			assert.NotContains(t, kv.Value.String(), s, "%s: attribute %s", where, kv.Key)
		}
	}
}

func newKey(t *testing.T) string {
	return "otel-test:" + t.Name() + ":" + time.Now().Format(time.RFC3339Nano)
}

// TestLockLife: Acquire, Extend and Release each make a span that spans the
// call, the attempt is an event of the acquire span, and the metrics count
// the attempt and each operation, without the key.
func TestLockLife(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	before := time.Now()
	l, err := c.Acquire(ctx, key, time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, time.Minute))
	require.NoError(t, l.Release(ctx))
	after := time.Now()
	e.settle(c)

	assert.Equal(t, []string{"redlock.acquire", "redlock.extend", "redlock.release"}, e.spanNames())
	for _, s := range e.spans.Ended() {
		assert.False(t, s.StartTime().Before(before), "%s starts before the call", s.Name())
		assert.False(t, s.EndTime().After(after), "%s ends after the call", s.Name())
		assert.True(t, s.StartTime().Before(s.EndTime()), "%s has no duration", s.Name())
		assert.Equal(t, codes.Unset, s.Status().Code, s.Name())
		v, ok := attr(s.Attributes(), "redlock.key")
		assert.True(t, ok && v.AsString() == key, "%s: redlock.key", s.Name())
		v, _ = attr(s.Attributes(), "redlock.outcome")
		assert.Equal(t, "ok", v.AsString(), s.Name())
	}
	acq := e.span("redlock.acquire")
	attempts := events(acq, "redlock.attempt")
	require.Len(t, attempts, 1)
	acquired, _ := attr(attempts[0].Attributes, "redlock.acquired")
	assert.True(t, acquired.AsBool())
	assert.False(t, attempts[0].Time.Before(acq.StartTime()))
	n, _ := attr(acq.Attributes(), "redlock.attempts")
	assert.Equal(t, int64(1), n.AsInt64())
	assert.Empty(t, events(acq, "redlock.node.error"))

	m := e.metrics()
	assert.Equal(t, 1.0, sum(m["redlock.attempts"], attribute.Bool("redlock.acquired", true)))
	assert.Equal(t, 0.0, sum(m["redlock.attempts"], attribute.Bool("redlock.acquired", false)))
	for _, op := range []string{"acquire", "extend", "release"} {
		assert.Equal(t, 1.0, sum(m["redlock.operation.duration"],
			attribute.String("redlock.op", op), attribute.String("redlock.outcome", "ok")), op)
	}
	assert.Equal(t, 3.0, sum(m["redlock.operation.duration"]))
	for name, points := range m {
		for _, p := range points {
			assert.False(t, p.attrs.HasValue("redlock.key"), "%s has the key by default", name)
		}
	}
	e.noSecrets(l.Token())
}

// TestRefusedTryAcquire: a TryAcquire of a key another Client holds fails
// with an Error span that carries the refusal of each node and the
// rollback, and the metrics count them.
func TestRefusedTryAcquire(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	other := e.plainClient()
	ctx := t.Context()
	key := newKey(t)

	held, err := other.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	e.settle(c)

	s := e.span("redlock.try-acquire")
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Contains(t, s.Status().Description, "not acquired")
	errType, _ := attr(s.Attributes(), "error.type")
	assert.Equal(t, "not_acquired", errType.AsString())
	assert.Len(t, events(s, "exception"), 1, "the error is recorded")

	// The call returns once two refusals have decided it: the third node's
	// reply may come later, when the span is made already.
	// The rollback's delete goes to the node whose reply was not awaited;
	// its refusal may come before the span is made too, as op "delete".
	var refusals []sdktrace.Event
	for _, ev := range events(s, "redlock.node.error") {
		reason, _ := attr(ev.Attributes, "redlock.node.reason")
		assert.Equal(t, "held_by_other", reason.AsString())
		if op, _ := attr(ev.Attributes, "redlock.node.op"); op.AsString() != "delete" {
			refusals = append(refusals, ev)
		}
	}
	require.GreaterOrEqual(t, len(refusals), 2, "a refusal from a majority")
	nodes := map[int64]bool{}
	for _, ev := range refusals {
		timeout, _ := attr(ev.Attributes, "redlock.node.timeout")
		assert.False(t, timeout.AsBool())
		op, _ := attr(ev.Attributes, "redlock.node.op")
		assert.Equal(t, "acquire", op.AsString())
		addr, _ := attr(ev.Attributes, "redlock.node.addr")
		assert.NotEmpty(t, addr.AsString())
		n, _ := attr(ev.Attributes, "redlock.node")
		nodes[n.AsInt64()] = true
		assert.False(t, ev.Time.Before(s.StartTime()))
		assert.False(t, ev.Time.After(s.EndTime()))
	}
	assert.Len(t, nodes, len(refusals), "each node once")
	attempts := events(s, "redlock.attempt")
	require.Len(t, attempts, 1)
	acquired, _ := attr(attempts[0].Attributes, "redlock.acquired")
	assert.False(t, acquired.AsBool())
	assert.Len(t, events(s, "redlock.rollback"), 1)

	m := e.metrics()
	assert.Equal(t, 1.0, sum(m["redlock.attempts"], attribute.Bool("redlock.acquired", false)))
	assert.Equal(t, 3.0, sum(m["redlock.node.errors"], attribute.String("redlock.node.reason", "held_by_other"),
		attribute.String("redlock.node.op", "acquire"), attribute.Bool("redlock.node.timeout", false)),
		"every node's refusal is counted, late or not")
	assert.Equal(t, 1.0, sum(m["redlock.rollbacks"]))
	assert.Equal(t, 1.0, sum(m["redlock.operation.duration"],
		attribute.String("redlock.op", "try-acquire"), attribute.String("redlock.outcome", "not_acquired")))
	e.noSecrets(held.Token())
	require.NoError(t, held.Release(ctx))
}

// TestAcquireAfterContention: an Acquire that waits for a holder shows each
// of its attempts, and only its own: the refusals of an earlier TryAcquire
// of the key, held by the same hooks, do not leak into its span.
func TestAcquireAfterContention(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	other := e.plainClient()
	ctx := t.Context()
	key := newKey(t)

	held, err := other.TryAcquire(ctx, key, 500*time.Millisecond)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	l, err := c.Acquire(ctx, key, time.Minute) // succeeds once held expires
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	e.settle(c)

	s := e.span("redlock.acquire")
	assert.Equal(t, codes.Unset, s.Status().Code)
	attempts := events(s, "redlock.attempt")
	require.GreaterOrEqual(t, len(attempts), 2, "the first attempt is refused")
	n, _ := attr(s.Attributes(), "redlock.attempts")
	assert.Equal(t, int64(len(attempts)), n.AsInt64())
	for i, ev := range attempts {
		v, _ := attr(ev.Attributes, "redlock.attempt")
		assert.Equal(t, int64(i+1), v.AsInt64(), "attempts in order")
		acquired, _ := attr(ev.Attributes, "redlock.acquired")
		assert.Equal(t, i == len(attempts)-1, acquired.AsBool())
	}
	for _, ev := range s.Events() {
		assert.False(t, ev.Time.Before(s.StartTime()), "an event of an earlier call: %s", ev.Name)
	}
	m := e.metrics()
	assert.Equal(t, float64(len(attempts)+1), sum(m["redlock.attempts"]))
	assert.Equal(t, 1.0, sum(m["redlock.attempts"], attribute.Bool("redlock.acquired", true)))
	e.noSecrets(held.Token(), l.Token())
}

// TestKeyOptions: WithoutKeyOnSpans keeps the key and the error messages
// quoting it out of spans; WithKeyOnMetrics puts it on metrics.
func TestKeyOptions(t *testing.T) {
	e := newEnv(t)
	c := e.client(redlockotel.WithoutKeyOnSpans(), redlockotel.WithKeyOnMetrics())
	other := e.plainClient()
	ctx := t.Context()
	key := newKey(t)

	held, err := other.TryAcquire(ctx, key, time.Minute)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, held.Release(ctx))
	e.settle(c)

	s := e.span("redlock.try-acquire")
	assert.Equal(t, codes.Error, s.Status().Code)
	assert.Equal(t, "not_acquired", s.Status().Description)
	assert.Empty(t, events(s, "exception"), "the error message quotes the key")
	e.noSecretsInSpans(key)

	m := e.metrics()
	for _, name := range []string{"redlock.attempts", "redlock.node.errors", "redlock.rollbacks", "redlock.operation.duration"} {
		require.NotEmpty(t, m[name], name)
		for _, p := range m[name] {
			v, ok := p.attrs.Value("redlock.key")
			assert.True(t, ok && v.AsString() == key, "%s: redlock.key", name)
		}
	}
}

// TestLease: the renewals of a kept-alive lock are counted, and a lock lost
// (its key deleted on a majority of nodes) is counted and has a span.
func TestLease(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := t.Context()
	key := newKey(t)

	l, err := c.Acquire(ctx, key, 900*time.Millisecond)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	require.Eventually(t, func() bool {
		return sum(e.metrics()["redlock.renewals"], attribute.String("redlock.outcome", "ok")) >= 2
	}, 5*time.Second, 20*time.Millisecond, "two renewals")
	// Acquire returns at a quorum: the third node's write may land after
	// a delete made at once, and keep the key on a quorum.
	e.awaitKey(key)
	for _, d := range e.direct[:2] {
		require.NoError(t, d.Del(ctx, key).Err())
	}
	select {
	case <-kctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not found lost")
	}
	require.ErrorIs(t, context.Cause(kctx), redlock.ErrLockLost)
	_ = l.Release(ctx)
	e.settle(c)

	m := e.metrics()
	assert.Equal(t, 1.0, sum(m["redlock.locks.lost"]))
	assert.GreaterOrEqual(t, sum(m["redlock.renewals"], attribute.String("redlock.outcome", "not_held")), 1.0)
	lost := e.span("redlock.lock-lost")
	assert.Equal(t, codes.Error, lost.Status().Code)
	assert.Contains(t, lost.Status().Description, "lock lost")
	v, _ := attr(lost.Attributes(), "redlock.key")
	assert.Equal(t, key, v.AsString())

	// Each renewal is an Extend with a span; the one that failed carries
	// the refusals of the nodes that lost the key.
	var failed sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		if s.Name() == "redlock.extend" && s.Status().Code == codes.Error {
			failed = s
		}
	}
	require.NotNil(t, failed, "no failed extend span among %v", e.spanNames())
	absent := 0
	for _, ev := range events(failed, "redlock.node.error") {
		if reason, _ := attr(ev.Attributes, "redlock.node.reason"); reason.AsString() == "key_absent" {
			absent++
		}
	}
	assert.Equal(t, 2, absent)
	e.noSecrets(l.Token())
}

// TestNodeTimeout: a node that stops answering during a Release is counted
// as a node error with timeout=true under its address, and the delete tried
// again as a cleanup retry.
func TestNodeTimeout(t *testing.T) {
	e := newEnv(t)
	c := e.clientWith([]redlock.Option{
		redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithCleanupTimeout(100 * time.Millisecond)})
	ctx := t.Context()
	key := newKey(t)

	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitKey(key)
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx)) // on the quorum of nodes 0 and 1
	addr := attribute.String("redlock.node.addr", e.proxies[2].Addr())
	require.Eventually(t, func() bool { return sum(e.metrics()["redlock.cleanup.retries"], addr) > 0 },
		5*time.Second, 10*time.Millisecond, "no cleanup retry counted")
	e.proxies[2].Reset()
	e.settle(c)

	m := e.metrics()
	assert.GreaterOrEqual(t, sum(m["redlock.node.errors"], addr, attribute.Bool("redlock.node.timeout", true),
		attribute.String("redlock.node.reason", "no_reply"), attribute.String("redlock.node.op", "delete")), 1.0)
	assert.Equal(t, 0.0, sum(m["redlock.node.errors"], attribute.Bool("redlock.node.timeout", true),
		attribute.String("redlock.node.addr", e.proxies[0].Addr())))
	assert.Equal(t, 1.0, sum(m["redlock.operation.duration"], attribute.String("redlock.op", "release"),
		attribute.String("redlock.outcome", "ok")))
	e.noSecrets(l.Token())
}

// TestCleanupAbandoned: a delete that Close gave up, its node silent, is
// counted under the node's address.
func TestCleanupAbandoned(t *testing.T) {
	e := newEnv(t)
	c, err := redlock.New(e.nodes, redlock.WithHooks(redlockotel.Hooks(
		redlockotel.WithTracerProvider(e.tp), redlockotel.WithMeterProvider(e.mp))))
	require.NoError(t, err)
	require.NoError(t, c.Warm(t.Context()))
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitKey(key)
	e.proxies[2].SetBlackhole(true)
	require.NoError(t, l.Release(ctx)) // on the quorum of nodes 0 and 1
	require.ErrorIs(t, c.Close(context.Background()), redlock.ErrCleanupAbandoned)
	e.proxies[2].Reset()
	addr := attribute.String("redlock.node.addr", e.proxies[2].Addr())
	assert.Equal(t, 1.0, sum(e.metrics()["redlock.cleanup.abandoned"], addr))
	e.noSecrets(l.Token())
}

// TestReleaseUnconfirmedOutcome: a Release whose deletes no quorum
// confirmed in time, nodes being silent, has an outcome of its own: the lock
// was not found lost, which not_held would say.
func TestReleaseUnconfirmedOutcome(t *testing.T) {
	e := newEnv(t)
	c := e.clientWith([]redlock.Option{
		redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithCleanupTimeout(100 * time.Millisecond)})
	ctx := t.Context()
	key := newKey(t)
	l, err := c.Acquire(ctx, key, 10*time.Second)
	require.NoError(t, err)
	e.awaitKey(key)
	e.proxies[1].SetBlackhole(true)
	e.proxies[2].SetBlackhole(true)
	require.ErrorIs(t, l.Release(ctx), redlock.ErrReleaseUnconfirmed)
	e.proxies[1].Reset()
	e.proxies[2].Reset()
	e.settle(c)

	assert.Equal(t, 1.0, sum(e.metrics()["redlock.operation.duration"], attribute.String("redlock.op", "release"),
		attribute.String("redlock.outcome", "release_unconfirmed")))
	errType, _ := attr(e.span("redlock.release").Attributes(), "error.type")
	assert.Equal(t, "release_unconfirmed", errType.AsString())
}

// TestManyKeys: keys whose events no operation takes do not accumulate:
// node errors of released locks' late deletes and of many keys stay
// bounded, and the spans of later operations are still right.
func TestManyKeys(t *testing.T) {
	e := newEnv(t)
	c := e.client(redlockotel.WithMaxPendingKeys(4))
	ctx := t.Context()
	prefix := newKey(t)
	for i := range 20 {
		l, err := c.Acquire(ctx, fmt.Sprintf("%s:%d", prefix, i), time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	e.settle(c)
	assert.Len(t, e.spans.Ended(), 40)
	for _, s := range e.spans.Ended() {
		if s.Name() == "redlock.acquire" {
			assert.Len(t, events(s, "redlock.attempt"), 1)
		}
		assert.True(t, strings.HasPrefix(s.Name(), "redlock."))
	}
}

// BenchmarkHooks is the adapter's cost per uncontended Acquire (an attempt
// and its Done) with the SDK recording everything, without Redis.
func BenchmarkHooks(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	h := redlockotel.Hooks(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp))
	b.ReportAllocs()
	for b.Loop() {
		h.Attempt(redlock.Event{Key: "orders:42", Attempt: 1, Elapsed: time.Millisecond})
		h.Done(redlock.Event{Op: "acquire", Key: "orders:42", Elapsed: time.Millisecond})
	}
}

// TestReadmeOtel runs docs/observability.md's block, which reports to the
// global providers: with an SDK set as the global ones, the Client it
// returns reports a lock's life as spans and metrics. It sets the globals
// for the rest of the test binary; the other tests pass their providers.
func TestReadmeOtel(t *testing.T) {
	e := newEnv(t)
	otel.SetTracerProvider(e.tp)
	otel.SetMeterProvider(e.mp)
	c, err := readmeOtel(e.nodes)
	require.NoError(t, err)
	ctx := t.Context()
	l, err := c.Acquire(ctx, "orders:42", 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	e.settle(c)

	var names []string
	for _, s := range e.spans.Ended() {
		names = append(names, s.Name())
	}
	assert.Equal(t, []string{"redlock.acquire", "redlock.release"}, names)
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(ctx, &rm))
	var metrics []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			metrics = append(metrics, m.Name)
		}
	}
	assert.Contains(t, metrics, "redlock.operation.duration")
}
