package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/redisnode"
)

// CheckServers makes sure that no two nodes are one server, so that no
// server votes twice. Each node's server is identified by its run_id (for a
// cluster, those of all its masters; a Sentinel client asks the master it
// resolves to). Until a node's server is known its replies do not count
// toward a quorum (see vote): two addresses of one server that was down at
// first contact cannot both vote once it is back. CheckServers asks every
// node not yet known, all in parallel, and waits up to wait, the caller's
// per-node deadline; a node not identified by then is asked again by the
// next operation. A node whose server refuses INFO (an ACL without it) is
// trusted as configured. A node whose server is a replica (ROLE) fails the
// check with ErrReplica, and is asked again, as one not identified. Once every node is known and distinct, the check
// costs one atomic load.
func (p *Set) CheckServers(wait time.Duration) error {
	if p.verified.Load() {
		return nil
	}
	p.identify(wait, false, (*node).unidentified)
	return p.compareServers()
}

// vote returns r as it counts toward a quorum: a confirmation from a node
// whose server is not known yet, or is known to be another node's too, is
// an unknown outcome; a node not known yet is asked who it is in the
// background.
func (p *Set) Vote(r Reply) Reply {
	if r.Status != OK || p.verified.Load() {
		return r
	}
	if n := p.nodes[r.Node]; n.unidentified() {
		p.identify(0, false, func(m *node) bool { return m == n })
		return Reply{Node: r.Node, Err: ErrUnidentified}
	}
	if err := p.compareServers(); err != nil {
		return Reply{Node: r.Node, Err: err}
	}
	return r
}

// compareServers reports two nodes that share a server. It reads each
// node's identity once: a node identified while it runs must not be
// unknown to a comparison and known to the completeness check, which
// would mark the set verified, for good, with one server voting twice.
func (p *Set) compareServers() error {
	known := true
	ids := make([][]string, len(p.nodes))
	for i, n := range p.nodes {
		id, unknowable := n.identity()
		ids[i], known = id, known && (id != nil || unknowable)
	}
	for _, n := range p.nodes {
		if r, ok := n.replicaOf(); ok {
			return p.replicaError(n, r)
		}
	}
	for i, a := range p.nodes {
		for j, b := range p.nodes[i+1:] {
			for _, id := range ids[i] {
				if slices.Contains(ids[i+1+j], id) {
					return invalid("nodes %d (%s) and %d (%s) are one Redis server (run_id %s): Redlock needs independent masters",
						a.index, a.address(), b.index, b.address(), id)
				}
			}
		}
	}
	if known {
		p.verified.Store(true)
	}
	return nil
}

// replicaError refuses n, whose server is a replica (of r.master): of
// another node's server when one has that address.
func (p *Set) replicaError(n *node, r *role) error {
	if r.master == "" {
		return fmt.Errorf("%w: node %d (%s) is a replica: Redlock needs independent masters, give it a master of its own",
			ErrReplica, n.index, n.address())
	}
	for _, m := range p.nodes {
		if m != n && sameAddr(m.address(), r.master) {
			return fmt.Errorf("%w: node %d (%s) is a replica of node %d (%s), which would vote twice with it: Redlock needs independent masters",
				ErrReplica, n.index, n.address(), m.index, m.address())
		}
	}
	return fmt.Errorf("%w: node %d (%s) is a replica of %s: Redlock needs independent masters, give it a master of its own",
		ErrReplica, n.index, n.address(), r.master)
}

// sameAddr reports whether two host:port addresses name one endpoint
// as written (localhost for 127.0.0.1 too).
func sameAddr(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	loop := func(h string) string {
		if h == "localhost" || h == "::1" {
			return "127.0.0.1"
		}
		return h
	}
	return loop(ha) == loop(hb)
}

// identify asks the nodes that pick selects for their identity, each in the
// background under its own deadline, unless an identify call is under way
// there or ended less than Timing.IdentifyRetry ago. It waits up to wait for the
// nodes met for the first time, or for all of them when all is set (Warm):
// a node that failed to answer before, or that a caller waited for in
// vain, is not waited for again by an operation, so that a node that
// stays down costs its deadline once, not each operation; its votes count
// from the first operation after it answered.
func (p *Set) identify(wait time.Duration, all bool, pick func(*node) bool) {
	if pending := p.launchIdentify(all, pick); wait > 0 && len(pending) > 0 {
		awaitIdentify(pending, time.Now().Add(wait), nil)
	}
}

// identCall is an identify call under way on a node: done is closed when
// it ends.
type identCall struct {
	n    *node
	done chan struct{}
}

