// Package redlockotel adapts redlock's Hooks to OpenTelemetry: a span per
// lock operation, with the attempts and the nodes that did not confirm as
// span events, spans of elections, and metrics of attempts, operations, node
// errors, rollbacks, cleanup retries, deletes given up at Close, renewals,
// lost locks and elections.
//
// It lives in a module of its own so that the redlock library depends on no
// telemetry package. Wire it in with one call per Client:
//
//	c, err := redlock.New(nodes, redlock.WithHooks(redlockotel.Hooks()))
//
// # Spans after the fact
//
// redlock calls its hooks when something has happened: the Done hook
// reports an operation once it has returned, with its duration and the
// caller's context (redlock.Event.Context). The span of an operation is
// therefore made at that moment, with its start set back by the duration,
// so it has the right start, end and status, and the span in the caller's
// context as its parent: under an HTTP request's span, the request's
// Acquire and Release are its children, in its trace. The metrics are
// recorded with that context too, so that its span reaches the SDK
// (exemplars); WithBaggageOnMetrics puts named members of its baggage on
// them. Background work has the context of the call that started it,
// without its cancellation: a KeepAlive's renewals are "redlock.extend"
// spans under the span that called KeepAlive (a leadership's under the
// span that called Campaign), and a lost lock's span is there too.
//
// The attempts, rollbacks and per-node refusals, errors and timeouts of
// the operation arrive before its Done; they are held per key until the
// Done of that key turns them into events of its span, each at the time
// it happened. Only the events between the operation's start and end go
// into its span: earlier ones came from an earlier operation's background
// work, such as a rollback or the late replies of a Release that returned
// on a quorum, and are dropped; later ones came while the span was being
// made, and stay held for the next.
//
// That correlation by key has limits, which cost events, never memory:
//   - Concurrent operations on one key through one Client share the events
//     held for the key: the first Done takes them all. Acquire calls of one
//     Client for one key queue and contend one at a time, so this is about
//     an Extend or Release on a key while another call waits for it.
//   - An operation returns as soon as its outcome is decided, without
//     waiting for the other nodes: their replies, and background work such
//     as the deletes of a rollback, come after its span was made. They show
//     in the next span of the key when they fall in that span's time, and
//     otherwise in no span. The metrics count all of them.
//   - At most maxEventsPerKey events are held per key (the oldest go
//     first, and the span says how many with redlock.events.dropped) and
//     at most WithMaxPendingKeys keys (the least recently touched go
//     first). Keys whose events no Done takes are evicted in the same way.
//
// Call Hooks once per Client: each call holds its own events, so two
// Clients locking the same key do not mix theirs.
//
// # What is recorded
//
// No attribute ever holds a token or a value: the hooks never see one. The
// key is an attribute of spans (redlock.key) unless WithoutKeyOnSpans, and
// of metrics only with WithKeyOnMetrics, because a key per entity would make
// a time series per entity. Without keys on spans, the error messages of
// operations, which quote the key, are left out too: the span then says
// why it failed with error.type alone.
//
// A failed operation's span has status Error, the error recorded as an
// exception event, and error.type set to its outcome: "not_acquired",
// "not_held", "release_unconfirmed", "canceled", "deadline_exceeded",
// "invalid_argument", "closed" or "error". A TryAcquire refused because
// another holder has the key is an Error too, since it did not do what it
// was asked to, though under contention that is the expected answer:
// filter on error.type to tell contention from trouble.
//
// A span has redlock.op, redlock.outcome, redlock.key and, for acquires,
// redlock.attempts; its events are:
//
//	redlock.attempt     redlock.attempt (1 for the first), redlock.acquired, redlock.elapsed (seconds), error.type
//	redlock.node.error  redlock.node.op, redlock.node (index), redlock.node.addr, redlock.node.reason, redlock.node.timeout, redlock.node.error
//	redlock.rollback    redlock.nodes (where the failed attempt may have written)
//
// redlock.node.reason is "held_by_other", "key_absent", "restart_guard",
// "no_reply" or "error"; redlock.node.op is the script the node was asked
// to run: "acquire", "commit", "extend", "restore", "delete" or "handover"
// (a Release handing the key to the next waiter of the same Client).
//
// # Elections
//
// An Election's campaign that won is a "redlock.campaign" span, from the
// Campaign's start to its election, under the Campaign's caller's span,
// with redlock.term; a leadership is a "redlock.leadership" span from its
// election to its end, with redlock.term and redlock.outcome: "resigned",
// "closed", or "lost" (then status Error and error.type "lock_lost"). A
// leader that Observe reports is a "redlock.leader-observed" span of no
// duration under Observe's caller's span, with redlock.term.
//
// Metrics, all with the instrumentation scope of this package:
//
//	redlock.attempts            counter    redlock.acquired
//	redlock.operation.duration  histogram  redlock.op, redlock.outcome (seconds)
//	redlock.node.errors         counter    redlock.node.op, redlock.node.addr, redlock.node.reason, redlock.node.timeout
//	redlock.rollbacks           counter
//	redlock.cleanup.retries     counter    redlock.node.addr
//	redlock.cleanup.abandoned   counter    redlock.node.addr
//	redlock.renewals            counter    redlock.outcome
//	redlock.locks.lost          counter
//	redlock.election.campaigns  counter    (campaigns started)
//	redlock.election.leader     up-down    1 while this Client leads, 0 otherwise (summed over keys without WithKeyOnMetrics)
//	redlock.election.ended      counter    redlock.outcome: resigned, closed, lost
//	redlock.election.term       gauge      the latest term this Client was elected with or observed
//
// redlock.election.leader is client-go's leader_election_master_status:
// with WithKeyOnMetrics, one series per election key, 1 for the leader's
// process; without it, how many leaderships the Client holds.
//
// The count of redlock.operation.duration is the number of operations by op
// and outcome: there is no separate counter of operations, which would
// repeat it. A renewal of KeepAlive is an Extend, so it has a
// "redlock.extend" span as well as its count in redlock.renewals; a lost
// lock has a span of its own, "redlock.lock-lost", with no duration.
package redlockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/redlock-go/redlock/otel"

