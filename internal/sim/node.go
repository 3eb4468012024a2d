package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Node is one simulated Redis master: a miniredis server in the bubble,
// with what the library needs of Redis that miniredis lacks (shims.go),
// a clock of its own (the node's wall clock, which its keys expire by and
// TIME reads), and a life: it crashes, restarts with its data (an AOF
// written before every reply, as the nemesis's nodes have) or without,
// and each start is a new server with a new run_id and an empty script
// cache, as a real restart is.
type Node struct {
	ID    int
	trace *Trace
	rng   *rand.Rand // run_ids; guarded by mu

	mu     sync.Mutex // guards what follows; never held while waiting, nor while miniredis's own lock is wanted by a command in flight
	m      *miniredis.Miniredis
	sc     *scripter // the running server's scripts: its lock keeps a look at the keys from seeing a script half done
	up     bool
	runID  string
	clock  Clock
	starts int
	conns  map[*Conn]struct{} // the node's ends of its connections
	saved  []savedKey         // a down node's data, for a restart with it
}

// savedKey is a key of a crashed node: its value and its expiry on the
// node's clock (zero: none), as an AOF keeps it.
type savedKey struct {
	key, value string
	expires    time.Time
}

// TraceCommandsOf, when set, is a key prefix: every command a client sends
// a node that names a key with it is traced, with its arguments, to follow
// a finding command by command (-sim.cmds).
var TraceCommandsOf string

// NewNode starts node id, its clock in step with the bubble's.
func NewNode(id int, rng *rand.Rand, trace *Trace) *Node {
	n := &Node{ID: id, trace: trace, rng: rng, conns: make(map[*Conn]struct{})}
	n.clock.Reset(time.Now())
	n.mu.Lock()
	defer n.mu.Unlock()
	n.start(nil)
	return n
}

// start starts a new server with data, with n.mu held.
func (n *Node) start(data []savedKey) {
	m := miniredis.NewMiniRedis()
	// Dial starts the server without a listener; the pipe is not used.
	c, err := m.Dial()
	if err != nil {
		panic("sim: miniredis: " + err.Error())
	}
	_ = c.Close()
	n.starts++
	n.runID = fmt.Sprintf("%016x%016x%08x", n.rng.Uint64(), n.rng.Uint64(), n.rng.Uint32())
	now := n.clock.Now()
	m.SetTime(now)
	m.ClockTTL(true)
	for _, k := range data {
		if !k.expires.IsZero() && !k.expires.After(now) {
			continue // expired while the node was down
		}
		_ = m.Set(k.key, k.value)
		if !k.expires.IsZero() {
			m.SetTTL(k.key, k.expires.Sub(now))
		}
	}
	var seen func(string, []string)
	if key := TraceCommandsOf; key != "" {
		seen = func(cmd string, args []string) {
			for _, a := range args {
				if strings.HasPrefix(a, key) {
					before, err := m.Get(a) // the value the command finds: the one the previous left
					if err != nil {
						before = "(none)"
					}
					n.trace.AddKeys("cmd", n.ID, []string{a}, "n%d %s %s | %s was %q", n.ID, cmd, strings.Join(args, " "), a, before)
					return
				}
			}
		}
	}
	n.sc = installShims(m, n.runID, n.clock.Now, seen)
	n.m, n.up = m, true
}

// Up reports whether the node is running.
func (n *Node) Up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.up
}

// RunID is the run_id of the node's current server.
func (n *Node) RunID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.runID
}

// serve hands s, the node's end of a new connection, to the server.
func (n *Node) serve(s *Conn) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.up {
		return errRefused
	}
	n.conns[s] = struct{}{}
	s.node = n
	n.m.Server().ServeConn(s)
	return nil
}

// tick sets the server's time to the node's clock: called before the
// server reads a command, so that the command (and TIME within a script)
// runs at the node's time, as every command delivered at one instant runs
// at that instant of the bubble.
func (n *Node) tick() {
	n.mu.Lock()
	m, now := n.m, n.clock.Now()
	n.mu.Unlock()
	if m != nil {
		m.SetTime(now)
	}
}

