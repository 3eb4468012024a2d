package redlock

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is one independent Redis master and what we have seen of its health.
type node struct {
	index  int
	client redis.UniversalClient
	addr   string

	inFlight atomic.Int64 // calls started and not yet returned by go-redis
	failures atomic.Int64 // consecutive calls with no timely, valid reply
	lastErr  atomic.Pointer[errBox]
}

type errBox struct{ err error }

// record notes the outcome of one call for NodeStatus.
func (n *node) record(err error, late bool) {
	if err == nil && !late {
		n.failures.Store(0)
		return
	}
	if err == nil {
		err = ErrNoReply
	}
	n.failures.Add(1)
	n.lastErr.Store(&errBox{err})
}

// NodeStatus is a snapshot of one node's health as this Client has seen it.
type NodeStatus struct {
	Index int    // position in the slice given to New
	Addr  string // address, when the client exposes one
	// InFlight counts calls still running. Calls given up on at their deadline
	// keep their connection until go-redis's own timeout; a node with many
	// such calls is stalled, and its pool may be exhausted for a while after
	// it recovers.
	InFlight int
	// ConsecutiveFailures counts the latest calls in a row that failed or
	// answered after their deadline; 0 means the last call was on time.
	ConsecutiveFailures int
	LastError           error // the latest failure, nil if none yet
}

// nodePool holds the masters and counts the work in progress on them, so
// that Close can wait for every public call and every background call
// (rollbacks, late replies) to end.
type nodePool struct {
	nodes  []*node
	quorum int

	tasks chan task // hands work to idle workers

	mu      sync.Mutex
	active  int           // public calls in progress plus node jobs
	closed  bool          // set by Close: begin fails from then on
	closing chan struct{} // closed by Close, wakes Acquire's retry wait
	idle    chan struct{} // closed when active drops to 0 after Close
}

func newNodePool(clients []redis.UniversalClient) (*nodePool, error) {
	if len(clients) == 0 {
		return nil, invalid("no nodes")
	}
	p := &nodePool{quorum: len(clients)/2 + 1, closing: make(chan struct{}), tasks: make(chan task)}
	for i, c := range clients {
		if isNil(c) {
			return nil, invalid("node %d is nil", i)
		}
		n := &node{index: i, client: c, addr: addrOf(c)}
		for _, o := range p.nodes {
			if sameNode(o, n) {
				return nil, invalid("nodes %d and %d are the same Redis (%s): Redlock needs independent masters", o.index, i, n.addr)
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

// sameNode catches the same client passed twice, and two plain clients for
// the same server and database: both would let one server count twice toward
// the quorum.
func sameNode(a, b *node) bool {
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
	// A Sentinel failover client reports a placeholder address, not a server.
	if oa.Network == "tcp" || oa.Network == "" {
		if _, _, err := net.SplitHostPort(oa.Addr); err != nil {
			return false
		}
	}
	return true
}

func addrOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			return a[0]
		}
	}
	return ""
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// begin registers a public call, or reports ErrClosed. Everything the call
// starts, including a rollback after it failed, is covered by it, so Close
// cannot return between a failed attempt and its rollback.
func (p *nodePool) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.active++
	return nil
}

// add registers k node goroutines; only called inside begin/end.
func (p *nodePool) add(k int) {
	p.mu.Lock()
	p.active += k
	p.mu.Unlock()
}

// end unregisters one public call or goroutine.
func (p *nodePool) end() {
	p.mu.Lock()
	p.active--
	if p.active == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// close refuses new calls and returns a channel closed once nothing runs.
func (p *nodePool) close() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	if p.active == 0 {
		return closedChan
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	return p.idle
}

func (p *nodePool) status() []NodeStatus {
	out := make([]NodeStatus, len(p.nodes))
	for i, n := range p.nodes {
		out[i] = NodeStatus{
			Index:               i,
			Addr:                n.addr,
			InFlight:            int(n.inFlight.Load()),
			ConsecutiveFailures: int(n.failures.Load()),
		}
		if b := n.lastErr.Load(); b != nil {
			out[i].LastError = b.err
		}
	}
	return out
}

// call runs one operation on one node and records its health. late means the
// reply came after the deadline the caller waited for.
func (n *node) call(ctx context.Context, op *nodeOp) reply {
	n.inFlight.Add(1)
	r := op.run(ctx, n)
	n.inFlight.Add(-1)
	late := ctx.Err() != nil
	if late && r.status == statusUnknown {
		// A client with ContextTimeoutEnabled gives up at our deadline
		// itself: the same unknown outcome as our waiter giving up. The
		// client's context error is not wrapped: errors.Is(err,
		// context.DeadlineExceeded) on a returned error must mean that the
		// caller's context ended, not a node's deadline.
		r.err = fmt.Errorf("%w (%v)", ErrNoReply, r.err)
	}
	n.record(r.transportErr(), late)
	r.node = n.index
	return r
}

// workerIdle is how long an idle worker waits for more work before it exits.
const workerIdle = time.Second

// task is a lock's queue on one node, to be drained starting with j.
type task struct {
	s *sequencer
	j *job
}

// work hands t to an idle worker, or starts one. Workers are reused because
// a fresh goroutine grows its stack anew on every call into go-redis, which
// costs more than the call's own work on a loopback node.
func (p *nodePool) work(t task) {
	select {
	case p.tasks <- t:
	default:
		go p.worker(t)
	}
}

func (p *nodePool) worker(t task) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		t.s.drain(p, t.j)
		idle.Reset(workerIdle)
		select {
		case t = <-p.tasks:
		case <-idle.C:
			return
		case <-p.closing:
			return
		}
	}
}