// DefaultMaxPendingKeys is how many keys may have events waiting for their
// operation's end at once, unless WithMaxPendingKeys says otherwise.
const DefaultMaxPendingKeys = 1024

// maxEventsPerKey bounds the events held for one key: the attempts of a long
// Acquire under contention, with a refusal per node each, would otherwise
// grow without end. The newest are kept.
const maxEventsPerKey = 128

// Attribute keys.
const (
	keyOp         = attribute.Key("redlock.op")
	keyKey        = attribute.Key("redlock.key")
	keyOutcome    = attribute.Key("redlock.outcome")
	keyAttempts   = attribute.Key("redlock.attempts")
	keyDropped    = attribute.Key("redlock.events.dropped")
	keyAttempt    = attribute.Key("redlock.attempt")
	keyAcquired   = attribute.Key("redlock.acquired")
	keyElapsed    = attribute.Key("redlock.elapsed") // seconds
	keyNodes      = attribute.Key("redlock.nodes")
	keyNodeOp     = attribute.Key("redlock.node.op")
	keyNode       = attribute.Key("redlock.node")
	keyNodeAddr   = attribute.Key("redlock.node.addr")
	keyNodeReason = attribute.Key("redlock.node.reason")
	keyTimeout    = attribute.Key("redlock.node.timeout")
	keyNodeError  = attribute.Key("redlock.node.error")
	keyTerm       = attribute.Key("redlock.term")
	keyErrorType  = attribute.Key("error.type")
)

// Option configures Hooks.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	keyOnSpans  bool
	keyOnMetric bool
	maxKeys     int
	baggageKeys []string
}

// WithTracerProvider sets where spans go; the default, and what nil means,
// is the global provider (otel.GetTracerProvider) at the time Hooks is
// called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go; the default, and what nil means,
// is the global provider (otel.GetMeterProvider) at the time Hooks is
// called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithoutKeyOnSpans leaves the key, and the error messages that quote it,
// out of spans: for keys that name what must not reach the tracing backend.
func WithoutKeyOnSpans() Option {
	return optionFunc(func(c *config) { c.keyOnSpans = false })
}

