package redlock

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/leadership"
	"github.com/redlock-go/redlock/internal/script"
)

func init() {
	leadership.Lock = func(ld any) any { return ld.(*Leadership).lock() }
}

// Election is a campaign for the leadership of one key through a Client:
// at most one leader at a time within the Redlock assumptions, each with a
// term, a fence that increases strictly from leader to leader, for storage
// to refuse a deposed leader's writes (docs/election.md). Make one with
// Client.Election; it is safe for concurrent use, and each Campaign or Run
// campaigns on its own.
type Election struct {
	c   *Client
	key string
	ttl time.Duration
}

// Election returns the campaign for key's leadership, each leadership held
// for ttl and renewed in the background. It sends nothing. It fails with
// ErrInvalidArgument when key is empty or reserved, or ttl out of range.
func (c *Client) Election(key string, ttl time.Duration) (*Election, error) {
	if key == "" {
		return nil, invalid("election: empty key")
	}
	if what := reservedKey(key); what != "" {
		return nil, invalid("election: key %q is reserved: %s", showKey(key), what)
	}
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, err
	}
	return &Election{c: c, key: key, ttl: ttl}, nil
}

// Leadership is a leadership, from a Campaign that returned it until its
// Context ends: a fenced Lock of an owner id of its own, renewed by
// KeepAlive, and after each Proclaim the Lock of the same owner that took
// the key over from the one before.
type Leadership struct {
	e      *Election
	owner  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	// values are the values, not the cancellation, of the Campaign's
	// context: the leadership's renewals and its end are that call's
	// work, and the hooks are told so (Event.Context).
	values context.Context

	mu       sync.Mutex // lock order: first, before a lease's (docs/internals.md)
	l        *Lock      // the Lock that holds the key now
	stopKA   context.CancelFunc
	resigned bool
}

// lock is the Lock that holds the leadership's key now.
func (ld *Leadership) lock() *Lock {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.l
}

// hold makes l the leadership's Lock and renews it; the leadership's
// context ends with l's KeepAlive's, unless a Proclaim replaced l first.
// Called with ld.mu held; it returns how to stop the renewal of the Lock
// it replaced (nil for the first).
func (ld *Leadership) hold(l *Lock) (stopOld context.CancelFunc) {
	kaCtx, stop := context.WithCancel(ld.values)
	kctx := l.KeepAlive(kaCtx)
	stopOld, ld.l, ld.stopKA = ld.stopKA, l, stop
	context.AfterFunc(kctx, func() {
		ld.mu.Lock()
		current := ld.l == l
		ld.mu.Unlock()
		if current {
			ld.cancel(context.Cause(kctx))
		}
	})
	return stopOld
}

// Campaign waits until the caller leads, or ctx ends, and returns its
// leadership, renewed in the background until Resign or its loss. value is
// what operators see of the leader: its holder metadata (WithMetadata's
// rules; Inspect and redlock status show it). Campaign goes on through
// refusals and unavailable nodes; it fails when ctx ends (an error
// matching ErrNotAcquired and ctx.Err()), when the Client closes
// (ErrClosed), with ErrInvalidArgument for a bad value (or a node that is
// a replica, ErrReplica), and with ErrAuth or ErrNoPermission when so
// many nodes refuse its credentials or rights that no quorum is left.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	// An owner id of the leadership's own: its Proclaim takes the key
	// over from its Lock with another of the id (docs/owners.md); nobody
	// else has the id, so nobody else takes it over.
	owner := "election:" + rand.Text()
	opts := e.options(owner, value)
	start := time.Now()
	if e.c.obs.on {
		e.c.obs.campaignStarted(ctx, e.key)
	}
	for failed := 1; ; failed++ {
		l, err := e.c.Acquire(ctx, e.key, e.ttl, opts...)
		if err == nil {
			ld := &Leadership{e: e, owner: owner, values: detach(ctx)}
			ld.ctx, ld.cancel = context.WithCancelCause(context.Background())
			ld.mu.Lock()
			ld.hold(l)
			ld.mu.Unlock()
			e.recordTerm(ctx, ld, l)
			e.keepSettled(ld)
			e.report(ld, start)
			return ld, nil
		}
		if ctx == nil || ctx.Err() != nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrInvalidArgument) || e.c.misconfigured(err) {
			return nil, err
		}
		// The Client's RetryStrategy or its unavailability bound gave up:
		// a campaign does not, but it pauses before it asks again.
		wait, ok := e.c.cfg.retry.Backoff(failed)
		if !ok {
			wait = e.ttl / 3
		}
		timer := time.NewTimer(min(wait, e.ttl/3))
		werr := e.c.waitFor(ctx, nil, timer.C)
		timer.Stop()
		if werr != nil {
			return nil, fmt.Errorf("%w: %q: campaigning: %w", ErrNotAcquired, showKey(e.key), errors.Join(err, werr))
		}
	}
}

