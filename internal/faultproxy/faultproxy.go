// Package faultproxy is an in-process TCP proxy that injects network faults
// between a client and one server.
//
// Redlock has to stay safe when a node is slow, unreachable, or executes a
// command whose reply never arrives. Those faults live in the network, not in
// redis, so tests put a Proxy in front of each real redis-server and point the
// client at Proxy.Addr. Every fault applies to connections that are already
// open as well as to new ones, because go-redis pools and reuses connections:
// a fault that only affected new connections would silently miss most
// traffic.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection from the proxy to its target.
const dialTimeout = 5 * time.Second

// readBufSize is the largest chunk read from one side in one go.
const readBufSize = 32 << 10

// Proxy forwards every accepted connection to a fixed target address and
// applies the currently configured faults. All methods are safe for
// concurrent use. The zero value is not usable; call New.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // cancelled by Close to abort pending dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the proxy starts

	mu          sync.Mutex
	delay       time.Duration
	jitter      time.Duration // each chunk is delayed by a draw in [0, jitter) more (SetJitter)
	rng         *rand.Rand
	blackhole   bool
	dropReplies bool
	refuse      bool
	closed      bool
	links       map[*link]struct{}
	// The hold fault: one armed catch at most, and the chunks caught and
	// not yet released.
	holdArmed  bool
	holdMatch  func([]byte) bool // the chunk to catch
	holdReset  bool              // reset the client's side of the connection once caught
	holdCaught chan struct{}     // closed when the armed catch catches a chunk
	holds      []*hold
	// The drop fault armed to start with a chunk (DropRepliesFrom).
	dropFrom    func([]byte) bool
	dropStarted chan struct{}
	// changed is closed and replaced whenever a fault setting changes, so
	// goroutines waiting on the old settings (a pending delay) re-evaluate.
	changed chan struct{}
}

// faults is a snapshot of the settings, taken under Proxy.mu.
type faults struct {
	delay       time.Duration
	blackhole   bool
	dropReplies bool
	changed     <-chan struct{}
}