// WithKeyOnMetrics adds the key (redlock.key) to the metrics of operations,
// attempts, node errors, rollbacks, cleanup retries, deletes given up at
// Close, renewals and lost locks. Use it only with few, fixed keys: each key is a time series of
// each metric.
func WithKeyOnMetrics() Option {
	return optionFunc(func(c *config) { c.keyOnMetric = true })
}

// WithBaggageOnMetrics adds the members named keys of the baggage in the
// caller's context (redlock.Event.Context) to the attributes of every
// metric, each under its own name, when the baggage has it: a tenant or a
// service tier, say. Each value of a member is a time series of each
// metric: name only members with few values.
func WithBaggageOnMetrics(keys ...string) Option {
	return optionFunc(func(c *config) { c.baggageKeys = append(c.baggageKeys, keys...) })
}

// WithMaxPendingKeys bounds the keys whose events wait for their
// operation's end (DefaultMaxPendingKeys unless set; n < 1 means 1). Past
// it the key least recently touched loses its events, so a span may lack
// some when more keys than n are in operation at once.
func WithMaxPendingKeys(n int) Option {
	return optionFunc(func(c *config) { c.maxKeys = max(n, 1) })
}

// Hooks returns redlock hooks that report to OpenTelemetry. Give each Client
// its own: the events it holds for keys are per call (see the package
// documentation). Instruments that cannot be made are reported to
// otel.Handle and replaced by ones that record nothing. A nil option is a
// programming error: Hooks panics.
func Hooks(opts ...Option) redlock.Hooks {
	cfg := config{keyOnSpans: true, maxKeys: DefaultMaxPendingKeys}
	for _, o := range opts {
		if o == nil {
			panic("redlockotel: nil option")
		}
		o.apply(&cfg)
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	a := &adapter{
		cfg:     cfg,
		tracer:  cfg.tp.Tracer(ScopeName),
		pending: newPending(cfg.maxKeys, maxEventsPerKey),
	}
	a.instruments(cfg.mp.Meter(ScopeName))
	return redlock.Hooks{
		Attempt:      a.attempt,
		Done:         a.done,
		NodeError:    a.nodeError,
		Rollback:     a.rollback,
		CleanupRetry: a.cleanupRetry,
		Renewal:      a.renewal,
		LockLost:     a.lost,

		CleanupAbandoned: a.cleanupAbandoned,

		CampaignStarted: a.campaignStarted,
		Elected:         a.elected,
		LeadershipEnded: a.leadershipEnded,
		LeaderObserved:  a.leaderObserved,
	}
}

type adapter struct {
	cfg        config
	tracer     trace.Tracer
	pending    *pending
	metricOpts sync.Map // attrKey to metric.MeasurementOption, without keys

	attempts   metric.Int64Counter
	duration   metric.Float64Histogram
	nodeErrors metric.Int64Counter
	rollbacks  metric.Int64Counter
	cleanups   metric.Int64Counter
	abandoned  metric.Int64Counter
	renewals   metric.Int64Counter
	lostLocks  metric.Int64Counter
	campaigns  metric.Int64Counter
	leader     metric.Int64UpDownCounter
	ended      metric.Int64Counter
	term       metric.Int64Gauge
}

// durationBounds suit lock operations, which take from a fraction of a
// millisecond on a LAN to seconds when Acquire waits for a holder.
var durationBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func (a *adapter) instruments(m metric.Meter) {
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		if c == nil {
			return noop.Int64Counter{}
		}
		return c
	}
	a.attempts = counter("redlock.attempts", "{attempt}", "Attempts of Acquire and TryAcquire, by whether they took the lock.")
	a.nodeErrors = counter("redlock.node.errors", "{reply}", "Node replies that were not a confirmation: a refusal, an error, or no reply in time.")
	a.rollbacks = counter("redlock.rollbacks", "{rollback}", "Failed attempts whose writes were deleted again.")
	a.cleanups = counter("redlock.cleanup.retries", "{retry}", "Deletes with no definite answer, to be tried again.")
	a.abandoned = counter("redlock.cleanup.abandoned", "{delete}", "Deletes that Close gave up, their node silent: the key stays there until its TTL ends.")
	a.renewals = counter("redlock.renewals", "{renewal}", "Renewals of locks kept alive by KeepAlive, by outcome.")
	a.lostLocks = counter("redlock.locks.lost", "{lock}", "Kept-alive locks that could no longer be proven held.")
	a.campaigns = counter("redlock.election.campaigns", "{campaign}", "Campaigns started for an election's leadership.")
	a.ended = counter("redlock.election.ended", "{leadership}", "Leaderships ended, by outcome: resigned, closed or lost.")
	leader, err := m.Int64UpDownCounter("redlock.election.leader", metric.WithUnit("{leadership}"),
		metric.WithDescription("Leaderships this Client holds: 1 while it leads an election's key, 0 otherwise."))
	errs = append(errs, err)
	a.leader = leader
	if leader == nil {
		a.leader = noop.Int64UpDownCounter{}
	}
	term, err := m.Int64Gauge("redlock.election.term", metric.WithUnit("{term}"),
		metric.WithDescription("The latest term this Client was elected with or observed."))
	errs = append(errs, err)
	a.term = term
	if term == nil {
		a.term = noop.Int64Gauge{}
	}
	h, err := m.Float64Histogram("redlock.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Acquire, TryAcquire, Extend and Release calls, by op and outcome."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	a.duration = h
	if h == nil {
		a.duration = noop.Float64Histogram{}
	}
	if err := errors.Join(append(errs, err)...); err != nil {
		otel.Handle(err)
	}
}

// Outcomes of an operation or a renewal, from its error. The context's
// errors come first: they are joined with the operation's sentinel.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, redlock.ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.Is(err, redlock.ErrNotAcquired):
		return "not_acquired"
	case errors.Is(err, redlock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, redlock.ErrReleaseUnconfirmed):
		return "release_unconfirmed"
	}
	return "error"
}

