package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisnode"
)

// The nodes and the call path: a node is one master with its health as
// seen, a Set all of them with their quorum; node.call runs one
// operation on one node (node.eval) and records the outcome.

// node is one independent Redis master and what we have seen of it.
type node struct {
	index  int
	client redis.UniversalClient
	addr   atomic.Pointer[string] // the configured address; a Sentinel master's once resolved

	// bounded: the library's calls through the client end at their
	// context's deadline (ContextTimeoutEnabled, or a plain client's
	// bounded copy, bound.go), so a call may run on the caller's goroutine
	// without holding the caller past the node deadline.
	bounded bool

	batch batcher // sends the calls that meet here together (batch.go)
	// sources are the scripts' texts (Config.Sources), shared, read-only.
	sources map[*redis.Script]string

	inFlight        atomic.Int64 // calls started and not yet returned by go-redis
	failures        atomic.Int64 // consecutive calls with no timely, valid reply
	pendingCleanups atomic.Int64 // deletes waiting to be tried again
	lastErr         atomic.Pointer[errBox]
	// lastCause is the node's latest error other than a deadline since its
	// last timely success, nil when none: what a node that does not answer
	// in time is shown with (silence).
	lastCause atomic.Pointer[errBox]

	identMu sync.Mutex // lock order: before Life.mu only (docs/internals.md)
	// identifying is closed when the identify call under way ends; nil
	// when none is.
	identifying chan struct{}
	identTried  time.Time // when the last identify call ended, or a wait for it ran out; zero before
	ident       []string  // the run_ids of the server(s) behind the client; nil until known
	// identUnknowable is set when the server does not let us ask (an ACL
	// without INFO): the node is then trusted as configured.
	identUnknowable bool
	// replica is set while the server is known to be a replica (ROLE):
	// the node is refused (compareServers), and asked again.
	replica *role

	// clock is what the node's writes carry their deadlines with
	// (clock.go); drift is the rate at which a reading of it ages
	// (Timing.ClockDrift).
	clock nodeClock
	drift float64
	// rtt is the node's latency as learned from its replies, which gives
	// its deadline (rtt.go).
	rtt rttEstimate
	// oneClock is true when every call reaches the same server, and so
	// the clock that was read: a plain client, not a Cluster's or a
	// Sentinel-managed one, whose calls may reach another server.
	oneClock bool
}

type errBox struct{ err error }

func (n *node) address() string {
	if a := n.addr.Load(); a != nil {
		return *a
	}
	return ""
}

// record notes the outcome of one call for NodeStatus.
func (n *node) record(err error, late bool) {
	if err == nil && !late {
		n.failures.Store(0)
		n.lastCause.Store(nil)
		return
	}
	if err == nil {
		err = ErrNoReply
	}
	n.failures.Add(1)
	n.lastErr.Store(&errBox{err})
}

// silence is how a node that did not answer in time is shown: ErrNoReply,
// or when its calls failed since its last timely success (a refused
// connection that go-redis took longer to report than our deadline), that
// error, which is what happened, matching ErrNoReply too.
func (n *node) silence() error {
	b := n.lastCause.Load()
	if b == nil {
		return ErrNoReply
	}
	if errors.Is(b.err, ErrNoReply) || IsMisconfig(b.err) { // a late call's, said already; a refusal of ours, not a silence
		return b.err
	}
	return silentError{b.err}
}

// silentError is a node's latest error, shown for a call of it that got no
// reply in time.
type silentError struct{ cause error }

func (e silentError) Error() string {
	return e.cause.Error() + " (" + strings.TrimPrefix(ErrNoReply.Error(), "redlock: ") + ")"
}

func (e silentError) Unwrap() []error { return []error{e.cause, ErrNoReply} }

// call runs one operation on one node and records its health. args is the
// operation's command line from evalArgs; cmd, if not nil, is where the
// go-redis command is built (see job.cmd). A reply that comes once ctx has
// ended is late: an unknown outcome is then ErrNoReply, and the node's
// health counts it as a failure (record). A plain client ends the call at
// ctx's deadline (bound.go).
func (n *node) call(ctx context.Context, op *Op, args []any, cmd *redis.Cmd) Reply {
	return n.callOn(n.client, ctx, op, args, cmd, false)
}

