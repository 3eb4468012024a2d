package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Network is the simulated network between the clients and the nodes. A
// link joins one client to one node; each connection on a link has two
// directions, each a queue of chunks (one Write each) that are delivered
// in order, each at its own time: a connection is a stream, as TCP's, and
// only chunks of different connections overtake each other. Every fault
// of the network is a rule of a link's queues: a delay, a blackhole (the
// chunks wait for the heal, as retransmitted segments do), dropped
// replies, and a chunk held back while its connection is reset under the
// client, then delivered to the node (go-redis, seeing the reset, sends
// the command again on a new connection).
//
// Everything here runs inside the test's synctest bubble: delivery is a
// timer, and a reader waits on a channel, so that the bubble's clock moves
// on whenever every goroutine waits.
type Network struct {
	mu    sync.Mutex // guards everything below and every half's state; never held while waiting
	seed  uint64
	links map[[2]int]*link
	nodes []*Node
	cfg   NetConfig
	trace *Trace
	seq   int // connections made, for their names
	// landed is when the last held chunk to each node landed.
	landed map[int]time.Time
	// far holds, per node, the base latencies of the far faults acting
	// on it now (Far), one entry each.
	far map[int][]time.Duration
	// OnWrite, when set, is told of every chunk a client writes to a
	// node (not pub/sub's), as it is written, without n.mu held: the
	// recorder learns from it when a Lock last sent a command
	// (Recorder.sent).
	OnWrite func(data []byte)
}

// NetConfig is the network's timing.
type NetConfig struct {
	// Latency is a chunk's one-way delay to a near node when no fault adds
	// to it: uniform in [Latency/2, Latency].
	Latency time.Duration
	// Bases, when set, is each node's base latency, by node, in place of
	// Latency: a chunk's one-way delay to node i is uniform in
	// [Bases[i]/2, Bases[i]] (a node away from the clients, as another
	// zone's or region's). Every link to a node shares its base: the
	// clients are in one place.
	Bases []time.Duration
	// QueueBytes is how many bytes a direction of a connection holds in
	// flight before a Write waits (a socket's buffers).
	QueueBytes int
}

// link is what the faults of one client's path to one node act on.
type link struct {
	client, node int
	rng          *rand.Rand // the link's own draws, so that one link's traffic does not move another's
	conns        map[*Conn]struct{}
	// blackholed: chunks written on the link, both ways, wait for the
	// heal; dials wait too.
	blackholed bool
	cuts       int           // the blackholes acting on the link
	healed     chan struct{} // closed at the heal of a blackhole
	// delay adds up to this much to each chunk (uniform), so that chunks
	// of the link's connections overtake each other.
	delay time.Duration
	// drop: the node's replies are lost, while drops faults act.
	drop  bool
	drops int
	// hold: the next chunk the client writes is held back this long, and
	// its connection is reset under the client after resetAfter; with
	// holdMatch, the next chunk it accepts.
	hold, resetAfter time.Duration
	holdMatch        func([]byte) bool
	// then, when set, gives from the chunk a hold caught the match of a
	// second hold on the link, for thenHold: a chunk sent after the first
	// is held to land after it.
	then     func([]byte) func([]byte) bool
	thenHold time.Duration
	// pending counts the held chunks not delivered yet; landed is when
	// the last one landed.
	pending int
	landed  time.Time
}

// half is one direction of a connection.
type half struct {
	queue  []chunk // in flight, in order, at non-decreasing times
	bytes  int     // the bytes queued
	buf    []byte  // delivered, not read yet
	eof    bool    // the sender's close was delivered: EOF after buf
	timer  *time.Timer
	wake   chan struct{} // capacity 1: the reader has something new
	room   chan struct{} // capacity 1: the writer may have room
	closed bool          // the reader's end closed: deliveries are discarded
	reset  bool          // the reader's end was reset: reads fail
}

type chunk struct {
	data []byte
	at   time.Time // when it is delivered; zero while a blackhole holds it
	fin  bool      // the sender's close, after the data before it
	drop bool
	held bool // a held chunk of a hold fault
}

// Conn is one end of a simulated connection: the client's, given to
// go-redis by its Dialer, or the node's, served by miniredis.
type Conn struct {
	net    *Network
	link   *link
	in     *half
	out    *half
	peer   *Conn
	client bool  // the client's end
	free   bool  // a pub/sub connection: no faults, no latency
	node   *Node // the node, on the node's end
	name   string
	closed bool
	rdl    time.Time
	wdl    time.Time
}