// nodeReason names why a node did not confirm.
func nodeReason(err error) string {
	switch {
	case errors.Is(err, redlock.ErrHeldByOther):
		return "held_by_other"
	case errors.Is(err, redlock.ErrKeyAbsent):
		return "key_absent"
	case errors.Is(err, redlock.ErrRestartGuard):
		return "restart_guard"
	case errors.Is(err, redlock.ErrNoReply):
		return "no_reply"
	}
	return "error"
}

// attrKey identifies a metric's attributes, at most four of them, in the
// cache of measurement options.
type attrKey [4]attribute.KeyValue

// metricAttrs returns the measurement option for attrs (at most four), with
// the event's key when WithKeyOnMetrics asked for it and the baggage
// members WithBaggageOnMetrics names. Without either the options are made
// once and cached: every attribute of a metric has few values (an op, an
// outcome, a node address, a reason), so the cache stays small, and
// building the set each time was most of a hook's cost.
func (a *adapter) metricAttrs(ev redlock.Event, attrs ...attribute.KeyValue) metric.MeasurementOption {
	if a.cfg.keyOnMetric || len(a.cfg.baggageKeys) > 0 {
		attrs = a.withBaggage(ev.Context, attrs)
		if a.cfg.keyOnMetric {
			attrs = append(attrs, keyKey.String(ev.Key))
		}
		return metric.WithAttributes(attrs...)
	}
	var k attrKey
	if copy(k[:], attrs) < len(attrs) {
		panic("redlockotel: more metric attributes than attrKey holds")
	}
	if o, ok := a.metricOpts.Load(k); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := a.metricOpts.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attrs...)))
	return o.(metric.MeasurementOption)
}

// withBaggage is attrs with the members of ctx's baggage that
// WithBaggageOnMetrics names, those it holds.
func (a *adapter) withBaggage(ctx context.Context, attrs []attribute.KeyValue) []attribute.KeyValue {
	if ctx == nil {
		return attrs
	}
	b := baggage.FromContext(ctx)
	out := attrs
	for _, k := range a.cfg.baggageKeys {
		if m := b.Member(k); m.Key() != "" {
			if len(out) == len(attrs) {
				out = append(make([]attribute.KeyValue, 0, len(attrs)+len(a.cfg.baggageKeys)+1), attrs...)
			}
			out = append(out, attribute.String(k, m.Value()))
		}
	}
	return out
}