// Crash stops the node: its connections close (the clients read EOF after
// what was already on its way to them) and it refuses dials until
// Restart. keep says whether its data survives, as an AOF's does.
func (n *Node) Crash(keep bool) {
	n.mu.Lock()
	if !n.up {
		n.mu.Unlock()
		return
	}
	m, sc := n.m, n.sc
	now := n.clock.Now()
	n.up, n.m, n.sc = false, nil, nil
	conns := n.conns
	n.conns = make(map[*Conn]struct{})
	n.mu.Unlock()

	sc.mu.Lock() // after the script under way, if any: a crash falls between commands
	defer sc.mu.Unlock()
	m.SetTime(now)
	var saved []savedKey
	if keep {
		for _, k := range m.Keys() {
			v, err := m.Get(k)
			if err != nil {
				continue
			}
			sk := savedKey{key: k, value: v}
			if ttl := m.TTL(k); ttl > 0 {
				sk.expires = now.Add(ttl)
			}
			saved = append(saved, sk)
		}
	}
	for c := range conns {
		_ = c.Close()
	}
	m.Close()
	n.mu.Lock()
	n.saved = saved
	n.mu.Unlock()
	n.trace.Add("node", n.ID, "crash (data kept: %v, %d keys)", keep, len(saved))
}

// Restart starts a crashed node again, with the data it kept.
func (n *Node) Restart() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.up {
		return
	}
	n.start(n.saved)
	n.trace.Add("node", n.ID, "restart with %d keys, run_id %s", len(n.saved), n.runID[:8])
	n.saved = nil
}

// FlushAll empties the running node, as FLUSHALL does.
func (n *Node) FlushAll() {
	n.mu.Lock()
	m := n.m
	n.mu.Unlock()
	if m != nil {
		m.FlushAll()
		n.trace.Add("node", n.ID, "flushall")
	}
}

// Step steps the node's clock by d (back when negative). Keys expire by
// the node's clock, as Redis's do: a step forward brings their expiry
// closer, a step back moves it away (miniredis keeps a TTL when its clock
// steps back, so the keys' TTLs are raised here by as much).
func (n *Node) Step(d time.Duration) {
	n.mu.Lock()
	n.clock.Step(d)
	m, now := n.m, n.clock.Now()
	n.mu.Unlock()
	if m == nil {
		return
	}
	if d < 0 {
		m.SetTime(now.Add(-d)) // expire what is due before the step
		for _, k := range m.Keys() {
			if ttl := m.TTL(k); ttl > 0 {
				m.SetTTL(k, ttl-d)
			}
		}
	}
	m.SetTime(now)
}

// SetRate makes the node's clock run at rate times the bubble's from now.
func (n *Node) SetRate(rate float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.clock.SetRate(rate)
}

// Now is the node's clock.
func (n *Node) Now() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.clock.Now()
}

// Offset is how far the node's clock is ahead of the bubble's.
func (n *Node) Offset() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Until(n.clock.Now())
}

// KeyValue is a key a node holds, with its time to live (0: none).
type KeyValue struct {
	Key, Value string
	TTL        time.Duration
}

// Keys returns the string keys the node holds now, under prefix, sorted;
// nil when it is down.
func (n *Node) Keys(prefix string) []KeyValue {
	n.mu.Lock()
	m, sc, now := n.m, n.sc, n.clock.Now()
	n.mu.Unlock()
	if m == nil {
		return nil
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	m.SetTime(now)
	var out []KeyValue
	for _, k := range m.Keys() {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		v, err := m.Get(k)
		if err != nil {
			continue
		}
		out = append(out, KeyValue{Key: k, Value: v, TTL: m.TTL(k)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Close stops the node for good.
func (n *Node) Close() {
	n.Crash(false)
}

// Clock is a node's wall clock: it runs at a rate of the bubble's clock
// and steps. It has a lock of its own: the node's shims read it while the
// nemesis steps it or sets its rate.
type Clock struct {
	mu    sync.Mutex
	since time.Time // the bubble's time of the last change
	at    time.Time // the node's time then
	rate  float64
}

// Reset puts the clock in step with the bubble's at now.
func (c *Clock) Reset(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since, c.at, c.rate = now, now, 1
}

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

func (c *Clock) now() time.Time {
	return c.at.Add(time.Duration(float64(time.Since(c.since)) * c.rate))
}

// Step moves the clock by d.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.since = c.now().Add(d), time.Now()
}

// SetRate sets the rate from now on.
func (c *Clock) SetRate(r float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.since = c.now(), time.Now()
	c.rate = r
}
