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
	Key   string
	Held  bool           // a quorum of nodes holds the key (for one holder)
	Nodes []NodeKeyState // in the order of the nodes given to New
}

// NodeKeyState is what one node holds under a lock's key.
type NodeKeyState struct {
	Addr   string
	Held   bool
	Holder string        // a short prefix of the holder's token, never the whole token
	TTL    time.Duration // the key's remaining time to live on this node
	Fence  uint64        // the node's fence counter for the key, 0 if none
	Err    error         // why this node could not be read
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
	if err := c.nodes.Life.Begin(); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	defer c.nodes.Life.End()
	timeout := inspectTimeout
	if c.cfg.nodeTimeoutFixed > 0 {
		timeout = c.cfg.nodeTimeoutFixed
	}
	if err := c.nodes.CheckServers(timeout); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	reads := c.readKey(ctx, key, timeout)
	st := KeyState{Key: key, Nodes: make([]NodeKeyState, len(reads))}
	holders := map[string]int{}
	for i, r := range reads {
		st.Nodes[i] = r.state
		// Only nodes whose server is known count toward Held, as toward
		// any quorum: two addresses of one server must not hold it twice.
		if r.state.Held && c.nodes.Vote(engine.Reply{Node: i, Status: engine.OK}).Status == engine.OK {
			holders[r.token]++
		}
	}
	for _, n := range holders {
		st.Held = st.Held || n >= c.nodes.Quorum
	}
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
	if err := c.nodes.Life.Begin(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.Life.End()
	start := time.Now()
	reads := c.readKey(ctx, l.key, c.cfg.nodeTimeout(ttl))
	var t engine.Tally
	t.Init(len(reads), c.nodes.Quorum)
	var left []time.Duration
	for i, r := range reads {
		switch {
		case r.state.Err != nil:
			t.Replies[i] = engine.Reply{Node: i, Err: r.state.Err}
		case !r.state.Held:
			t.Replies[i] = engine.Reply{Node: i, Status: engine.Refused, Err: ErrKeyAbsent}
		case !l.vals.Mine(r.token):
			t.Replies[i] = engine.Reply{Node: i, Status: engine.Refused, Err: ErrHeldByOther}
		default:
			v := c.nodes.Vote(engine.Reply{Node: i, Status: engine.OK})
			t.Add(v)
			if v.Status == engine.OK {
				left = append(left, r.state.TTL)
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

// keyRead is one node's answer to the inspect script.
type keyRead struct {
	node  int
	state NodeKeyState
	token string // the holder's whole token, when the node holds the key
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
		if err := parseInspect(cmd, &r); err != nil {
			return engine.Reply{Err: err}
		}
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

// parseInspect reads {value, pttl, counter} into r.
func parseInspect(cmd *redis.Cmd, r *keyRead) error {
	v, err := cmd.Slice()
	if err != nil {
		return err
	}
	if len(v) != 3 {
		return script.Unexpected(v)
	}
	pttl, ok := v[1].(int64)
	if !ok {
		return script.Unexpected(v)
	}
	s, _ := v[0].(string)
	if token, ok := script.HolderToken(s); ok && s != "" {
		r.token = token
		r.state.Held = true
		r.state.Holder = token[:min(len(token), holderPrefix)]
		r.state.TTL = time.Duration(pttl) * time.Millisecond
		if pttl < 0 { // no expiry: not a lock's key
			r.state.TTL = -1
		}
	}
	if s, ok := v[2].(string); ok {
		f, err := script.ParseInt(s)
		if err != nil {
			return err
		}
		r.state.Fence = uint64(f)
	}
	return nil
}