// report tells the hooks and the log that ld was elected, by a campaign
// that began at start, and, once its context ends, why it did.
func (e *Election) report(ld *Leadership, start time.Time) {
	obs := &e.c.obs
	if !obs.on {
		return
	}
	obs.elected(ld.values, e.key, ld.Term(), start)
	won := time.Now()
	context.AfterFunc(ld.ctx, func() {
		obs.leadershipEnded(ld.values, e.key, ld.Term(), won, context.Cause(ld.ctx))
	})
}

// Run campaigns, calls lead while it leads, and campaigns again when its
// leadership is lost, until ctx ends; it resigns whenever lead returns.
// lead's context ends when the leadership can no longer be proven (a cause
// matching ErrLockLost), before the leadership's validity does, or when ctx
// ends. lead returning nil after its context ended means "lead again when
// elected"; returning nil while it still leads ends Run with nil (the work
// is done); an error ends Run with that error. Run returns nil when ctx
// ends, and the campaign's error when the Client closes or value is
// invalid. This is client-go's RunOrDie without callbacks: lead is
// OnStartedLeading, its return OnStoppedLeading.
func (e *Election) Run(ctx context.Context, value string, lead func(ctx context.Context, l *Leadership) error) error {
	if lead == nil {
		return invalid("election on %q: nil function", showKey(e.key))
	}
	if ctx == nil {
		return invalid("election on %q: nil context", showKey(e.key))
	}
	for {
		ld, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		lctx, stop := context.WithCancelCause(ld.ctx)
		stopWithCtx := context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
		leadErr := lead(lctx, ld)
		stopWithCtx()
		lost := ld.ctx.Err() != nil
		stop(nil)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.cleanupTimeout)
		_ = ld.Resign(rctx) // a lost leadership's values expire; a failed Resign's too
		cancel()
		switch {
		case leadErr != nil:
			return leadErr
		case ctx.Err() != nil:
			return nil
		case !lost:
			return nil // lead returned while it led: the work is done
		}
	}
}

// Context returns the leadership's context: it ends when the leadership
// is resigned (cause ErrReleased), its Client closes (ErrClosed), or it can
// no longer be proven (a cause matching ErrLockLost), never later than its
// validity. Its end is a signal, not a barrier: a leader paused past its
// TTL runs on without seeing it, which is what Term is for.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Term is the leadership's fence: higher than every earlier leader's term
// on this key, across Clients and processes, and through the loss of a
// minority's data (docs/fencing.md). Give it with each write to storage
// that keeps the highest term it has seen and refuses lower ones. A
// Proclaim gives the leadership a new term, higher than its last.
func (ld *Leadership) Term() uint64 { return ld.lock().Fence() }

// Value is the value the leadership campaigned with, or last proclaimed.
func (ld *Leadership) Value() string { return ld.lock().Metadata() }

// Until is when the leadership's validity ends unless it is renewed.
func (ld *Leadership) Until() time.Time { return ld.lock().Until() }