// New starts a proxy listening on 127.0.0.1:0 that forwards to target. The
// target is dialled once per accepted connection, so it need not be up yet.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		links:   make(map[*link]struct{}),
		changed: make(chan struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address clients should connect to ("127.0.0.1:PORT").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDelay delays every client->server chunk until d after it arrived at the
// proxy. Chunks keep their order and the delay is not cumulative: a chunk
// that waited behind an earlier one is not delayed again (think network
// latency, not a slow link). The delay is evaluated when a chunk is due, so
// changing it also affects chunks already queued; 0 disables it. Bytes that
// are still queued when the client disconnects are delivered before the
// server side is closed, which models a request that lands after the client
// gave up on it. Server->client traffic is not delayed.
func (p *Proxy) SetDelay(d time.Duration) {
	p.update(func() { p.delay = max(d, 0) })
}

// SetJitter delays each client->server chunk by a further draw, uniform in
// [0, j), made when the chunk arrives, on top of SetDelay's: a link whose
// latency varies from request to request. Chunks keep their order on their
// connection (one is never due before the one ahead of it), while
// connections overtake each other; 0 disables it.
func (p *Proxy) SetJitter(j time.Duration) {
	p.update(func() { p.jitter = max(j, 0) })
}

// SetBlackhole makes the node look stalled or partitioned: the proxy keeps
// accepting connections and reading client bytes, so the client sees a
// timeout rather than a refusal, but nothing is forwarded in either
// direction. Client bytes that arrive, or fall due after a delay, while the
// blackhole is on are discarded, never forwarded later, so a test can rely on the server not having executed
// anything sent during the blackhole (use SetDelay to model late delivery).
// A client disconnect is still passed on (as a half-close) so server-side
// connections do not pile up.
// Replies the server sends meanwhile are discarded too. Turning it off
// resumes forwarding on the same connections; the client's protocol stream
// is then out of sync, which is fine because go-redis closes a connection
// after a timeout.
func (p *Proxy) SetBlackhole(on bool) {
	p.update(func() { p.blackhole = on })
}

// SetDropReplies forwards client->server traffic normally, so the server
// executes every command, but discards all server->client bytes: the "write
// landed, reply lost" case. Dropped bytes are gone for good; as with the
// blackhole the client stream is out of sync afterwards.
func (p *Proxy) SetDropReplies(on bool) {
	p.update(func() { p.dropReplies, p.dropFrom = on, nil })
}

// DropRepliesFrom arms SetDropReplies(true) to start as the next chunk
// that match accepts arrives from a client, before it goes to the server:
// that chunk's reply is dropped, and every reply after it, until
// SetDropReplies or Reset turns the fault off (which also disarms it). The
// channel it returns is closed when the drop starts. Unlike turning the
// fault on at once, a call made next is not kept waiting behind calls
// whose replies the drop swallowed: it left before any reply was lost.
// match runs under the proxy's lock and must not call it.
func (p *Proxy) DropRepliesFrom(match func([]byte) bool) <-chan struct{} {
	started := make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropFrom, p.dropStarted = match, started
	return started
}

// SetRefuse makes the node look down: every open connection is reset at
// once, and while it is on, new connections are accepted and immediately
// reset. The listener stays open (a true "connection refused" would require
// giving up the port, which could then be taken by someone else), so clients
// see "connection reset" or EOF: an immediate error, not a timeout.
func (p *Proxy) SetRefuse(on bool) {
	var doomed []*link
	p.update(func() {
		p.refuse = on
		if on {
			for l := range p.links {
				doomed = append(doomed, l)
			}
		}
	})
	for _, l := range doomed {
		l.close(true)
	}
}

// HoldNext holds back the next client->server chunk, on any connection open
// now or later, whose bytes contain pattern (an empty pattern catches the
// next chunk), together with everything the client sends after it on that
// connection, until ReleaseHeld. Other connections keep flowing, so the
// hold models one request stuck in the network while the client, having
// given up on it, carries on over a new connection. The returned channel is
// closed once a chunk has been caught. HoldNext catches one chunk; calling
// it again before that replaces the pattern.
//
// Matching is per chunk, as read from the client's socket: a pattern split
// across two reads is not seen, and a chunk holding several pipelined
// commands is held whole. A go-redis command is written in one piece, so a
// pattern inside a small command (its key, or a value such as a lock token)
// matches reliably. go-redis writes command names in lower case ("evalsha",
// "del"), and Script.Run sends EVAL only after EVALSHA got NOSCRIPT: load
// the script first, or pick a pattern found in both, such as a key. Chunks
// that arrive while the node is blackholed are discarded before matching.
func (p *Proxy) HoldNext(pattern []byte) <-chan struct{} {
	pattern = bytes.Clone(pattern)
	return p.HoldNextMatch(func(b []byte) bool { return bytes.Contains(b, pattern) }, false)
}

// HoldNextReset is HoldNext, and the moment it catches a chunk it resets
// the client's side of that connection (a RST, as a middlebox or a
// crashed peer's kernel sends), while the chunk stays held for the
// server's side. The client sees its connection fail with the command's
// bytes already written: go-redis, unless told not to, sends the command
// again on a new connection, and the held copy still lands on ReleaseHeld,
// after whatever the client sent since. The chunk must contain pattern at
// least atLeast times (a pipeline of several commands, say).
func (p *Proxy) HoldNextReset(pattern []byte, atLeast int) <-chan struct{} {
	pattern = bytes.Clone(pattern)
	return p.HoldNextMatch(func(b []byte) bool {
		return bytes.Contains(b, pattern) && (atLeast <= 1 || bytes.Count(b, pattern) >= atLeast)
	}, true)
}

// HoldNextMatch is HoldNext for the next chunk that match accepts, which
// runs under the proxy's lock and must not call it; with reset, it resets
// the client's side as HoldNextReset does.
func (p *Proxy) HoldNextMatch(match func([]byte) bool, reset bool) <-chan struct{} {
	caught := make(chan struct{})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdArmed = true
	p.holdMatch, p.holdReset = match, reset
	p.holdCaught = caught
	return caught
}

// HeldCount returns how many chunks have been caught by HoldNext and not yet
// released.
func (p *Proxy) HeldCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.holds)
}

// Held returns a copy of each chunk caught and not yet released, in the
// order caught: what a test held, to check its shape (one command or a
// pipeline of several).
func (p *Proxy) Held() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]byte, len(p.holds))
	for i, h := range p.holds {
		out[i] = bytes.Clone(h.data)
	}
	return out
}

