package redlockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	redlockotel "github.com/redlock-go/redlock/otel"
)

// childrenOf fails unless every ended span named in names has parent as
// its parent, in parent's trace, and returns them by name.
func (e *env) childrenOf(parent trace.SpanContext, names ...string) map[string][]sdktrace.ReadOnlySpan {
	e.t.Helper()
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range e.spans.Ended() {
		out[s.Name()] = append(out[s.Name()], s)
	}
	for _, name := range names {
		require.NotEmpty(e.t, out[name], "no span %s among %v", name, e.spanNames())
		for _, s := range out[name] {
			assert.Equal(e.t, parent.TraceID(), s.SpanContext().TraceID(), "%s is in a trace of its own", name)
			assert.Equal(e.t, parent.SpanID(), s.Parent().SpanID(), "%s is not a child of the caller's span", name)
		}
	}
	return out
}

// TestSpansNestUnderCaller: under the caller's span (an HTTP request's),
// Acquire, Extend and Release are its children, in its trace, and so are
// the renewals of the KeepAlive it called, though they run in the
// background after its context ended; the histogram's exemplars point to
// the caller's trace, so the metrics had its context.
func TestSpansNestUnderCaller(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	key := newKey(t)
	ctx, req := e.tp.Tracer("app").Start(t.Context(), "http.request")

	l, err := c.Acquire(ctx, key, 900*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, 900*time.Millisecond))
	kctx, stop := context.WithCancel(ctx)
	l.KeepAlive(kctx)
	require.Eventually(t, func() bool {
		return sum(e.metrics()["redlock.renewals"], attribute.String("redlock.outcome", "ok")) >= 1
	}, 5*time.Second, 20*time.Millisecond, "a renewal")
	stop()
	require.NoError(t, l.Release(ctx))
	req.End()
	e.settle(c)

	spans := e.childrenOf(req.SpanContext(), "redlock.acquire", "redlock.extend", "redlock.release")
	assert.GreaterOrEqual(t, len(spans["redlock.extend"]), 2, "the renewal's extend span")
	assert.Len(t, spans["http.request"], 1)

	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	exemplars := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "redlock.operation.duration" {
				for _, p := range h.DataPoints {
					for _, x := range p.Exemplars {
						exemplars++
						assert.Equal(t, req.SpanContext().TraceID(), trace.TraceID(x.TraceID), "an exemplar of another trace")
					}
				}
			}
		}
	}
	assert.Positive(t, exemplars, "no exemplar: the measurements had no span in their context")
}

// TestRolledBackNestsUnderCaller: a refused TryAcquire's span, and the
// refusals and rollback it carries, are in the caller's trace; the span of
// a lost lock is under the span that called KeepAlive.
func TestRolledBackNestsUnderCaller(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	other := e.plainClient()
	key := newKey(t)
	ctx, req := e.tp.Tracer("app").Start(t.Context(), "job")

	held, err := other.TryAcquire(t.Context(), key, time.Minute)
	require.NoError(t, err)
	_, err = c.TryAcquire(ctx, key, time.Minute)
	require.ErrorIs(t, err, redlock.ErrNotAcquired)
	require.NoError(t, held.Release(t.Context()))

	l, err := c.Acquire(ctx, key, 900*time.Millisecond)
	require.NoError(t, err)
	kctx := l.KeepAlive(ctx)
	// Acquire returns at a quorum: the third node's write may land after
	// a delete made at once, and keep the key on a quorum.
	e.awaitKey(key)
	for _, d := range e.direct[:2] {
		require.NoError(t, d.Del(t.Context(), key).Err())
	}
	select {
	case <-kctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not found lost")
	}
	_ = l.Release(ctx)
	req.End()
	e.settle(c)
	spans := e.childrenOf(req.SpanContext(), "redlock.try-acquire", "redlock.acquire", "redlock.lock-lost", "redlock.release")
	try := spans["redlock.try-acquire"][0]
	assert.Equal(t, codes.Error, try.Status().Code)
	assert.NotEmpty(t, events(try, "redlock.node.error"))
}

// TestNoParentWithoutSpan: a call whose context has no span makes root
// spans, as before.
func TestNoParentWithoutSpan(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	l, err := c.Acquire(t.Context(), newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))
	e.settle(c)
	for _, s := range e.spans.Ended() {
		assert.False(t, s.Parent().IsValid(), "%s has a parent", s.Name())
	}
}

