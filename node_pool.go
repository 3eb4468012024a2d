package redlock

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
)

// node is one independent Redis master and what we have seen of it.
type node struct {
	index  int
	client redis.UniversalClient
	addr   atomic.Pointer[string] // the configured address; a Sentinel master's once resolved

	// bounded: the client ends a call at its context's deadline
	// (ContextTimeoutEnabled), so a call may run on the caller's goroutine
	// without holding the caller past the node deadline.
	bounded bool
	// here is the client for a call on the caller's goroutine (see
	// hereClient), made at the first such call; hereOnce guards it.
	hereOnce sync.Once
	here     redis.UniversalClient

	inFlight        atomic.Int64 // calls started and not yet returned by go-redis
	failures        atomic.Int64 // consecutive calls with no timely, valid reply
	pendingCleanups atomic.Int64 // deletes waiting to be tried again
	lastErr         atomic.Pointer[errBox]
	// lastCause is the node's latest error other than a deadline since its
	// last timely success, nil when none: what a node that does not answer
	// in time is shown with (silence).
	lastCause atomic.Pointer[errBox]

	identMu sync.Mutex
	// identifying is closed when the identify call under way ends; nil
	// when none is.
	identifying chan struct{}
	identTried  time.Time // when the last identify call ended; zero before the first
	ident       []string  // the run_ids of the server(s) behind the client; nil until known
	// identUnknowable is set when the server does not let us ask (an ACL
	// without INFO): the node is then trusted as configured.
	identUnknowable bool
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
// with the error its calls failed with since its last timely success (a
// refused connection that go-redis took longer to report than our
// deadline), if any.
func (n *node) silence() error {
	b := n.lastCause.Load()
	if b == nil {
		return ErrNoReply
	}
	if errors.Is(b.err, ErrNoReply) { // a late call's, said already
		return b.err
	}
	return fmt.Errorf("%w (its latest error: %w)", ErrNoReply, b.err)
}

// call runs one operation on one node and records its health. args is the
// operation's command line from evalArgs; cmd, if not nil, is where the
// go-redis command is built (see job.cmd). late means the reply came after
// the call's deadline.
func (n *node) call(ctx context.Context, op *nodeOp, args []any, cmd *redis.Cmd) reply {
	return n.callOn(n.client, ctx, op, args, cmd)
}

// callOn is call on c, the node's client or its hereClient.
func (n *node) callOn(c redis.UniversalClient, ctx context.Context, op *nodeOp, args []any, cmd *redis.Cmd) reply {
	n.inFlight.Add(1)
	r := n.eval(c, ctx, op, args, cmd)
	n.inFlight.Add(-1)
	late := ctx.Err() != nil
	nodeErr := r.status == statusUnknown && r.err != nil && !isContextErr(r.err)
	if late && r.status == statusUnknown {
		// A client with ContextTimeoutEnabled gives up at our deadline
		// itself: the same unknown outcome as our waiter giving up. The
		// client's context error is left out: errors.Is(err,
		// context.DeadlineExceeded) on a returned error, and its text,
		// must mean that the caller's context ended, not a node's deadline.
		if nodeErr {
			r.err = fmt.Errorf("%w: %w", ErrNoReply, r.err)
		} else {
			r.err = ErrNoReply
		}
	}
	n.record(r.transportErr(), late)
	if nodeErr {
		n.lastCause.Store(&errBox{r.err})
	}
	r.node = n.index
	return r
}

// evalArgs appends op's EVALSHA command line to a. A round builds it once,
// in its own allocation, and its calls on every node share it, read-only:
// redis.Script.Run would build and box it again for each node (three
// allocations per call). The script's hash comes boxed from scriptHashes,
// and the lock's key from its sequencer.
func (p *nodeSet) evalArgs(seq *sequencer, op *nodeOp, a []any) []any {
	hash, ok := scriptHashes[op.script]
	if !ok {
		hash = op.script.Hash()
	}
	a = append(a, "evalsha", hash, op.nkeys)
	for i, k := range op.keyBuf[:op.nkeys] {
		if i == 0 {
			a = append(a, seq.keyArg(k))
		} else {
			a = append(a, k)
		}
	}
	return append(a, op.argBuf[:op.nargs]...)
}

// scriptHashes are the scripts' SHA1 digests, boxed once.
var scriptHashes = func() map[*redis.Script]any {
	m := make(map[*redis.Script]any, len(allScripts))
	for _, s := range allScripts {
		m[s] = s.Hash()
	}
	return m
}()

// eval runs op on c with its prepared EVALSHA command line and reads the
// reply. A node that does not know the script (NOSCRIPT, as after a restart)
// gets it as nodeOp.run does, through redis.Script.Run (EVALSHA once more,
// then EVAL with the source), on the same client.
func (n *node) eval(c redis.UniversalClient, ctx context.Context, op *nodeOp, args []any, cmd *redis.Cmd) reply {
	if cmd == nil {
		cmd = redis.NewCmd(ctx, args...)
	} else {
		*cmd = *redis.NewCmd(ctx, args...)
	}
	if op.nkeys > 0 {
		cmd.SetFirstKeyPos(3) // a cluster client routes by the first key
	}
	_ = c.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && (errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")) {
		if c == n.client {
			return op.run(ctx, n)
		}
		return op.read(op.script.Run(ctx, c, op.keyBuf[:op.nkeys], op.argBuf[:op.nargs]...))
	}
	return op.read(cmd)
}

// NodeStatus is a snapshot of one node's health as this Client has seen it.
type NodeStatus struct {
	Index int    // position in the slice given to New
	Addr  string // address, when the client exposes one; a Sentinel master's once resolved
	// InFlight counts calls still running. Calls given up on at their deadline
	// keep their connection until go-redis's own timeout; a node with many
	// such calls is stalled, and its pool may be exhausted for a while after
	// it recovers.
	InFlight int
	// PendingCleanups counts deletes (rollbacks and releases) that got no
	// definite answer from this node and wait to be tried again: at most one
	// per lock. Close waits for them.
	PendingCleanups int
	// ConsecutiveFailures counts the latest calls in a row that failed or
	// answered after their deadline; 0 means the last call was on time.
	ConsecutiveFailures int
	LastError           error // the latest failure, nil if none yet
}

// nodeSet holds the masters, the quorum they need, the workers that call
// them and the lifecycle of the work in progress.
type nodeSet struct {
	nodes  []*node
	quorum int
	life   lifecycle
	obs    *observer // the Client's hooks and logger

	tasks chan task // hands work to idle workers
	sched deadlines // the rounds' deadlines

	// verified is set once every node's server is known and no two nodes
	// share one; until then each operation checks (see checkServers).
	verified atomic.Bool
}

// newNodeSet validates the clients given to New, without any I/O: nil
// clients and the same client or server address twice are refused here;
// two addresses of one server are found once both answered (checkServers),
// and neither votes before.
func newNodeSet(clients []redis.UniversalClient) (*nodeSet, error) {
	if len(clients) == 0 {
		return nil, invalid("no nodes")
	}
	p := &nodeSet{quorum: len(clients)/2 + 1, tasks: make(chan task)}
	p.life.init()
	for i, c := range clients {
		if isNil(c) {
			return nil, invalid("node %d is nil", i)
		}
		n := &node{index: i, client: c, bounded: boundsCalls(c)}
		addr := addrOf(c)
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

// isNil reports a nil interface or an interface holding a nil pointer, which
// would otherwise panic on first use.
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
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
	// server; checkServers identifies it at first contact.
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

// hereClient returns a client whose calls end at their context's deadline,
// for a call on the caller's goroutine, or nil if the node has none: its own
// client when that bounds calls; for a *redis.Client that does not, a clone
// of it (redis.Client.WithTimeout) with ContextTimeoutEnabled set. The clone
// shares the client's connection pool, options and the hooks added so far
// (not those added later); WithTimeout(0) leaves the context's deadline as
// the only socket deadline, and the clone's Options are a copy of its own,
// changed before anyone else sees the clone. Without it a lone node with
// go-redis defaults costs each round two goroutine hand-offs.
func (n *node) hereClient() redis.UniversalClient {
	n.hereOnce.Do(func() {
		if n.bounded {
			n.here = n.client
			return
		}
		rc, ok := n.client.(*redis.Client)
		if !ok {
			return
		}
		clone := rc.WithTimeout(0)
		if clone == rc || clone.Options() == rc.Options() {
			return // not a copy: setting the option would change the user's client
		}
		clone.Options().ContextTimeoutEnabled = true
		if boundsCalls(clone) && !rc.Options().ContextTimeoutEnabled {
			n.here = clone
		}
	})
	return n.here
}

// inline picks the node whose call a round's caller makes itself, instead of
// handing it to a worker and waiting for its reply: with one node, whose
// client (or hereClient's clone of it) bounds the call by its deadline, the
// caller waits for that reply anyway, and two goroutine hand-offs per round
// go. With more nodes the
// caller has to wait on the channel for the others all the same, and running
// one call itself measured slower (it shares the caller's time slice with the
// workers it just woke). It returns -1 for none.
func (p *nodeSet) inline() int {
	if len(p.nodes) == 1 && p.nodes[0].hereClient() != nil {
		return 0
	}
	return -1
}

func addrOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}

// checkServers makes sure that no two nodes are one server, so that no
// server votes twice. Each node's server is identified by its run_id (for a
// cluster, those of all its masters; a Sentinel client asks the master it
// resolves to). Until a node's server is known its replies do not count
// toward a quorum (see vote): two addresses of one server that was down at
// first contact cannot both vote once it is back. checkServers asks every
// node not yet known, all in parallel, and waits up to wait, the caller's
// per-node deadline; a node not identified by then is asked again by the
// next operation. A node whose server refuses INFO (an ACL without it) is
// trusted as configured. Once every node is known and distinct, the check
// costs one atomic load.
func (p *nodeSet) checkServers(wait time.Duration) error {
	if p.verified.Load() {
		return nil
	}
	p.identify(wait, false, (*node).unknown)
	return p.compareServers()
}

// vote returns r as it counts toward a quorum: a confirmation from a node
// whose server is not known yet, or is known to be another node's too, is
// an unknown outcome; a node not known yet is asked who it is in the
// background.
func (p *nodeSet) vote(r reply) reply {
	if r.status != statusOK || p.verified.Load() {
		return r
	}
	if n := p.nodes[r.node]; n.unknown() {
		p.identify(0, false, func(m *node) bool { return m == n })
		return reply{node: r.node, err: errUnidentified}
	}
	if err := p.compareServers(); err != nil {
		return reply{node: r.node, err: err}
	}
	return r
}

// identify asks the nodes that pick selects for their identity, each in the
// background under its own deadline, unless an identify call is under way
// there or ended less than identifyRetry ago. It waits up to wait for the
// nodes met for the first time, or for all of them when all is set (Warm):
// a node that failed to answer before is not waited for again by an
// operation, so that a node that stays down costs each operation nothing;
// its votes count from the first operation after it answered.
func (p *nodeSet) identify(wait time.Duration, all bool, pick func(*node) bool) {
	var pending []chan struct{}
	for _, n := range p.nodes {
		if !pick(n) {
			continue
		}
		n.identMu.Lock()
		done, first := n.identifying, n.identTried.IsZero() || all
		if done == nil && (first || time.Since(n.identTried) >= identifyRetry) {
			done = make(chan struct{})
			n.identifying = done
			p.life.add(1)
			go func() {
				defer p.life.end()
				n.identify(done)
			}()
		}
		n.identMu.Unlock()
		if done != nil && first {
			pending = append(pending, done)
		}
	}
	if wait <= 0 || len(pending) == 0 {
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, done := range pending {
		select {
		case <-done:
		case <-timer.C:
			return
		}
	}
}

// compareServers reports two nodes that share a server.
func (p *nodeSet) compareServers() error {
	known := true
	for i, a := range p.nodes {
		ia, ua := a.identity()
		known = known && (ia != nil || ua)
		for _, b := range p.nodes[i+1:] {
			ib, _ := b.identity()
			for _, id := range ia {
				if slices.Contains(ib, id) {
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

// unknown reports whether n's server is still to be identified.
func (n *node) unknown() bool {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return n.ident == nil && !n.identUnknowable
}

func (n *node) identity() ([]string, bool) {
	n.identMu.Lock()
	defer n.identMu.Unlock()
	return n.ident, n.identUnknowable
}

// identify learns the run_ids behind n, within identifyTimeout (a client
// without ContextTimeoutEnabled may hold the call longer: the waiting side
// in nodeSet.identify does not wait for it), and closes done.
func (n *node) identify(done chan struct{}) {
	defer func() {
		n.identMu.Lock()
		n.identifying, n.identTried = nil, time.Now()
		n.identMu.Unlock()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), identifyTimeout)
	defer cancel()
	if c, ok := n.client.(*redis.Client); ok && c.Options().Addr == "FailoverClient" && c.Options().Dialer != nil {
		// A Sentinel client: show the master it resolves to.
		if conn, err := c.Options().Dialer(ctx, "tcp", c.Options().Addr); err == nil {
			addr := conn.RemoteAddr().String()
			n.addr.Store(&addr)
			_ = conn.Close()
		}
	}
	ids, err := runIDs(ctx, n.client)
	n.identMu.Lock()
	defer n.identMu.Unlock()
	switch {
	case err == nil && len(ids) > 0:
		n.ident = ids
	case err != nil && (isNoPerm(err) || isServerReply(err)):
		// The server answered but cannot tell who it is (an ACL without
		// INFO, a server whose INFO has no run_id): trusted as configured.
		n.identUnknowable = true
	}
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

func runIDs(ctx context.Context, c redis.UniversalClient) ([]string, error) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var ids []string
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			id, err := runID(ctx, m)
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return err
		})
		return ids, err
	}
	id, err := runID(ctx, c)
	return []string{id}, err
}

func runID(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	if id := infoFields(info)["run_id"]; id != "" {
		return id, nil
	}
	return "", errNoRunID
}

// errNoRunID is a server's INFO without a run_id (miniredis, say).
var errNoRunID = errors.New("INFO server has no run_id")

func isNoPerm(err error) bool {
	return strings.HasPrefix(err.Error(), "NOPERM")
}

func (p *nodeSet) status() []NodeStatus {
	out := make([]NodeStatus, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = NodeStatus{
			Index:               i,
			Addr:                n.address(),
			InFlight:            int(n.inFlight.Load()),
			PendingCleanups:     int(n.pendingCleanups.Load()),
			ConsecutiveFailures: int(n.failures.Load()),
		}
		if b := n.lastErr.Load(); b != nil {
			out[i].LastError = b.err
		}
	}
	return out
}

// warm opens a connection to every node, loads the scripts and identifies
// the servers, so that the first lock operation pays no handshake.
func (p *nodeSet) warm(ctx context.Context) error {
	errs := make([]error, len(p.nodes))
	var wg sync.WaitGroup
	for i, n := range p.nodes {
		wg.Go(func() {
			for _, s := range allScripts {
				if err := s.Load(ctx, n.client).Err(); err != nil && !isNoPerm(err) {
					errs[i] = &NodeError{Node: i, Addr: n.address(), Err: err}
					return
				}
			}
			if err := n.client.Ping(ctx).Err(); err != nil && !isNoPerm(err) {
				errs[i] = &NodeError{Node: i, Addr: n.address(), Err: err}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.identify(time.Until(deadlineOr(ctx, identifyTimeout)), true, (*node).unknown)
	return p.compareServers()
}

func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return dl
	}
	return time.Now().Add(d)
}

// identifyTimeout bounds the first contact with a node: dial, handshake
// (TLS included) and INFO.
const identifyTimeout = time.Second

// identifyRetry is the shortest time between two identify calls to a node
// that has not answered yet.
const identifyRetry = 100 * time.Millisecond

// workerIdle is how long an idle worker waits for more work before it exits.
const workerIdle = time.Second

// task is a lock's lane on one node, to be drained starting with j.
type task struct {
	s *sequencer
	j *job
}

// work hands t to an idle worker, or starts one. Workers are reused because
// a fresh goroutine grows its stack anew on every call into go-redis, which
// costs more than the call's own work on a loopback node.
func (p *nodeSet) work(t task) {
	select {
	case p.tasks <- t:
	default:
		go p.worker(t)
	}
}

func (p *nodeSet) worker(t task) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		t.s.drain(p, t.j)
		idle.Reset(workerIdle)
		select {
		case t = <-p.tasks:
		case <-idle.C:
			return
		case <-p.life.closing:
			return
		}
	}
}

// lifecycle counts the work in progress — public calls, node calls, parked
// delete retries — so that Close can wait for all of it.
type lifecycle struct {
	mu      sync.Mutex
	active  int           // public calls in progress plus node jobs and their retries
	closed  bool          // set by Close: begin fails from then on
	closing chan struct{} // closed by Close, wakes Acquire's retry wait and idle workers
	idle    chan struct{} // closed when active drops to 0 after Close
	// abandon is closed when Close's context ended before the work did:
	// parked deletes then give up at their next try.
	abandon chan struct{}
}

func (l *lifecycle) init() {
	l.closing = make(chan struct{})
	l.abandon = make(chan struct{})
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// begin registers a public call, or reports ErrClosed. Everything the call
// starts, including a rollback after it failed, is covered by it, so Close
// cannot return between a failed attempt and its rollback.
func (l *lifecycle) begin() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.active++
	return nil
}

// add registers k node jobs; only called while a public call is registered
// or by a job that is still registered.
func (l *lifecycle) add(k int) {
	l.mu.Lock()
	l.active += k
	l.mu.Unlock()
}

// end unregisters one public call or node job.
func (l *lifecycle) end() {
	l.mu.Lock()
	l.active--
	if l.active == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	l.mu.Unlock()
}

// close refuses new calls and returns a channel closed once nothing runs.
func (l *lifecycle) close() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.closing)
	}
	if l.active == 0 {
		return closedChan
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	return l.idle
}

// giveUp makes parked deletes stop at their next try.
func (l *lifecycle) giveUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.abandon:
	default:
		close(l.abandon)
	}
}

func (l *lifecycle) abandoned() bool {
	select {
	case <-l.abandon:
		return true
	default:
		return false
	}
}
