package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/script"
)

// KeyState is what the nodes hold under a lock's key, as Client.Inspect
// read it.
type KeyState struct {
	Key string
	// Held: a quorum of nodes holds the key for one exclusive Lock, or
	// for a shared one (Shared > 0).
	Held bool
	// Shared is how many shared Locks (Shared) a quorum of nodes holds
	// the key for.
	Shared int
	// Permits is how many permits (Permits) a quorum of nodes holds the
	// key for, each Lock in one slot.
	Permits int
	Nodes   []NodeKeyState // in the order of the nodes given to New
}

// NodeKeyState is what one node holds under a lock's key.
type NodeKeyState struct {
	Addr   string
	Held   bool
	Holder string // a short prefix of the exclusive holder's token, never the whole token
	// Metadata is what the exclusive holder stored with WithMetadata.
	Metadata string
	TTL      time.Duration // the key's remaining time to live on this node (taken shared: its last share's)
	Fence    uint64        // the node's fence counter for the key, 0 if none
	Err      error         // why this node could not be read
	// Shared are the shared Locks that hold the key on this node, when it
	// is taken shared.
	Shared []SharedHolder
	// Permits are the permits that hold the key on this node, when it is
	// taken by permits, and Count the n they were taken with.
	Permits []PermitHolder
	Count   int
}

// PermitHolder is one permit (Permits) holding a key on a node.
type PermitHolder struct {
	Slot     int           // its slot, 0 to n-1
	Holder   string        // a short prefix of its token, as NodeKeyState.Holder
	TTL      time.Duration // its remaining time to live on the node
	Metadata string        // its WithMetadata
}

// SharedHolder is one shared Lock holding a key on a node.
type SharedHolder struct {
	Holder   string        // a short prefix of its token, as NodeKeyState.Holder
	TTL      time.Duration // its share's remaining time to live on the node
	Metadata string        // its WithMetadata
}

// holderPrefix is how many characters of a token Inspect shows: enough to
// tell holders apart, too few to act as one (the scripts compare the whole
// token).
const holderPrefix = 8

// Inspect reads key on every node without taking it: who holds it where, for
// how long, and each node's fence counter; a node it could not read has Err
// set. What it reports was true when each node answered: use it to look,
// never to decide that a lock is free. Its error is for bad input
// (ErrInvalidArgument), a closed Client, or two nodes found to be one server
// (docs/operations.md).
func (c *Client) Inspect(ctx context.Context, key string) (KeyState, error) {
	if ctx == nil {
		return KeyState{}, invalid("inspect: nil context")
	}
	if key == "" {
		return KeyState{}, invalid("inspect: empty key")
	}
	if err := c.nodes.Life.BeginCall(); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	defer c.nodes.Life.EndCall()
	// At least inspectTimeout (a cold connection's dial), longer for a
	// node whose learned latency needs it.
	timeout := c.nodes.MaxWait(engine.Waits{Fixed: c.cfg.nodeTimeoutFixed, Floor: inspectTimeout, Cap: inspectTimeoutMax})
	if err := c.nodes.CheckServers(timeout); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	reads := c.readKey(ctx, key, timeout)
	st := KeyState{Key: key, Nodes: make([]NodeKeyState, len(reads))}
	holders, shares, permits := map[string]int{}, map[string]int{}, map[script.Share]int{}
	for i, r := range reads {
		st.Nodes[i] = r.state
		// Only nodes whose server is known count toward Held, as toward
		// any quorum: two addresses of one server must not hold it twice.
		if !r.state.Held || c.nodes.Vote(engine.Reply{Node: i, Status: engine.OK}).Status != engine.OK {
			continue
		}
		switch {
		case r.in.Shares == nil:
			holders[r.in.Token]++
		case r.in.Count > 0:
			for _, s := range r.in.Shares {
				permits[script.Share{Token: s.Token, Slot: s.Slot}]++
			}
		default:
			for _, s := range r.in.Shares {
				shares[s.Token]++
			}
		}
	}
	for _, n := range holders {
		st.Held = st.Held || n >= c.nodes.Quorum
	}
	for _, n := range shares {
		if n >= c.nodes.Quorum {
			st.Shared++
		}
	}
	for _, n := range permits {
		if n >= c.nodes.Quorum {
			st.Permits++
		}
	}
	st.Held = st.Held || st.Shared > 0 || st.Permits > 0
	return st, nil
}