// TestElection: a campaign that wins is a span under the Campaign's
// caller's span, with its term; the leadership a span from the election to
// its resignation; a leader Observe reports a span under Observe's
// caller's span; the leader metric is 1 while the Client leads and 0
// after, and the term gauge holds the term.
func TestElection(t *testing.T) {
	e := newEnv(t)
	c := e.client(redlockotel.WithKeyOnMetrics())
	watcher := e.client()
	key := newKey(t)
	el, err := c.Election(key, 2*time.Second)
	require.NoError(t, err)
	ctx, campaign := e.tp.Tracer("app").Start(t.Context(), "campaigner")
	ld, err := el.Campaign(ctx, "me")
	require.NoError(t, err)
	term := int64(ld.Term())
	require.Positive(t, term)
	m := e.metrics()
	assert.Equal(t, 1.0, sum(m["redlock.election.leader"], attribute.String("redlock.key", key)))
	assert.Equal(t, 1.0, sum(m["redlock.election.campaigns"]))
	assert.Equal(t, float64(term), sum(m["redlock.election.term"], attribute.String("redlock.key", key)))

	wel, err := watcher.Election(key, 2*time.Second)
	require.NoError(t, err)
	octx, observer := e.tp.Tracer("app").Start(t.Context(), "observer")
	octx, stop := context.WithCancel(octx)
	seen := wel.Observe(octx)
	select {
	case got := <-seen:
		assert.Equal(t, uint64(term), got.Term)
	case <-time.After(10 * time.Second):
		t.Fatal("no leader observed")
	}
	stop()
	for range seen {
	}
	observer.End()

	require.NoError(t, ld.Resign(ctx))
	campaign.End()
	require.Eventually(t, func() bool {
		return sum(e.metrics()["redlock.election.ended"]) == 1
	}, 5*time.Second, 10*time.Millisecond, "the leadership's end")
	e.settle(c)
	e.settle(watcher)

	spans := e.childrenOf(campaign.SpanContext(), "redlock.campaign", "redlock.leadership", "redlock.acquire", "redlock.release")
	won, led := spans["redlock.campaign"][0], spans["redlock.leadership"][0]
	v, _ := attr(won.Attributes(), "redlock.term")
	assert.Equal(t, term, v.AsInt64())
	v, _ = attr(led.Attributes(), "redlock.outcome")
	assert.Equal(t, "resigned", v.AsString())
	assert.Equal(t, codes.Unset, led.Status().Code)
	assert.False(t, led.StartTime().Before(won.EndTime().Add(-time.Millisecond)), "the leadership starts at the election")
	obs := e.childrenOf(observer.SpanContext(), "redlock.leader-observed")["redlock.leader-observed"]
	require.Len(t, obs, 1)
	v, _ = attr(obs[0].Attributes(), "redlock.term")
	assert.Equal(t, term, v.AsInt64())

	m = e.metrics()
	assert.Equal(t, 0.0, sum(m["redlock.election.leader"], attribute.String("redlock.key", key)))
	assert.Equal(t, 1.0, sum(m["redlock.election.ended"], attribute.String("redlock.outcome", "resigned")))
}

// TestLeadershipLost: a leadership lost (its key deleted on a majority of
// nodes) ends with a failed leadership span and outcome lost.
func TestLeadershipLost(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	key := newKey(t)
	el, err := c.Election(key, time.Second)
	require.NoError(t, err)
	ld, err := el.Campaign(t.Context(), "me")
	require.NoError(t, err)
	// Acquire returns at a quorum: the third node's write may land after
	// a delete made at once, and keep the key on a quorum.
	e.awaitKey(key)
	for _, d := range e.direct[:2] {
		require.NoError(t, d.Del(t.Context(), key).Err())
	}
	select {
	case <-ld.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leadership was not found lost")
	}
	_ = ld.Resign(t.Context())
	require.Eventually(t, func() bool {
		return sum(e.metrics()["redlock.election.ended"], attribute.String("redlock.outcome", "lost")) == 1
	}, 5*time.Second, 10*time.Millisecond, "the leadership's loss")
	e.settle(c)
	led := e.span("redlock.leadership")
	assert.Equal(t, codes.Error, led.Status().Code)
	v, _ := attr(led.Attributes(), "error.type")
	assert.Equal(t, "lock_lost", v.AsString())
	assert.Equal(t, 0.0, sum(e.metrics()["redlock.election.leader"]))
}

// TestBaggageOnMetrics: WithBaggageOnMetrics puts the members it names of
// the caller's baggage on the metrics, and no other.
func TestBaggageOnMetrics(t *testing.T) {
	e := newEnv(t)
	c := e.client(redlockotel.WithBaggageOnMetrics("tenant", "absent"))
	tenant, err := baggage.NewMember("tenant", "acme")
	require.NoError(t, err)
	secret, err := baggage.NewMember("user", "alice")
	require.NoError(t, err)
	b, err := baggage.New(tenant, secret)
	require.NoError(t, err)
	ctx := baggage.ContextWithBaggage(t.Context(), b)
	l, err := c.Acquire(ctx, newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	plain, err := c.Acquire(t.Context(), newKey(t), time.Minute)
	require.NoError(t, err)
	require.NoError(t, plain.Release(t.Context()))
	e.settle(c)

	m := e.metrics()
	assert.Equal(t, 2.0, sum(m["redlock.operation.duration"], attribute.String("tenant", "acme")))
	assert.Equal(t, 4.0, sum(m["redlock.operation.duration"]))
	assert.Equal(t, 1.0, sum(m["redlock.attempts"], attribute.String("tenant", "acme")))
	for name, points := range m {
		for _, p := range points {
			assert.False(t, p.attrs.HasValue("user"), "%s: a baggage member not asked for", name)
			assert.False(t, p.attrs.HasValue("absent"), "%s: a member the baggage lacks", name)
		}
	}
}