// NewNetwork returns a network over nodes, its random draws from seed.
func NewNetwork(cfg NetConfig, nodes []*Node, seed uint64, trace *Trace) *Network {
	return &Network{seed: seed, links: make(map[[2]int]*link), nodes: nodes, cfg: cfg, trace: trace, landed: make(map[int]time.Time), far: make(map[int][]time.Duration)}
}

func (n *Network) linkOf(client, node int) *link {
	k := [2]int{client, node}
	l := n.links[k]
	if l == nil {
		l = &link{client: client, node: node, conns: make(map[*Conn]struct{}),
			rng: rand.New(rand.NewPCG(n.seed, uint64(client)<<16|uint64(node)))}
		n.links[k] = l
	}
	return l
}

// errRefused and errReset are what a dial to a node that is down, and a
// connection reset, return: non-timeout net.Errors, which go-redis retries.
var (
	errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	errReset   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
)

// Dial connects client to node: it waits out a blackhole (or ctx), takes
// one round trip, and fails at once when the node is down.
func (n *Network) Dial(ctx context.Context, client, node int) (net.Conn, error) {
	if pubSubDial() {
		return n.connect(client, node, true)
	}
	for {
		n.mu.Lock()
		l := n.linkOf(client, node)
		if !l.blackholed {
			n.mu.Unlock()
			break
		}
		healed := l.healed
		n.mu.Unlock()
		select {
		case <-healed:
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
		}
	}
	n.mu.Lock()
	l := n.linkOf(client, node)
	rtt := 2 * n.latency(l)
	n.mu.Unlock()
	if err := sleepCtx(ctx, rtt); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	return n.connect(client, node, false)
}

// connect makes a connection of client to node, unless the node is down.
// A free connection is a pub/sub connection's, which no fault of the
// network reaches and whose chunks take no time (see pubSubDial).
func (n *Network) connect(client, node int, free bool) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.linkOf(client, node)
	nd := n.nodes[node]
	if !nd.Up() {
		return nil, errRefused
	}
	n.seq++
	c2s, s2c := newHalf(), newHalf()
	name := fmt.Sprintf("c%d-n%d#%d", client, node, n.seq)
	c := &Conn{net: n, link: l, in: s2c, out: c2s, client: true, name: name, free: free}
	s := &Conn{net: n, link: l, in: c2s, out: s2c, name: name, free: free}
	c.peer, s.peer = s, c
	l.conns[c] = struct{}{}
	if err := nd.serve(s); err != nil {
		delete(l.conns, c)
		return nil, errRefused
	}
	return c, nil
}

func newHalf() *half {
	return &half{wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// latency draws a chunk's delay on l without the faults that add to it
// (a far fault sets it), with n.mu held.
func (n *Network) latency(l *link) time.Duration {
	d := n.base(l.node)
	return d/2 + time.Duration(l.rng.Int64N(int64(d/2)+1))
}

// base is the longest one-way delay of a chunk to node now, with n.mu
// held: the node's own (NetConfig), or the longest of the far faults on
// it, whichever is longer.
func (n *Network) base(node int) time.Duration {
	d := n.cfg.Latency
	if node < len(n.cfg.Bases) {
		d = n.cfg.Bases[node]
	}
	for _, f := range n.far[node] {
		d = max(d, f)
	}
	return d
}

// send queues data from c toward its peer, with n.mu held.
func (n *Network) send(c *Conn, data []byte, fin bool) {
	h, l := c.out, c.link
	ch := chunk{data: data, fin: fin}
	now := time.Now()
	switch {
	case c.free:
		ch.at = now
	case !c.client && l.drop && !fin:
		ch.drop = true
	case c.client && l.hold > 0 && !fin && (l.holdMatch == nil || l.holdMatch(data)):
		// The chunk waits l.hold; the client's end is reset under it
		// first, so that go-redis sends the command again elsewhere.
		ch.held = true
		ch.at = now.Add(l.hold)
		l.pending++
		n.trace.Add("net", c.link.node, "hold %s: %d bytes held %v, reset in %v", c.name, len(data), l.hold, l.resetAfter)
		l.hold, l.holdMatch = 0, nil
		if then := l.then; then != nil {
			l.then = nil
			if m := then(data); m != nil {
				l.hold, l.holdMatch = l.thenHold, m
			}
		}
		client := c
		time.AfterFunc(l.resetAfter, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.resetClient(client)
		})
	}
	if !ch.held && !c.free && !l.blackholed {
		ch.at = now.Add(n.latency(l))
		if l.delay > 0 {
			ch.at = ch.at.Add(time.Duration(l.rng.Int64N(int64(l.delay))))
		}
	}
	if k := len(h.queue); k > 0 && !ch.at.IsZero() {
		if last := h.queue[k-1].at; last.IsZero() {
			ch.at = time.Time{} // behind a chunk a blackhole holds: in order
		} else if ch.at.Before(last) {
			ch.at = last
		}
	}
	if debugNet {
		fmt.Printf("%v send %s client=%v %q at=%v\n", time.Now().Format("05.000000"), c.name, c.client, data, ch.at.Format("05.000000"))
	}
	h.queue = append(h.queue, ch)
	h.bytes += len(data)
	if !ch.at.IsZero() && !ch.at.After(now) {
		n.deliver(h, c.link) // due now: no timer, which would wait for the bubble
		return
	}
	n.schedule(h, c.link)
}

// schedule sets h's timer for its first chunk, with n.mu held.
func (n *Network) schedule(h *half, l *link) {
	if len(h.queue) == 0 || h.queue[0].at.IsZero() {
		if h.timer != nil {
			h.timer.Stop()
		}
		return
	}
	d := time.Until(h.queue[0].at)
	if h.timer == nil {
		h.timer = time.AfterFunc(d, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.deliver(h, l)
		})
		return
	}
	h.timer.Reset(d)
}