// once is a command that go-redis sends once: every command of a round
// is marked so (go-redis's NoRetry), alone or in a batch. go-redis would
// otherwise send it again on a new connection after a reset or an EOF,
// and a pipeline whole, under a batch's latest deadline: the copy's reply
// would hide the first copy, which may still land. A failure is then
// ours to see, as an unknown outcome; a delete's lane tries again itself.
// A struct of one pointer, it is boxed as a Cmder without an allocation.
type once struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the command again.
func (once) NoRetry() bool { return true }

// callOn is call on c, the node's client; alone is
// set for a call on a round's caller's goroutine, which goes at once
// rather than wait for the node's next batch (batcher.process).
func (n *node) callOn(c redis.UniversalClient, ctx context.Context, op *Op, args []any, cmd *redis.Cmd, alone bool) Reply {
	n.inFlight.Add(1)
	r, sent := n.eval(c, ctx, op, args, cmd, alone)
	n.inFlight.Add(-1)
	if !sent {
		// Its context ended while it waited for the node's next batch:
		// nothing went out, and the node said nothing about its health.
		return Reply{Err: errNotSent, Node: n.index}
	}
	late := ctx.Err() != nil || r.Status == Unknown && pastDeadline(ctx)
	nodeErr := r.Status == Unknown && r.Err != nil && !IsContextErr(r.Err)
	if nodeErr {
		r.Err = asMisconfig(r.Err) // refused credentials or rights: said as such, late or not
	}
	if late && r.Status == Unknown && !IsMisconfig(r.Err) {
		r.TimedOut = pastDeadline(ctx)
		// A client with ContextTimeoutEnabled gives up at our deadline
		// itself: the same unknown outcome as our waiter giving up. The
		// client's context error is left out: errors.Is(err,
		// context.DeadlineExceeded) on a returned error, and its text,
		// must mean that the caller's context ended, not a node's deadline.
		if nodeErr {
			r.Err = fmt.Errorf("%w: %w", ErrNoReply, r.Err)
		} else {
			r.Err = ErrNoReply
		}
	}
	n.record(r.TransportErr(), late)
	if nodeErr {
		n.lastCause.Store(&errBox{r.Err})
	}
	r.Node = n.index
	return r
}

// evalArgs appends op's EVALSHA command line to a. A round builds it once,
// in its own allocation, and its calls on every node share it, read-only:
// redis.Script.Run would build and box it again for each node (three
// allocations per call). The script's hash comes boxed from the Set's hashes,
// and the lock's key from its Lanes.
func (p *Set) evalArgs(seq *Lanes, op *Op, a []any) []any {
	hash, ok := p.hashes[op.Script]
	if !ok {
		hash = op.Script.Hash()
	}
	keys := op.KeyList()
	pairs := op.latePairs()
	a = append(a, "evalsha", hash, len(keys)+pairs)
	if pairs > 0 {
		a = append(a, op.Refusals)
		if pairs > 1 {
			a = append(a, op.LeavingRefusals)
		}
	}
	if op.Many != nil && seq != nil {
		a = append(slices.Grow(a, len(keys)+pairs+op.NArgs), seq.manyArgs(keys)...)
	} else {
		for i, k := range keys {
			if i == 0 && seq != nil {
				a = append(a, seq.keyArg(k))
			} else {
				a = append(a, k)
			}
		}
	}
	for range pairs {
		a = append(a, int64(0)) // each call's own (lateArgs)
	}
	return append(a, op.Args[:op.NArgs]...)
}

// lateAt is where, in a command line from evalArgs, the first of op's
// node-clock milliseconds is.
func lateAt(op *Op) int { return 3 + op.latePairs() + len(op.KeyList()) }