// Resign ends the leadership: its Context ends with ErrReleased and its key
// is released on the nodes, so that the next campaigner is woken at once.
// It runs even when ctx has ended, within the Client's cleanup timeout.
// Resign a leadership that was lost too, as a Lock is released all the
// same: the Client forgets it then.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.mu.Lock()
	ld.resigned = true
	l := ld.l
	ld.mu.Unlock()
	err := l.Release(ctx)
	ld.cancel(ErrReleased) // at once, not when the Lock's context tells: a lost leadership's cause stays
	return err
}

// Proclaim changes the leadership's value without an election, as etcd's
// does: a Lock of the leadership's own owner id takes the key over with the
// new value, and a new term, higher than the last, which observers see
// with it; then the replaced Lock is released, deleting its value where
// the takeover did not reach. The leadership's Context goes on. When the takeover fails (no
// quorum: an error matching ErrNotAcquired), what it replaced is put back
// and the leadership stays as it was, value and term; when the leadership
// has ended, it fails with ErrNotHeld. A value Campaign would refuse is
// ErrInvalidArgument.
func (ld *Leadership) Proclaim(ctx context.Context, value string) error {
	e := ld.e
	if err := ld.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %q: the leadership ended: %w", ErrNotHeld, showKey(e.key), context.Cause(ld.ctx))
	}
	l, ttl, err := e.c.prepare(ctx, e.key, e.ttl, e.options(ld.owner, value))
	if err != nil {
		return err
	}
	defer e.c.nodes.Life.EndCall()
	// The replaced Lock renews no more while the takeover is on its way:
	// a renewal landing after it would find the takeover's value, and
	// count the leadership lost on the nodes the takeover is displacing
	// it from.
	resume := ld.lock().pauseRenewals()
	defer resume()
	// On the nodes at once, not through the owner's Lock of this Client,
	// which an Acquire of the id would re-enter.
	if _, err := e.c.keep(e.c.acquireOnNodes(ctx, l, ttl, false)); err != nil {
		return err
	}
	ld.mu.Lock()
	if ld.resigned || ld.ctx.Err() != nil {
		ld.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.cleanupTimeout)
		defer cancel()
		return errors.Join(fmt.Errorf("%w: %q: the leadership ended meanwhile: %w", ErrNotHeld, showKey(e.key), context.Cause(ld.ctx)), l.Release(rctx))
	}
	old := ld.l
	stopOld := ld.hold(l)
	ld.mu.Unlock()
	stopOld()
	e.recordTerm(ctx, ld, l)
	// The replaced Lock holds nothing where the takeover reached; where
	// it did not (a node that did not answer), its value would stay until
	// its TTL: released, it goes.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.cleanupTimeout)
	defer cancel()
	_ = old.Release(rctx) // ErrNotHeld where the takeover holds: nothing of it left
	return nil
}

// Leader is an elected leader as a quorum of nodes holds it.
type Leader struct {
	Value string // what it campaigned with
	Term  uint64 // its term
	// TTL is how long a quorum still holds it unless it renews, from
	// when Leader returned: an observer cannot know that it leads beyond.
	TTL time.Duration
}

// options are the acquire options of a leadership's Locks.
func (e *Election) options(owner, value string) []AcquireOption {
	return []AcquireOption{WithOwner(owner), WithMetadata(value), acquireOptionFunc(func(c *acquireConfig) { c.fenced = true })}
}

// recordTerm records the term of l, the leadership's Lock just granted,
// for observers: once more if no node did. A leadership that no record
// holds still leads; observers do not see it.
func (e *Election) recordTerm(ctx context.Context, ld *Leadership, l *Lock) {
	if !e.settle(ctx, l) && ld.ctx.Err() == nil {
		e.settle(ctx, l)
	}
}