// deliver moves h's due chunks to its reader, with n.mu held.
func (n *Network) deliver(h *half, l *link) {
	now := time.Now()
	moved := false
	for len(h.queue) > 0 {
		ch := h.queue[0]
		if ch.at.IsZero() || ch.at.After(now) {
			break
		}
		h.queue = h.queue[1:]
		h.bytes -= len(ch.data)
		if ch.held {
			l.pending--
			l.landed = now
			n.landed[l.node] = now
			n.trace.Add("net", l.node, "held chunk of %d bytes delivered", len(ch.data))
		}
		moved = true
		switch {
		case h.closed || ch.drop:
		case ch.fin:
			h.eof = true
		default:
			h.buf = append(h.buf, ch.data...)
		}
	}
	if moved {
		signal(h.wake)
		signal(h.room)
	}
	n.schedule(h, l)
}

// resetClient resets c, a client's end, with n.mu held: its reads and
// writes fail at once, the replies on their way to it are lost, and what it
// wrote goes on to the node, which then sees the connection closed.
func (n *Network) resetClient(c *Conn) {
	if c.closed || c.in.reset {
		return
	}
	n.trace.Add("net", c.link.node, "reset %s", c.name)
	c.in.reset = true
	c.in.buf, c.in.queue = nil, nil
	signal(c.in.wake)
	signal(c.out.room)
	c.closed = true
	delete(c.link.conns, c)
	n.send(c, nil, true)
}

// Read reads what was delivered to c, waiting for it until c's read
// deadline.
func (c *Conn) Read(b []byte) (int, error) {
	n := c.net
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		n.mu.Lock()
		h := c.in
		switch {
		case h.reset:
			n.mu.Unlock()
			return 0, errReset
		case c.closed:
			n.mu.Unlock()
			return 0, net.ErrClosed
		case len(h.buf) > 0:
			k := copy(b, h.buf)
			h.buf = h.buf[k:]
			n.mu.Unlock()
			if c.node != nil {
				c.node.tick() // the command runs at the node's time
			}
			return k, nil
		case h.eof:
			n.mu.Unlock()
			return 0, io.EOF
		}
		dl := c.rdl
		n.mu.Unlock()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timeout = timer.C
		}
		select {
		case <-h.wake:
		case <-timeout:
		}
	}
}

// Write queues b toward the peer. It waits while the direction holds
// QueueBytes, until c's write deadline.
func (c *Conn) Write(b []byte) (int, error) {
	n := c.net
	for first := true; ; first = false {
		n.mu.Lock()
		if first && c.client && !c.free && c.deadLocked() != nil {
			// Dead before the command began: go-redis's pool check
			// (SyscallConn) would have dropped it. Nothing is sent.
			n.mu.Unlock()
			return 0, ErrStale
		}
		switch {
		case c.in.reset:
			n.mu.Unlock()
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
		case c.closed:
			n.mu.Unlock()
			return 0, net.ErrClosed
		case c.out.bytes < n.cfg.QueueBytes:
			n.send(c, append([]byte(nil), b...), false)
			on := n.OnWrite
			n.mu.Unlock()
			if on != nil && c.client && !c.free {
				on(b)
			}
			return len(b), nil
		}
		dl := c.wdl
		n.mu.Unlock()
		var timeout <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-c.out.room:
		case <-timeout:
		}
	}
}