// eval runs op on c with its prepared EVALSHA command line, through the
// node's batcher, and reads the reply; sent is false when the command did
// not go out (batcher.process). A node that does not know the script
// (NOSCRIPT, as after a restart) gets EVAL with the source, on the same
// client. Both are sent once (see once).
func (n *node) eval(c redis.UniversalClient, ctx context.Context, op *Op, args []any, cmd *redis.Cmd, alone bool) (r Reply, sent bool) {
	if cmd == nil {
		cmd = redis.NewCmd(ctx, args...)
	} else {
		*cmd = *redis.NewCmd(ctx, args...)
	}
	if len(op.KeyList()) > 0 {
		cmd.SetFirstKeyPos(3) // a cluster client routes by the first key
	}
	start := time.Now()
	if !n.batch.process(c, ctx, cmd, alone) {
		return Reply{}, false
	}
	if err := cmd.Err(); err != nil && (errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")) {
		// The node does not know the script (a restart, SCRIPT FLUSH): the
		// source, once, which the node keeps for the next EVALSHA.
		text, ok := n.sources[op.Script]
		if !ok {
			return op.Read(cmd), true // a script nobody gave the text of: its NOSCRIPT stands
		}
		src := redis.NewCmd(ctx, append([]any{"eval", text}, args[2:]...)...)
		if len(op.KeyList()) > 0 {
			src.SetFirstKeyPos(3)
		}
		start = time.Now()
		_ = c.Process(ctx, once{src})
		cmd = src
	}
	if replied(cmd.Err()) {
		n.rtt.observe(start, time.Now())
	}
	if ms, late := readLate(cmd); late {
		// The node's clock had passed the write's deadline: the write was
		// held up, or what we knew of the clock was wrong (a step, a drift
		// beyond the margin), and then what it says now is kept.
		n.clock.noteLate(ms, start, time.Now(), n.drift)
		// Past its deadline: too short for the call, whatever held it.
		return Reply{Status: Refused, Err: ErrLate, TimedOut: true}, true
	}
	return op.Read(cmd), true
}

// replied reports whether a call that ended with err got the server's
// reply: none, or an error reply, not a failure to reach it. Only a reply
// is a sample of the node's latency.
func replied(err error) bool {
	if err == nil || err == redis.Nil {
		return true
	}
	// A reply's error is go-redis's own, unwrapped: asserted first, as
	// errors.As's target escapes, an allocation for every error reply a
	// round reads (a delete's or a refusal's, two a node in each
	// Acquire and Release).
	if _, ok := err.(redis.Error); ok {
		return true
	}
	var re redis.Error
	return errors.As(err, &re)
}

// Config is what a Set needs of its Client.
type Config struct {
	// Observer, if not nil, is told of node errors and cleanup retries.
	Observer Observer
	// Scripts are every script the rounds send: Warm loads them, and
	// their hashes are computed once. Sources are their texts, sent with
	// EVAL to a node that does not know one.
	Scripts []*redis.Script
	Sources map[*redis.Script]string
	// KeyLife is the longest a key written with a TTL may live once
	// written, on our clock: past it a delete has nothing left to remove.
	KeyLife func(ttl time.Duration) time.Duration
	Timing  Timing
}

// Timing is the engine's share of the Client's timing rules.
type Timing struct {
	CleanupRetryMin, CleanupRetryMax time.Duration // a delete's retries back off between these
	WorkerIdle                       time.Duration // an idle worker exits after this
	IdentifyTimeout                  time.Duration // bounds the first contact with a node
	IdentifyRetry                    time.Duration // the least time between two identify calls to a node
	SubRetryMin, SubRetryMax         time.Duration // a failed pub/sub read waits between these
	// A node's clock is read again once its reading is ClockRefresh old;
	// a write's deadline on it allows the reading's error: half the round
	// trip it was read in, ClockDrift times its age, and LateSlack.
	ClockRefresh time.Duration
	ClockDrift   float64
	LateSlack    time.Duration
}

// Set holds the masters, the quorum they need, the workers that call
// them and the lifecycle of the work in progress.
type Set struct {
	nodes   []*node
	Quorum  int
	Life    Life
	obs     Observer // told of node errors and cleanup retries, when observe is set
	observe bool
	scripts []*redis.Script       // every script a round may send, loaded by Warm
	hashes  map[*redis.Script]any // their SHA1 digests, boxed once for the command lines
	keyLife func(time.Duration) time.Duration
	timing  Timing

	tasks chan task // hands work to idle workers
	sched deadlines // the rounds' deadlines

	// verified is set once every node's server is known and no two nodes
	// share one; until then each operation checks (see CheckServers).
	verified atomic.Bool
}