// settle records l's term in its key's record of elected terms, on the
// nodes that still hold its value (settle.lua): observers count only the
// leaders whose term a record holds, which a failed attempt's never is. It
// runs after the Lock was granted, under the Lock's own lanes, whatever
// ctx does, and reports whether a node recorded it.
func (e *Election) settle(ctx context.Context, l *Lock) bool {
	c := e.c
	op := engine.Op{Script: settleScript, Read: script.ReadFenceCommit, Refusals: l.late,
		Keys: [engine.MaxKeys]string{e.key, script.LeadersKey(e.key)}, NKeys: 2,
		Args: [engine.MaxArgs]any{l.vals.Any().Prefix, strconv.FormatUint(l.Fence(), 10), c.cfg.horizonArg}, NArgs: 3}
	t, err := c.nodes.SendAndCount(context.WithoutCancel(ctx), l.seq, engine.WriteRound(op, c.cfg.waits(e.ttl), e.ttl))
	return err == nil && t.Confirmed > 0
}

// keepSettled records ld's term again every half of the record's life (the
// fence horizon) while it leads, so that a long leadership stays in the
// record observers read.
func (e *Election) keepSettled(ld *Leadership) {
	every := max(e.c.cfg.fenceHorizon/2, e.ttl)
	t := time.NewTimer(every)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-ld.ctx.Done():
				return
			case <-t.C:
			}
			if e.c.nodes.Life.BeginCall() != nil {
				return
			}
			e.settle(context.Background(), ld.lock())
			e.c.nodes.Life.EndCall()
			t.Reset(every)
		}
	}()
}

// Leader reads the current leader: the elected leadership that a quorum
// of nodes holds, with the Value it campaigned with and its Term. It
// fails with ErrNoLeader when there is none, and with an error matching
// ErrUnavailable when too few nodes answered to tell (and ErrAuth or
// ErrNoPermission for the nodes that refused it), with ErrReplica when a
// node is a replica. A fresh Client identifies the nodes' servers first,
// as Acquire does. What it reports was
// a real leader (its Campaign elected it) at some time while Leader ran;
// a value that a quorum holds for an attempt that then failed is never
// reported, nor a minority's. That it still leads when Leader returns,
// nobody can know: TTL bounds how long it may.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if ctx == nil {
		return Leader{}, invalid("election on %q: nil context", showKey(e.key))
	}
	c := e.c
	if err := c.nodes.Life.BeginCall(); err != nil {
		return Leader{}, fmt.Errorf("%w: %q: %w", ErrNoLeader, showKey(e.key), err)
	}
	defer c.nodes.Life.EndCall()
	timeout := inspectTimeout
	if c.cfg.nodeTimeoutFixed > 0 {
		timeout = c.cfg.nodeTimeoutFixed
	}
	// Only nodes whose server is known count, as toward any quorum: a
	// fresh Client meets them here, as Inspect and Acquire do.
	if err := c.nodes.CheckServers(timeout); err != nil {
		return Leader{}, fmt.Errorf("election on %q: %w", showKey(e.key), err)
	}
	start := time.Now()
	reads, answered := engine.ReadAll(ctx, c.nodes, timeout, func(ctx context.Context, i int) leaderRead {
		return e.readNode(ctx, i)
	})
	terms := make(map[string]uint64) // the elected terms any node's record holds, by token
	held := make(map[string][]time.Duration)
	asked := 0
	for i, r := range reads {
		if !answered[i] || r.err != nil || c.nodes.Vote(engine.Reply{Node: i, Status: engine.OK}).Status != engine.OK {
			continue
		}
		asked++
		for tok, term := range r.terms {
			terms[tok] = max(terms[tok], term)
		}
		if r.token != "" {
			held[r.token] = append(held[r.token], r.ttl)
		}
	}
	q := c.nodes.Quorum
	var best Leader
	found := false
	for tok, ttls := range held {
		term, elected := terms[tok]
		if !elected || len(ttls) < q || found && term <= best.Term {
			continue
		}
		// The quorum's shortest: once it runs out, fewer than a quorum hold.
		slices.Sort(ttls)
		best, found = Leader{Value: script.Metadata(tok), Term: term, TTL: max(ttls[len(ttls)-q]-time.Since(start), 0)}, true
	}
	switch {
	case found:
		return best, nil
	case asked < q:
		// Nodes that refused our credentials or rights are named: no
		// wait mends them.
		format, args := "%w: %q: %d of %d nodes answered", []any{ErrUnavailable, showKey(e.key), asked, len(reads)}
		for i, r := range reads {
			if answered[i] && engine.IsMisconfig(r.err) {
				format, args = format+"; %w", append(args, &NodeError{Node: i, Addr: c.nodes.Addr(i), Err: r.err})
			}
		}
		return Leader{}, fmt.Errorf(format, args...)
	}
	return Leader{}, fmt.Errorf("%w: %q", ErrNoLeader, showKey(e.key))
}