func (a *adapter) attempt(ev redlock.Event) {
	acquired := ev.Err == nil
	a.attempts.Add(ctxOf(ev), 1, a.metricAttrs(ev, keyAcquired.Bool(acquired)))
	attrs := []attribute.KeyValue{
		keyAttempt.Int(ev.Attempt),
		keyAcquired.Bool(acquired),
		keyElapsed.Float64(ev.Elapsed.Seconds()),
	}
	if ev.Err != nil {
		attrs = append(attrs, keyErrorType.String(outcome(ev.Err)))
	}
	a.pending.add(ev.Key, event{name: "redlock.attempt", at: time.Now(), attrs: attrs})
}

func (a *adapter) nodeError(ev redlock.Event) {
	reason := nodeReason(ev.Err)
	timeout := errors.Is(ev.Err, redlock.ErrNoReply)
	a.nodeErrors.Add(ctxOf(ev), 1, a.metricAttrs(ev,
		keyNodeOp.String(ev.Op), keyNodeAddr.String(ev.Addr), keyNodeReason.String(reason), keyTimeout.Bool(timeout)))
	attrs := []attribute.KeyValue{
		keyNodeOp.String(ev.Op),
		keyNode.Int(ev.Node),
		keyNodeAddr.String(ev.Addr),
		keyNodeReason.String(reason),
		keyTimeout.Bool(timeout),
	}
	// A node's error is a sentinel or its client's error, neither of which
	// quotes the key.
	if ev.Err != nil {
		attrs = append(attrs, keyNodeError.String(ev.Err.Error()))
	}
	a.pending.add(ev.Key, event{name: "redlock.node.error", at: time.Now(), attrs: attrs})
}

func (a *adapter) rollback(ev redlock.Event) {
	a.rollbacks.Add(ctxOf(ev), 1, a.metricAttrs(ev))
	a.pending.add(ev.Key, event{name: "redlock.rollback", at: time.Now(), attrs: []attribute.KeyValue{keyNodes.Int(ev.Nodes)}})
}

// cleanupRetry is counted only: a retried delete is background work that
// outlives the operation that launched it.
func (a *adapter) cleanupRetry(ev redlock.Event) {
	a.cleanups.Add(ctxOf(ev), 1, a.metricAttrs(ev, keyNodeAddr.String(ev.Addr)))
}

// cleanupAbandoned is counted only, as cleanupRetry is: Close gave the
// delete up after its operation ended.
func (a *adapter) cleanupAbandoned(ev redlock.Event) {
	a.abandoned.Add(ctxOf(ev), 1, a.metricAttrs(ev, keyNodeAddr.String(ev.Addr)))
}

func (a *adapter) renewal(ev redlock.Event) {
	a.renewals.Add(ctxOf(ev), 1, a.metricAttrs(ev, keyOutcome.String(outcome(ev.Err))))
}