// NewSet validates the clients given to New, without any I/O: nil
// clients and the same client or server address twice are refused here;
// two addresses of one server are found once both answered (CheckServers),
// and neither votes before.
func NewSet(clients []redis.UniversalClient, cfg Config) (*Set, error) {
	if len(clients) == 0 {
		return nil, invalid("no nodes")
	}
	p := &Set{Quorum: len(clients)/2 + 1, tasks: make(chan task), obs: cfg.Observer, observe: cfg.Observer != nil,
		scripts: cfg.Scripts, keyLife: cfg.KeyLife, timing: cfg.Timing, hashes: make(map[*redis.Script]any, len(cfg.Scripts))}
	for _, s := range cfg.Scripts {
		p.hashes[s] = s.Hash()
	}
	p.Life.init()
	for i, c := range clients {
		if redisnode.IsNil(c) {
			return nil, invalid("node %d is nil", i)
		}
		n := &node{index: i, client: c, bounded: boundsCalls(c), sources: cfg.Sources, drift: cfg.Timing.ClockDrift}
		if rc, ok := c.(*redis.Client); ok {
			if !n.bounded {
				n.bounded = bound(rc)
			}
			// go-redis names a Sentinel-managed client's address so.
			n.oneClock = rc.Options().Addr != "FailoverClient"
		}
		addr := redisnode.Addr(c)
		n.addr.Store(&addr)
		for _, o := range p.nodes {
			if sameClient(o, n) {
				return nil, invalid("nodes %d and %d are the same Redis (%s): Redlock needs independent masters", o.index, i, addr)
			}
		}
		p.nodes = append(p.nodes, n)
	}
	return p, nil
}

// sameClient catches, without I/O, the same client passed twice and two
// plain clients for the same address and database.
func sameClient(a, b *node) bool {
	if reflect.TypeOf(a.client) == reflect.TypeOf(b.client) && reflect.TypeOf(a.client).Comparable() && a.client == b.client {
		return true
	}
	ca, ok1 := a.client.(*redis.Client)
	cb, ok2 := b.client.(*redis.Client)
	if !ok1 || !ok2 {
		return false
	}
	oa, ob := ca.Options(), cb.Options()
	if oa.Network != ob.Network || oa.Addr != ob.Addr || oa.DB != ob.DB {
		return false
	}
	// A Sentinel failover client reports a placeholder address, not a
	// server; CheckServers identifies it at first contact.
	if oa.Network == "tcp" || oa.Network == "" {
		if _, _, err := net.SplitHostPort(oa.Addr); err != nil {
			return false
		}
	}
	return true
}

// boundsCalls reports whether c ends a call at its context's deadline: go-redis
// does only with ContextTimeoutEnabled, and only while it sets socket
// deadlines at all (a ReadTimeout or WriteTimeout of -2 turns them off, even
// the context's); otherwise a silent node holds the call until ReadTimeout,
// whatever the context says.
func boundsCalls(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	case *redis.ClusterClient:
		o := c.Options()
		return o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0
	}
	return false
}

// inlineNode picks the node whose call a round's caller makes itself, instead of
// handing it to a worker and waiting for its reply: with one node, whose
// client bounds the call by its deadline (bounded), the
// caller waits for that reply anyway, and two goroutine hand-offs per round
// go. With more nodes the
// caller has to wait on the channel for the others all the same, and running
// one call itself measured slower (it shares the caller's time slice with the
// workers it just woke). Nor while a call or batch is in flight to the
// node: the round's call then waits for the next batch on a worker. It
// returns -1 for none.
func (p *Set) inlineNode() int {
	if len(p.nodes) == 1 && p.nodes[0].batch.idle() && p.nodes[0].bounded {
		return 0
	}
	return -1
}

// Len is the number of nodes.
func (p *Set) Len() int { return len(p.nodes) }

// Addr is node i's address, when its client exposes one.
func (p *Set) Addr(i int) string { return p.nodes[i].address() }

// Silence is how node i is shown when it did not answer in time.
func (p *Set) Silence(i int) error { return p.nodes[i].silence() }

// Call runs op on node i alone, outside any lane and round, bounded by ctx:
// a read, which nothing else orders.
func (p *Set) Call(ctx context.Context, i int, op *Op) Reply {
	return p.nodes[i].call(ctx, op, p.evalArgs(nil, op, nil), nil)
}

// Client is node i's go-redis client.
func (p *Set) Client(i int) redis.UniversalClient { return p.nodes[i].client }

// Health is one node's health as the Set has seen it.
type Health struct {
	Addr                string
	InFlight            int   // calls started and not yet returned by go-redis
	PendingCleanups     int   // deletes waiting to be tried again
	ConsecutiveFailures int   // the latest calls in a row with no timely, valid reply
	LastError           error // the latest failure, nil if none yet
}

// Health reports node i's health.
func (p *Set) Health(i int) Health {
	n := p.nodes[i]
	h := Health{
		Addr:                n.address(),
		InFlight:            int(n.inFlight.Load()),
		PendingCleanups:     int(n.pendingCleanups.Load()),
		ConsecutiveFailures: int(n.failures.Load()),
	}
	if b := n.lastErr.Load(); b != nil {
		h.LastError = b.err
	}
	return h
}