// launchIdentify starts the identify calls that identify describes, and
// returns those to wait for.
func (p *Set) launchIdentify(all bool, pick func(*node) bool) []identCall {
	var pending []identCall
	for _, n := range p.nodes {
		if !pick(n) {
			continue
		}
		n.identMu.Lock()
		done, first := n.identifying, n.identTried.IsZero() || all
		if done == nil && (first || time.Since(n.identTried) >= p.timing.IdentifyRetry) {
			done = make(chan struct{})
			n.identifying = done
			p.Life.Add(1)
			go func() {
				defer p.Life.End()
				n.identify(done, p.timing.IdentifyTimeout)
			}()
		}
		n.identMu.Unlock()
		if done != nil && first {
			pending = append(pending, identCall{n, done})
		}
	}
	return pending
}

// awaitIdentify waits for the calls in pending until deadline, or until
// stop is closed. A call still under way then marks its node tried: no
// later operation waits for that node, whose call goes on in the
// background.
func awaitIdentify(pending []identCall, deadline time.Time, stop <-chan struct{}) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	late := false
	for _, c := range pending {
		if !late {
			select {
			case <-c.done:
				continue
			case <-timer.C:
				late = true
			case <-stop:
				late = true
			}
		}
		select {
		case <-c.done:
		default:
			c.n.tried()
		}
	}
}

// tried marks n as a node whose first identification a caller waited
// for in vain: no operation waits for it again.
func (n *node) tried() {
	n.identMu.Lock()
	if n.identTried.IsZero() {
		n.identTried = time.Now()
	}
	n.identMu.Unlock()
}

// unidentified reports whether n's server is still to be identified.
func (n *node) unidentified() bool {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return n.ident == nil && !n.identUnknowable
}

func (n *node) identity() ([]string, bool) {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return n.ident, n.identUnknowable
}

// identify learns the run_ids behind n, within timeout (a client
// without ContextTimeoutEnabled may hold the call longer: the waiting side
// in Set.identify does not wait for it), and closes done.
func (n *node) identify(done chan struct{}, timeout time.Duration) {
	defer func() {
		n.identMu.Lock()
		n.identifying, n.identTried = nil, time.Now()
		n.identMu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if c, ok := n.client.(*redis.Client); ok && c.Options().Addr == "FailoverClient" && c.Options().Dialer != nil {
		// A Sentinel client: show the master it resolves to.
		if conn, err := c.Options().Dialer(ctx, "tcp", c.Options().Addr); err == nil {
			addr := conn.RemoteAddr().String()
			n.addr.Store(&addr)
			_ = conn.Close()
		}
	}
	sent := time.Now()
	ids, info, roleCmd, err := runIDs(ctx, n.client)
	got := time.Now()
	if info != "" && n.rtt.packed.Load() == 0 {
		// The first contact, a dial and handshake included: a generous
		// first sample of the node's latency, which later ones smooth.
		n.rtt.observe(sent, got)
	}
	switch {
	case info == "" && err != nil && !isNoPerm(err) && !isServerReply(err):
		// The server was not reached (a refused connection, a dial past
		// the bound): its clock is not read either, under a context the
		// failure may have spent, and what the failure was is what a
		// write not sent for want of the clock shows (nodeClock.unknown).
		n.clock.failed.Store(&errBox{n.unreadCause(err)})
		if !IsContextErr(err) && !IsMisconfig(asMisconfig(err)) {
			n.lastCause.Store(&errBox{err})
		}
	case info == "" || !n.noteInfoClock(info, sent, got, n.drift):
		// No clock in INFO (an ACL without INFO, a server without
		// server_time_usec): TIME, which every write needs anyway.
		_ = n.readClock(ctx, n.drift)
	}
	// A replica is no independent master: its writes are refused
	// (READONLY), or, writable, lost at the next resync, and beside its
	// master it holds what the master holds. A cluster client reaches
	// masters only.
	refused := errors.Is(asMisconfig(err), ErrAuth)
	var r role
	roleKnown := false
	if roleCmd != nil && !refused {
		r, roleKnown, _ = readRole(roleCmd)
	}
	n.identMu.Lock()
	defer n.identMu.Unlock()
	n.replica = nil
	switch {
	case roleKnown && r.replica:
		// Refused, not identified: asked again (IdentifyRetry), so that
		// a replica promoted since is taken once it is a master.
		n.replica = &r
	case err == nil && len(ids) > 0:
		n.ident = ids
	case refused:
		// Our credentials refused: nothing is known; asked again.
	case err != nil && (isNoPerm(err) || isServerReply(err)):
		// The server answered but cannot tell who it is (an ACL without
		// INFO, a server whose INFO has no run_id): trusted as configured.
		n.identUnknowable = true
	}
}

// replicaOf returns what n's server is known to replicate, if it is a
// replica.
func (n *node) replicaOf() (*role, bool) {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return n.replica, n.replica != nil
}

// isServerReply reports whether err is the server's own lasting answer that
// it cannot tell who it is: a reply without a run_id, or an error reply (an
// unknown command or section; miniredis: "section (server) is not
// supported"). A passing state (LOADING, BUSY...) or a failure to reach the
// server is not: the node is asked again.
func isServerReply(err error) bool {
	var re redis.Error
	if errors.Is(err, errNoRunID) {
		return true
	}
	if !errors.As(err, &re) {
		return false
	}
	for _, passing := range []string{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.HasPrefix(err.Error(), passing) {
			return false
		}
	}
	return true
}

// runIDs returns the run_ids behind c, and the INFO server text of one
// of its servers ("" when none was read), whose clock a write's deadline
// is carried to (a cluster's masters are taken to keep one time). Of a
// client of one server it returns the ROLE command sent with INFO, in one
// round trip; of a cluster's, which reaches masters only, nil.
func runIDs(ctx context.Context, c redis.UniversalClient) ([]string, string, *redis.Cmd, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var ids []string
		var first string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			id, info, err := runID(ctx, m)
			mu.Lock()
			ids = append(ids, id)
			if first == "" {
				first = info
			}
			mu.Unlock()
			return err
		})
		return ids, first, nil, err
	}
	pipe := c.Pipeline()
	infoCmd := pipe.Info(ctx, "server")
	roleCmd := pipe.Do(ctx, "ROLE")
	_, _ = pipe.Exec(ctx) // each command's own error is read below
	id, info, err := readRunID(infoCmd)
	return []string{id}, info, roleCmd, err
}