// ReleaseHeld forwards every held chunk, and what queued behind it, and
// disarms a HoldNext that has caught nothing yet. It returns once each held
// chunk has been written to the server's socket (which does not mean the
// server has executed it yet) or was lost because its connection was torn
// down (SetRefuse, the server closing, Close). A client that closed its
// connection meanwhile does not stop the delivery: the held bytes reach the
// server before the proxy closes the server side, which is how a request
// given up on can still land late. Released chunks are subject to the
// delay (ReleaseHeld then waits it out) and the blackhole as usual.
func (p *Proxy) ReleaseHeld() {
	p.mu.Lock()
	holds := p.holds
	p.holds = nil
	p.holdArmed = false
	p.mu.Unlock()
	for _, h := range holds {
		close(h.release)
	}
	for _, h := range holds {
		select {
		case <-h.forwarded:
		case <-h.link.done:
		}
	}
}

// ReleaseFirst forwards the chunk caught first of those still held, and
// what queued behind it, and returns once it has been written to the
// server's socket or lost, as ReleaseHeld does for all: a test that holds
// several chunks lands them in the order it chooses. It reports whether a
// chunk was held.
func (p *Proxy) ReleaseFirst() bool {
	p.mu.Lock()
	if len(p.holds) == 0 {
		p.mu.Unlock()
		return false
	}
	h := p.holds[0]
	p.holds = p.holds[1:]
	p.mu.Unlock()
	close(h.release)
	select {
	case <-h.forwarded:
	case <-h.link.done:
	}
	return true
}

// Reset turns every fault off, releasing held chunks as ReleaseHeld does.
// Connections reset by SetRefuse stay closed.
func (p *Proxy) Reset() {
	p.update(func() {
		p.delay, p.jitter, p.blackhole, p.dropReplies, p.refuse = 0, 0, false, false, false
		p.dropFrom = nil
	})
	p.ReleaseHeld()
}

// Close stops listening, closes every connection, and waits until all
// goroutines started by the proxy have exited. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()

	p.cancel()
	err := p.ln.Close()
	for _, l := range links {
		l.close(false)
	}
	p.wg.Wait()
	return err
}

// update applies a settings change and wakes everybody waiting on the old
// settings.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
}

// intake decides what happens to a chunk the client sent on l: dropped in a
// blackhole (keep is false), caught by an armed HoldNext (h is not nil), or
// queued as usual.
func (p *Proxy) intake(l *link, data []byte) (keep bool, h *hold, extra time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole {
		return false, nil, 0
	}
	if p.jitter > 0 {
		if p.rng == nil {
			p.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
		}
		extra = time.Duration(p.rng.Int64N(int64(p.jitter)))
	}
	if p.dropFrom != nil && p.dropFrom(data) {
		// Before the chunk is queued: its reply cannot pass.
		p.dropReplies, p.dropFrom = true, nil
		close(p.dropStarted)
		close(p.changed)
		p.changed = make(chan struct{})
	}
	if p.holdArmed && p.holdMatch(data) {
		h = &hold{link: l, release: make(chan struct{}), forwarded: make(chan struct{}), reset: p.holdReset, data: bytes.Clone(data)}
		p.holds = append(p.holds, h)
		p.holdArmed = false
		close(p.holdCaught)
	}
	return true, h, extra
}

func (p *Proxy) snapshot() faults {
	p.mu.Lock()
	defer p.mu.Unlock()
	return faults{p.delay, p.blackhole, p.dropReplies, p.changed}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. out of file descriptors): back off briefly
			// instead of spinning, unless we are shutting down.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		p.wg.Add(1)
		go p.handle(conn)
	}
}

