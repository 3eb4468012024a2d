package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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

// inspectTimeout bounds each node's read for Inspect when WithNodeTimeout
// does not: nothing is written, so it can afford a cold connection's dial.
const inspectTimeout = time.Second

// Inspect reads key on every node without taking it: who holds it where,
// for how long, and, with WithFencing, each node's fence counter. Held
// counts only the nodes whose server has been identified, as every quorum
// does. It sends
// one read-only script per node (GET and PTTL of the key, GET of its fence
// counter) and waits for each at most the WithNodeTimeout deadline, or one
// second without it, or until ctx ends; a node that did not answer has Err
// set. A user limited by ACL needs +pttl besides the lock's commands.
//
// What Inspect reports was true when each node answered; the key may have
// changed since. Use it to look, never to decide that a lock is free.
// The error is for bad input only (matching ErrInvalidArgument), a closed
// Client (ErrClosed), or two nodes found to be one server.
func (c *Client) Inspect(ctx context.Context, key string) (KeyState, error) {
	if ctx == nil {
		return KeyState{}, invalid("inspect: nil context")
	}
	if key == "" {
		return KeyState{}, invalid("inspect: empty key")
	}
	if err := c.nodes.life.begin(); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	defer c.nodes.life.end()
	timeout := inspectTimeout
	if c.cfg.nodeTimeoutFixed > 0 {
		timeout = c.cfg.nodeTimeoutFixed
	}
	if err := c.nodes.checkServers(timeout); err != nil {
		return KeyState{}, fmt.Errorf("inspect of %q: %w", showKey(key), err)
	}
	reads := c.readKey(ctx, key, timeout)
	st := KeyState{Key: key, Nodes: make([]NodeKeyState, len(reads))}
	holders := map[string]int{}
	for i, r := range reads {
		st.Nodes[i] = r.state
		// Only nodes whose server is known count toward Held, as toward
		// any quorum: two addresses of one server must not hold it twice.
		if r.state.Held && c.nodes.vote(reply{node: i, status: statusOK}).status == statusOK {
			holders[r.token]++
		}
	}
	for _, n := range holders {
		st.Held = st.Held || n >= c.nodes.quorum
	}
	return st, nil
}

// TTL returns the time left on the nodes before the lock expires: the
// remaining time to live that a quorum of nodes holding our value still
// reports, less the time the question took. It fails with an error matching
// ErrNotHeld when fewer than a quorum hold our value (the lock expired or
// was lost), and at once after Release; that error also matches ctx.Err()
// when ctx ended first. Each node is given the lock's per-node deadline.
//
// TTL is what the nodes say, not what the holder may rely on: Until, which
// allows for clock drift, is the end of the validity.
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
	if err := c.nodes.life.begin(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, showKey(l.key), err)
	}
	defer c.nodes.life.end()
	start := time.Now()
	reads := c.readKey(ctx, l.key, c.cfg.nodeTimeout(ttl))
	var t tally
	t.init(len(reads), c.nodes.quorum)
	var left []time.Duration
	for i, r := range reads {
		switch {
		case r.state.Err != nil:
			t.replies[i] = reply{node: i, err: r.state.Err}
		case !r.state.Held:
			t.replies[i] = reply{node: i, status: statusRefused, err: ErrKeyAbsent}
		case r.token+"." != l.prefix:
			t.replies[i] = reply{node: i, status: statusRefused, err: ErrHeldByOther}
		default:
			v := c.nodes.vote(reply{node: i, status: statusOK})
			t.add(v)
			if v.status == statusOK {
				left = append(left, r.state.TTL)
			}
		}
	}
	if !t.reached() {
		return 0, newQuorumError("ttl", l.key, ErrNotHeld, ctx.Err(), &t, c.nodes)
	}
	// The quorum's shortest: once it runs out, fewer than a quorum hold.
	slices.Sort(left)
	return max(left[len(left)-t.quorum]-time.Since(start), 0), nil
}

// keyRead is one node's answer to the inspect script.
type keyRead struct {
	node  int
	state NodeKeyState
	token string // the holder's whole token, when the node holds the key
}

// readKey runs the inspect script on every node in parallel and returns
// each node's answer, in node order, once every node answered or timeout
// passed (or ctx ended). A call still under way then goes on in the
// background, counted by the Client's lifecycle, so Close waits for it.
func (c *Client) readKey(ctx context.Context, key string, timeout time.Duration) []keyRead {
	n := len(c.nodes.nodes)
	out := make([]keyRead, n)
	answered := make([]bool, n)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	replies := make(chan keyRead, n)
	for i, nd := range c.nodes.nodes {
		c.nodes.life.add(1)
		go func() {
			defer c.nodes.life.end()
			replies <- c.readNode(ctx, i, nd, key)
		}()
	}
wait:
	for range n {
		select {
		case r := <-replies:
			out[r.node], answered[r.node] = r, true
		case <-ctx.Done():
			break wait
		}
	}
	for i, nd := range c.nodes.nodes {
		if answered[i] {
			continue
		}
		out[i] = keyRead{node: i, state: NodeKeyState{Addr: nd.address(), Err: nd.silence()}}
		if parent.Err() != nil {
			out[i].state.Err = errCallEnded
		}
	}
	return out
}

// readNode runs the inspect script on one node.
func (c *Client) readNode(ctx context.Context, i int, nd *node, key string) keyRead {
	r := keyRead{node: i, state: NodeKeyState{Addr: nd.address()}}
	op := nodeOp{script: inspectScript, keyBuf: [maxKeys]string{key}, nkeys: 1}
	if c.cfg.fencing {
		op.keyBuf[1], op.nkeys = fenceKeyFor(key), 2
	}
	op.read = func(cmd *redis.Cmd) reply {
		if err := parseInspect(cmd, &r); err != nil {
			return reply{err: err}
		}
		return reply{status: statusOK}
	}
	args := []any{"evalsha", inspectScript.Hash(), op.nkeys}
	for _, k := range op.keyBuf[:op.nkeys] {
		args = append(args, k)
	}
	if rep := nd.call(ctx, &op, args, nil); rep.status != statusOK {
		r = keyRead{node: i, state: NodeKeyState{Addr: nd.address(), Err: rep.err}}
		if rep.err == nil || isContextErr(rep.err) {
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
		return errUnexpected(v)
	}
	pttl, ok := v[1].(int64)
	if !ok {
		return errUnexpected(v)
	}
	// A tombstone (scripts/lib.lua) is an absent key to every lock.
	if s, ok := v[0].(string); ok && !strings.HasPrefix(s, "!") {
		// What an owner's pending takeover replaced follows a "|" (take.lua);
		// the generation follows the last dot before it.
		token, _, _ := strings.Cut(s, "|")
		if dot := strings.LastIndexByte(token, '.'); dot >= 0 {
			token = token[:dot]
		}
		r.token = token
		r.state.Held = true
		r.state.Holder = token[:min(len(token), holderPrefix)]
		r.state.TTL = time.Duration(pttl) * time.Millisecond
		if pttl < 0 { // no expiry: not a lock's key
			r.state.TTL = -1
		}
	}
	if s, ok := v[2].(string); ok {
		f, err := parseReplyInt(s)
		if err != nil {
			return err
		}
		r.state.Fence = uint64(f)
	}
	return nil
}