func runID(ctx context.Context, c redis.Cmdable) (string, string, error) {
	return readRunID(c.Info(ctx, "server"))
}

// readRunID reads a server's run_id from its reply to INFO server.
func readRunID(cmd *redis.StringCmd) (string, string, error) {
	info, err := cmd.Result()
	if err != nil {
		return "", "", err
	}
	if id := redisnode.InfoFields(info)["run_id"]; id != "" {
		return id, info, nil
	}
	return "", info, errNoRunID
}

// errNoRunID is a server's INFO without a run_id (miniredis, say).
var errNoRunID = errors.New("INFO server has no run_id")

func isNoPerm(err error) bool {
	return strings.HasPrefix(err.Error(), "NOPERM")
}

// Warm opens a connection to every node, loads the scripts and identifies
// the servers, so that the first lock operation pays no handshake. It
// identifies every node that answers, also when others do not, and returns
// when each node has answered, failed, or ctx ended, whatever go-redis
// still holds. A node that did not answer by then (nor its identification
// within Timing.IdentifyTimeout) is not waited for by any operation, and
// its error is returned; a node that refuses our credentials, as
// ErrAuth. A node that is a replica fails it with ErrReplica.
func (p *Set) Warm(ctx context.Context, nodeErr func(node int, addr string, err error) error) error {
	type result struct {
		n   *node
		err error
	}
	results := make(chan result, len(p.nodes))
	p.Life.Add(len(p.nodes)) // Close waits for what go-redis still holds
	for _, n := range p.nodes {
		go func() {
			defer p.Life.End()
			err := p.load(ctx, n)
			if err == nil {
				// After the loads, on the connection they opened.
				pending := p.launchIdentify(true, func(m *node) bool { return m == n && m.unidentified() })
				awaitIdentify(pending, deadlineOr(ctx, p.timing.IdentifyTimeout), ctx.Done())
			}
			results <- result{n, err}
		}()
	}
	errs := make([]error, len(p.nodes))
	in := make([]bool, len(p.nodes))
wait:
	for range p.nodes {
		select {
		case r := <-results:
			errs[r.n.index], in[r.n.index] = r.err, true
		case <-ctx.Done():
			break wait
		}
	}
	for i, n := range p.nodes {
		if !in[i] {
			errs[i] = ctx.Err()
		}
		if errs[i] != nil {
			errs[i] = nodeErr(i, n.address(), errs[i])
			n.tried()
		}
	}
	return errors.Join(append(errs, p.compareServers())...)
}

// load pings n and loads the scripts there; an ACL that refuses either
// is no failure, refused credentials are (ErrAuth). The ping goes first:
// a server that wants a password answers it NOAUTH, where it would
// close the connection on a script's text (an unauthenticated client may
// send no long argument).
func (p *Set) load(ctx context.Context, n *node) error {
	if err := n.client.Ping(ctx).Err(); err != nil && !isNoPerm(err) {
		return asMisconfig(err)
	}
	for _, s := range p.scripts {
		if err := s.Load(ctx, n.client).Err(); err != nil && !isNoPerm(err) {
			return asMisconfig(err)
		}
	}
	return nil
}

func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return dl
	}
	return time.Now().Add(d)
}