func (a *adapter) done(ev redlock.Event) {
	end := time.Now()
	start := end.Add(-ev.Elapsed)
	out := outcome(ev.Err)
	a.duration.Record(ctxOf(ev), ev.Elapsed.Seconds(),
		a.metricAttrs(ev, keyOp.String(ev.Op), keyOutcome.String(out)))

	attrs := make([]attribute.KeyValue, 0, 5) // room for all: no growing
	attrs = append(attrs, keyOp.String(ev.Op), keyOutcome.String(out))
	if a.cfg.keyOnSpans {
		attrs = append(attrs, keyKey.String(ev.Key))
	}
	events, dropped := a.pending.take(ev.Key, start, end)
	attempts := 0
	for _, e := range events {
		if e.name == "redlock.attempt" {
			attempts++
		}
	}
	if attempts > 0 {
		attrs = append(attrs, keyAttempts.Int(attempts))
	}
	if dropped > 0 {
		attrs = append(attrs, keyDropped.Int(dropped))
	}
	_, span := a.tracer.Start(ctxOf(ev), "redlock."+ev.Op,
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	for _, e := range events {
		span.AddEvent(e.name, trace.WithTimestamp(e.at), trace.WithAttributes(e.attrs...))
	}
	a.fail(span, ev.Err, out, end)
	span.End(trace.WithTimestamp(end))
}

// lost makes a span of no duration for a lock that KeepAlive could no
// longer prove held: nothing else marks the moment in a trace.
func (a *adapter) lost(ev redlock.Event) {
	a.lostLocks.Add(ctxOf(ev), 1, a.metricAttrs(ev))
	now := time.Now()
	var attrs []attribute.KeyValue
	if a.cfg.keyOnSpans {
		attrs = append(attrs, keyKey.String(ev.Key))
	}
	_, span := a.tracer.Start(ctxOf(ev), "redlock.lock-lost",
		trace.WithTimestamp(now), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	cause := ev.Err
	if cause == nil { // the hook promises one; a span with status Error needs one
		cause = redlock.ErrLockLost
	}
	a.fail(span, cause, "lock_lost", now)
	span.End(trace.WithTimestamp(now))
}

// fail marks span as failed with err, unless err is nil. The message of err
// quotes the key, so it stays out when keys do.
func (a *adapter) fail(span trace.Span, err error, errType string, at time.Time) {
	if err == nil {
		return
	}
	span.SetAttributes(keyErrorType.String(errType))
	if !a.cfg.keyOnSpans {
		span.SetStatus(codes.Error, errType)
		return
	}
	span.RecordError(err, trace.WithTimestamp(at))
	span.SetStatus(codes.Error, err.Error())
}

func (a *adapter) campaignStarted(ev redlock.Event) {
	a.campaigns.Add(ctxOf(ev), 1, a.metricAttrs(ev))
}

// elected makes the span of the campaign that won, and counts its
// leadership.
func (a *adapter) elected(ev redlock.Event) {
	a.leader.Add(ctxOf(ev), 1, a.metricAttrs(ev))
	a.term.Record(ctxOf(ev), int64(ev.Term), a.metricAttrs(ev))
	end := time.Now()
	_, span := a.tracer.Start(ctxOf(ev), "redlock.campaign", trace.WithTimestamp(end.Add(-ev.Elapsed)),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(a.spanAttrs(ev.Key, keyTerm.Int64(int64(ev.Term)))...))
	span.End(trace.WithTimestamp(end))
}

// leadershipEnded makes the span of the leadership, from its election to
// its end, failed when it was lost.
func (a *adapter) leadershipEnded(ev redlock.Event) {
	out := endedOutcome(ev.Err)
	a.leader.Add(ctxOf(ev), -1, a.metricAttrs(ev))
	a.ended.Add(ctxOf(ev), 1, a.metricAttrs(ev, keyOutcome.String(out)))
	end := time.Now()
	_, span := a.tracer.Start(ctxOf(ev), "redlock.leadership", trace.WithTimestamp(end.Add(-ev.Elapsed)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(a.spanAttrs(ev.Key, keyTerm.Int64(int64(ev.Term)), keyOutcome.String(out))...))
	if out == "lost" {
		a.fail(span, ev.Err, "lock_lost", end)
	}
	span.End(trace.WithTimestamp(end))
}

// leaderObserved makes a span of no duration for a leader that Observe
// reported, as lost does for a lost lock.
func (a *adapter) leaderObserved(ev redlock.Event) {
	a.term.Record(ctxOf(ev), int64(ev.Term), a.metricAttrs(ev))
	now := time.Now()
	_, span := a.tracer.Start(ctxOf(ev), "redlock.leader-observed", trace.WithTimestamp(now),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(a.spanAttrs(ev.Key, keyTerm.Int64(int64(ev.Term)))...))
	span.End(trace.WithTimestamp(now))
}

// spanAttrs is attrs with the key, unless WithoutKeyOnSpans.
func (a *adapter) spanAttrs(key string, attrs ...attribute.KeyValue) []attribute.KeyValue {
	if a.cfg.keyOnSpans {
		attrs = append(attrs, keyKey.String(key))
	}
	return attrs
}

// endedOutcome names why a leadership ended.
func endedOutcome(cause error) string {
	switch {
	case errors.Is(cause, redlock.ErrReleased):
		return "resigned"
	case errors.Is(cause, redlock.ErrClosed):
		return "closed"
	case errors.Is(cause, redlock.ErrLockLost):
		return "lost"
	}
	return "error"
}

// ctxOf is the event's context, which redlock always sets; a hook called
// with an Event made elsewhere, without one, reports with no parent.
func ctxOf(ev redlock.Event) context.Context {
	if ev.Context == nil {
		return context.Background()
	}
	return ev.Context
}