// leaderRead is one node's answer to the leader script: the exclusive
// holder's whole token and remaining TTL, if any, and the elected terms
// its record holds, by token.
type leaderRead struct {
	token string
	ttl   time.Duration
	terms map[string]uint64
	err   error
}

func (e *Election) readNode(ctx context.Context, i int) leaderRead {
	var r leaderRead
	op := engine.Op{Script: leaderScript, Keys: [engine.MaxKeys]string{e.key, script.LeadersKey(e.key)}, NKeys: 2}
	op.Read = func(cmd *redis.Cmd) engine.Reply {
		v, err := cmd.Slice()
		if err != nil {
			return engine.Reply{Err: err} // the node's own words: NOPERM, NOAUTH, a refused connection
		}
		if len(v) != 3 {
			return engine.Reply{Err: script.Unexpected(v)}
		}
		value, _ := v[0].(string)
		pttl, _ := v[1].(int64)
		rec, _ := v[2].(string)
		if tok, ok := script.HolderToken(value); ok && value != "" && value[0] != '^' && value[0] != '#' && pttl > 0 {
			r.token, r.ttl = tok, time.Duration(pttl)*time.Millisecond
		}
		r.terms = make(map[string]uint64)
		for _, entry := range strings.Split(rec, ";") {
			term, tok, ok := strings.Cut(entry, "=")
			n, err := strconv.ParseUint(term, 10, 64)
			if ok && err == nil {
				r.terms[tok] = n
			}
		}
		return engine.Reply{Status: engine.OK}
	}
	if rep := e.c.nodes.Call(ctx, i, &op); rep.Status != engine.OK {
		return leaderRead{err: cmp.Or(rep.Err, ErrNoReply)}
	}
	return r
}

// Observe reports the leaders as Leader reads them, each change once (a
// new term, or a value), until ctx ends; then it closes the channel. It
// reads at once, and again soon while the first reads cannot tell; it
// reads again when a quorum of nodes announce a release of the key (one
// subscription per node, shared with the Client's waiters), soon after,
// and every third of the TTL otherwise, for what no announcement tells (an
// expiry, a new leader). Errors (no leader, nodes that do not answer) are
// not reported: a reader that must know them calls Leader.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if ctx == nil {
		close(out)
		return out
	}
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	w, _ := e.c.waits.Watch([]string{e.key})
	defer e.c.waits.Unwatch(w)
	every := max(e.ttl/3, time.Millisecond)
	var last Leader
	soon := time.Duration(0) // after a release: read again soon, for the next leader
	for first := true; ; first = false {
		e.c.waits.Forget(w)
		ld, err := e.Leader(ctx)
		if first && err != nil && !errors.Is(err, ErrNoLeader) {
			// The first read did not tell (a node slow to answer its
			// first contact): read again soon, not after a third of
			// the TTL.
			soon = 10 * time.Millisecond
		}
		if err == nil && (ld.Term != last.Term || ld.Value != last.Value) {
			select {
			case out <- ld:
				last = ld
				if e.c.obs.on {
					e.c.obs.leaderObserved(ctx, e.key, ld.Term)
				}
			case <-ctx.Done():
				return
			}
		}
		wait := every
		if soon > 0 {
			if err == nil || soon >= every {
				soon = 0 // found the next leader, or back to the poll
			} else {
				wait, soon = soon, soon*2
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-w.Wake:
			soon = 10 * time.Millisecond
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		case <-e.c.nodes.Life.Closing:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}