// Close closes c: the peer reads EOF after what c wrote before.
func (c *Conn) Close() error {
	n := c.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.in.closed = true
	c.in.buf = nil
	signal(c.in.wake)
	delete(c.link.conns, c)
	n.send(c, nil, true)
	return nil
}

// SyscallConn lets go-redis check a pooled connection before it hands it
// out, as it checks a socket (a peek that must not block): a connection
// whose peer closed it, or that was reset, fails the check, and so does one
// with bytes nobody asked for. Without it go-redis would take a connection
// a crashed node closed for a live one, and the next command on it would
// fail (TestShimStaleConnections).
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return peek{c}, nil }

// peek is a Conn's syscall.RawConn: Read answers go-redis's check without
// calling its function, which would read a real socket.
type peek struct{ c *Conn }

var (
	errPeekData    = errors.New("sim: unexpected data on an idle connection")
	errNoRawAccess = errors.New("sim: no raw access to a simulated connection")
)

// Read reports what a peek at the connection would find: an error for a
// closed, reset or finished connection or unread bytes, nil (nothing to
// read yet) for a live one.
func (p peek) Read(func(fd uintptr) bool) error {
	c := p.c
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	return c.deadLocked()
}

// ErrStale is what a write on a client's connection returns when a peek
// (peek.Read) would have found the connection dead before the write began,
// with nothing sent: go-redis checks a pooled connection so only where it
// is built for a unix (conn_check.go), not for wasip1, where the
// deterministic runs are. staleHook sends the command again at once, as
// the pool would have handed out another connection, so that a crashed
// node's connections cost no command a try in either build.
var ErrStale = errors.New("sim: the connection was dead before the command was written (a pool check drops it)")

// deadLocked is what a peek at c would find: an error for a closed, reset
// or finished connection or unread bytes, nil for a live one. Called with
// the network's lock held.
func (c *Conn) deadLocked() error {
	switch h := c.in; {
	case h.reset:
		return errReset
	case c.closed:
		return net.ErrClosed
	case len(h.buf) > 0:
		return errPeekData
	case h.eof:
		return io.EOF
	}
	return nil
}

// Control and Write are not used by go-redis.
func (peek) Control(func(fd uintptr)) error { return errNoRawAccess }

// Write is not used by go-redis.
func (peek) Write(func(fd uintptr) bool) error { return errNoRawAccess }

// LocalAddr and RemoteAddr are the link's ends.
func (c *Conn) LocalAddr() net.Addr { return c.addr(c.client) }

// RemoteAddr is the other end's address.
func (c *Conn) RemoteAddr() net.Addr { return c.addr(!c.client) }

func (c *Conn) addr(client bool) net.Addr {
	if client {
		return &net.TCPAddr{IP: net.IPv4(10, 1, byte(c.link.client), 1), Port: 40000}
	}
	return &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(c.link.node+1)), Port: 6379}
}

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	_ = c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the read deadline, waking a reader.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.net.mu.Lock()
	c.rdl = t
	c.net.mu.Unlock()
	signal(c.in.wake)
	return nil
}

// SetWriteDeadline sets the write deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.net.mu.Lock()
	c.wdl = t
	c.net.mu.Unlock()
	signal(c.out.room)
	return nil
}

var debugNet = false

// pubSubDial reports whether the dial under way is go-redis's for a
// PubSub. go-redis dials it, sends HELLO and reads the reply with the
// PubSub's mutex held, and another goroutine of the library waits on that
// mutex meanwhile (its receive loop or its subscribe): a goroutine blocked
// on a sync.Mutex keeps the bubble's clock from moving, so a handshake that
// waits for a timer (a chunk's latency, a fault's heal) would never end.
// Such a connection is free of faults and latency; the library's pub/sub
// is a hint its waiters do without (they fall back to polling).
func pubSubDial() bool {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.Contains(f.Function, "(*PubSub)") || strings.Contains(f.Function, "(*PubSubPool)") {
			return true
		}
		if !more {
			return false
		}
	}
}