// TTL returns the time left before the lock expires on the nodes: the
// shortest remaining TTL of a quorum that holds its value, less the time the
// question took. Its error matches ErrNotHeld when fewer than a quorum hold
// it, or after Release. The holder relies on Until, which allows for drift.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	c, err := l.prologue("ttl", ctx)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	releasing, ttl := l.releasing, l.ttl
	l.mu.Unlock()
	if releasing {
		return 0, fmt.Errorf("%w: %q: released", ErrNotHeld, showKey(l.key))
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	if err := c.nodes.Life.BeginCall(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.Life.EndCall()
	start := time.Now()
	reads := c.readKey(ctx, l.key, c.nodeTimeout(ttl))
	var t engine.Tally
	t.Init(len(reads), c.nodes.Quorum)
	var left []time.Duration
	for i, r := range reads {
		switch {
		case r.state.Err != nil:
			t.Replies[i] = engine.Reply{Node: i, Err: r.state.Err}
		case !r.state.Held:
			t.Replies[i] = engine.Reply{Node: i, Status: engine.Refused, Err: ErrKeyAbsent}
		default:
			ttl, err := l.kind.holding(l, &r)
			if err != nil {
				t.Replies[i] = engine.Reply{Node: i, Status: engine.Refused, Err: err}
				continue
			}
			v := c.nodes.Vote(engine.Reply{Node: i, Status: engine.OK})
			t.Add(v)
			if v.Status == engine.OK {
				left = append(left, ttl)
			}
		}
	}
	if !t.Reached() {
		return 0, newQuorumError("ttl", l.key, ErrNotHeld, ctx.Err(), &t, c.nodes)
	}
	// The quorum's shortest: once it runs out, fewer than a quorum hold.
	slices.Sort(left)
	return max(left[len(left)-t.Quorum]-time.Since(start), 0), nil
}

// keyRead is one node's answer to the inspect script: as Inspect shows it
// (state), and as read (in).
type keyRead struct {
	node  int
	state NodeKeyState
	in    script.Inspected
}

// ownShare is the remaining TTL of l's entry among r's shares, in slot
// (any slot when slot < 0), or ErrKeyAbsent when it has none.
func (r *keyRead) ownShare(l *Lock, slot int) (time.Duration, error) {
	for _, s := range r.in.Shares {
		if l.vals.Mine(s.Token) && (slot < 0 || s.Slot == slot) {
			return s.TTL, nil
		}
	}
	return 0, ErrKeyAbsent
}

// readKey runs the inspect script on every node in parallel and returns
// each node's answer, in node order, once every node answered or timeout
// passed (or ctx ended); a call still under way goes on in the background
// (engine.ReadAll).
func (c *Client) readKey(ctx context.Context, key string, timeout time.Duration) []keyRead {
	out, answered := engine.ReadAll(ctx, c.nodes, timeout, func(ctx context.Context, i int) keyRead {
		return c.readNode(ctx, i, key)
	})
	for i, ok := range answered {
		if !ok {
			out[i] = keyRead{node: i, state: NodeKeyState{Addr: c.nodes.Addr(i), Err: c.nodes.Silence(i)}}
			if ctx.Err() != nil {
				out[i].state.Err = errCallEnded
			}
		}
	}
	return out
}

// readNode runs the inspect script on one node.
func (c *Client) readNode(ctx context.Context, i int, key string) keyRead {
	r := keyRead{node: i, state: NodeKeyState{Addr: c.nodes.Addr(i)}}
	op := engine.Op{Script: inspectScript, Keys: [engine.MaxKeys]string{key}, NKeys: 1}
	if c.cfg.fencing {
		op.Keys[1], op.NKeys = script.CounterKey(key), 2
	}
	op.Read = func(cmd *redis.Cmd) engine.Reply {
		in, err := script.ReadInspect(cmd)
		if err != nil {
			return engine.Reply{Err: err}
		}
		r.shows(in)
		return engine.Reply{Status: engine.OK}
	}
	if rep := c.nodes.Call(ctx, i, &op); rep.Status != engine.OK {
		r = keyRead{node: i, state: NodeKeyState{Addr: c.nodes.Addr(i), Err: rep.Err}}
		if rep.Err == nil || engine.IsContextErr(rep.Err) {
			r.state.Err = ErrNoReply
		}
	}
	return r
}

// shows keeps in, and what Inspect shows of it: the holders' tokens cut
// to holderPrefix.
func (r *keyRead) shows(in script.Inspected) {
	r.in = in
	st := &r.state
	st.Held, st.TTL, st.Fence, st.Count = in.Held, in.TTL, in.Fence, in.Count
	st.Holder, st.Metadata = in.Token[:min(len(in.Token), holderPrefix)], script.Metadata(in.Token)
	for _, s := range in.Shares {
		holder, md := s.Token[:min(len(s.Token), holderPrefix)], script.Metadata(s.Token)
		if s.Slot >= 0 {
			st.Permits = append(st.Permits, PermitHolder{Slot: s.Slot, Holder: holder, TTL: s.TTL, Metadata: md})
		} else {
			st.Shared = append(st.Shared, SharedHolder{Holder: holder, TTL: s.TTL, Metadata: md})
		}
	}
}