// handle dials the target for one client connection, runs the forwarding
// goroutines and forgets the link once it is closed. It runs in its own
// goroutine so a slow dial does not block Accept.
func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	refuse := p.refuse
	p.mu.Unlock()
	if refuse {
		resetConn(client)
		return
	}
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		// Target down: pass the failure on as a reset.
		resetConn(client)
		return
	}
	l := &link{
		client: client,
		server: server,
		queued: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	// Register under the lock so Close and SetRefuse cannot miss the link.
	p.mu.Lock()
	if p.closed || p.refuse {
		p.mu.Unlock()
		l.close(true)
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()

	go p.readClient(l)
	go p.writeServer(l)
	p.copyReplies(l) // returns once the link is closed
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// resetConn closes c with SO_LINGER 0 so the peer gets a RST, the way a
// crashed host's kernel answers, rather than an orderly FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// chunk is one read from the client, stamped with its arrival time so the
// delay is measured from arrival, not from when the previous chunk left.
type chunk struct {
	data []byte
	at   time.Time // when it arrived, or for a jittered chunk when it counts as arrived (SetJitter)
	hold *hold     // set if HoldNext caught this chunk
}

// hold is a chunk caught by HoldNext. The link's writer waits for release
// before forwarding it; the chunks behind it wait because they are queued
// in order.
type hold struct {
	link      *link
	reset     bool          // the client's side is reset once the chunk is queued
	data      []byte        // the chunk, for Held
	release   chan struct{} // closed by ReleaseHeld
	forwarded chan struct{} // closed once the chunk was written or dropped
}

// done marks the held chunk as handled; it may be called on a nil hold.
func (h *hold) done() {
	if h != nil {
		close(h.forwarded)
	}
}

// link is one proxied client connection and its server connection.
type link struct {
	client, server net.Conn

	mu     sync.Mutex
	queue  []chunk       // client bytes waiting to be forwarded, in order
	eof    bool          // the client stopped sending; close after the queue drains
	queued chan struct{} // capacity 1: "queue or eof changed"

	closeOnce sync.Once
	done      chan struct{} // closed when the link is torn down
}

// close tears both connections down, which unblocks every goroutine of the
// link. reset sends RSTs instead of FINs (SetRefuse).
func (l *link) close(reset bool) {
	l.closeOnce.Do(func() {
		if reset {
			resetConn(l.client)
			resetConn(l.server)
		} else {
			_ = l.client.Close()
			_ = l.server.Close()
		}
		close(l.done)
	})
}

func (l *link) push(c chunk, eof bool) {
	l.mu.Lock()
	if eof {
		l.eof = true
	} else {
		l.queue = append(l.queue, c)
	}
	l.mu.Unlock()
	select {
	case l.queued <- struct{}{}:
	default:
	}
}

// next blocks until a chunk is available. ok is false once the client has
// disconnected and the queue is drained, or the link was closed.
func (l *link) next() (c chunk, ok bool) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			c = l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return c, true
		}
		eof := l.eof
		l.mu.Unlock()
		if eof {
			return chunk{}, false
		}
		select {
		case <-l.queued:
		case <-l.done:
			return chunk{}, false
		}
	}
}

// readClient reads client bytes and queues them for writeServer. Reading
// continues even during a blackhole so the client's writes never block and
// it observes a stall, not back-pressure.
func (p *Proxy) readClient(l *link) {
	defer p.wg.Done()
	buf := make([]byte, readBufSize)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			if keep, h, extra := p.intake(l, buf[:n]); keep {
				l.push(chunk{data: append([]byte(nil), buf[:n]...), at: time.Now().Add(extra), hold: h}, false)
				if h != nil && h.reset {
					// The client's side only: the held chunk, queued, still
					// goes to the server on its release, and copyReplies
					// tears the link down once the server answers it.
					resetConn(l.client)
				}
			}
		}
		if err != nil {
			l.push(chunk{}, true)
			return
		}
	}
}

// writeServer forwards queued chunks once they are due; a held chunk is not
// due before its release. The delay is re-read whenever settings change, so
// SetDelay affects chunks already waiting. When the client has finished
// sending and the queue is drained it half-closes the server side, as a
// plain TCP proxy would; the server then closes, and copyReplies tears the
// link down.
func (p *Proxy) writeServer(l *link) {
	defer p.wg.Done()
	for {
		c, ok := l.next()
		if !ok {
			if tc, isTCP := l.server.(*net.TCPConn); isTCP && tc.CloseWrite() == nil {
				return
			}
			l.close(false)
			return
		}
		if c.hold != nil {
			select {
			case <-c.hold.release:
			case <-l.done:
				return
			}
		}
		f := p.snapshot()
		for wait := time.Until(c.at.Add(f.delay)); wait > 0; wait = time.Until(c.at.Add(f.delay)) {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-f.changed:
			case <-l.done:
				t.Stop()
				return
			}
			t.Stop()
			f = p.snapshot()
		}
		if f.blackhole {
			c.hold.done()
			continue // partitioned when due: the bytes are lost
		}
		_, err := l.server.Write(c.data)
		c.hold.done()
		if err != nil {
			l.close(false)
			return
		}
	}
}

// copyReplies forwards server->client bytes unless replies are being dropped
// or the node is blackholed, in which case they are read and discarded. It
// closes the link when either side fails, which unblocks the other
// goroutines.
func (p *Proxy) copyReplies(l *link) {
	defer l.close(false)
	buf := make([]byte, readBufSize)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			if f := p.snapshot(); !f.blackhole && !f.dropReplies {
				if _, werr := l.client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
