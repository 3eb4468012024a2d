package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/history"
)

// The nemesis: faults from a seeded source, one every Interval or so, each
// healed after a drawn duration. Node faults (stop, crash, restart-empty,
// flushall, clock) stay within a minority of the nodes at a time (a node
// in its restart guard counts toward it); faults of the network may act
// on any link, as they threaten no safety, only the time a call takes (far
// may move a majority of the nodes away at once: the TTLs too short for
// them are refused until they come back).

// Fault kinds.
const (
	FaultDelay        = "delay"         // chunks of a link delayed up to 300 ms, overtaking each other
	FaultBlackhole    = "blackhole"     // a client cut from a node: chunks wait for the heal
	FaultPartition    = "partition"     // some clients cut from a minority of nodes
	FaultDrop         = "drop"          // a node's replies on a link lost
	FaultHoldReset    = "hold-reset"    // the next command held back, its connection reset: go-redis sends it again
	FaultStop         = "stop"          // a node stops answering (SIGSTOP): every link to it cut
	FaultCrash        = "crash"         // a node crashes and restarts with its data
	FaultRestartEmpty = "restart-empty" // a node crashes and restarts without its data
	FaultFlush        = "flushall"      // a node loses its data, running
	FaultClock        = "clock"         // a node's clock runs 0.3-0.9% fast or slow, or steps 0.11-0.56 ms
	FaultPause        = "pause"         // a client process stopped 1.2-4 s: its writes wait in its sockets, its renewals get no answer, then all land
	FaultClockBeyond  = "clock-beyond"  // a node's clock steps forward 1-6 s: beyond the drift assumption
	FaultLateBeyond   = "late-beyond"   // a held command lands 3-5 s late, its connection reset: past its deadline
	FaultStopLong     = "stop-long"     // a node stops reading for 2.5-8 s, then reads all it was sent
	FaultHoldHandover = "hold-handover" // the next handover on a link held 0.2-3 s, its connection reset
	// FaultClockBackBeyond steps a node's clock back 6-10 s: beyond the
	// drift assumption, past which a write's deadline no longer bounds
	// when it lands (docs/late-writes.md).
	FaultClockBackBeyond = "clock-back-beyond"
	// FaultHoldQuick holds the next write of a quick round (the workload's
	// quickRun: Locks of a long TTL, each released at once) on a link, within
	// 5 s, for 5 to 60 ms, its connection reset: the copy lands after the Release's
	// delete on its node, most often before the write's deadline, where
	// only the refusal the delete left stops it.
	FaultHoldQuick = "hold-quick"
	// FaultFar moves a node away from the clients for 1 to 6 s: every
	// link to it gets a base latency of 20 to 80 ms (a chunk takes half
	// of it to all of it one way, a round trip up to 160 ms), then its
	// own again. The library must learn the jump (its deadlines for the
	// node were a near node's, the TTL's floor) and the return, and
	// refuse a TTL too short for every quorum the node's latency leaves.
	FaultFar = "far"
)

// Nemesis injects faults into a World.
type Nemesis struct {
	w      *World
	rng    *rand.Rand
	kinds  []string
	every  time.Duration
	guard  time.Duration
	limit  int // node faults at once
	counts map[string]int

	mu        sync.Mutex
	busyTill  []time.Time // per node: a node fault acts on it, or its guard runs, until then
	active    []int       // per node: faults acting on it or on any link to it now
	quietFrom []time.Time // per node: when the last of those ended
	// Per link (process, node): the faults acting on the link or on its
	// node, and when the last of those ended.
	linkActive map[[2]int]int
	linkQuiet  map[[2]int]time.Time
	// busyFrom is, per link (process, node; process -1: the node, every
	// link to it), when the faults acting on it now began, and busy the
	// intervals over which faults acted on a link or a node, ended so far
	// (Busy).
	busyFrom map[[2]int]time.Time
	busy     []history.NodeDown
	// down are the node faults that cut a node off (stop, crash,
	// restart-empty) and the links cut (blackhole, partition), to their heal:
	// history.Record.Down, so that the
	// late-write rule does not count time in which no delete could run.
	down  []history.NodeDown
	heals sync.WaitGroup
	// Schedule, when set, names the faults that act (nil: all); k is
	// the place of the fault being injected among the draws, acted
	// those that acted, and when.
	Schedule *Schedule
	k        int
	acted    []actedFault
	// handover picks what FaultHoldHandover holds; nil when the run has
	// none.
	handover *HandoverFault
}

type actedFault struct {
	k  int
	at time.Time
}

// HandoverFault picks what FaultHoldHandover holds: a handover's command,
// and then, from it, the leaving Lock's delete that follows it (a
// Release that hands its key over deletes its value where the handover
// got no answer, handover.go), which is held to land after it, as the
// waiter's own delete, not held, lands before both.
type HandoverFault struct {
	Handover      func([]byte) bool
	LeavingDelete func(handover []byte) func([]byte) bool
}

// cutOff records that node i was cut off from from until now, when its
// fault healed.
func (nm *Nemesis) cutOff(i int, from time.Time) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	now := time.Now()
	nm.down = append(nm.down, history.NodeDown{Node: i, Interval: history.Interval{From: from, To: now}, Healed: now})
}

// linkCut records that process proc was cut from node i from from until
// now, when its fault healed: a delete of its Locks waited for the heal.
func (nm *Nemesis) linkCut(proc, i int, from time.Time) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	now := time.Now()
	nm.down = append(nm.down, history.NodeDown{Node: i, Proc: ProcName(proc), Interval: history.Interval{From: from, To: now}, Healed: now})
}

// ProcName is how the record names process proc (history.Lock.Proc).
func ProcName(proc int) string { return fmt.Sprintf("c%d", proc) }

// Down returns the node faults healed so far that cut a node off.
func (nm *Nemesis) Down() []history.NodeDown {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return slices.Clone(nm.down)
}

// Busy returns the intervals over which any fault acted on a node, or on
// one process's link to it, those acting now until now: what may have
// slowed the node's replies to every process, or to that one
// (history.Record.Busy).
func (nm *Nemesis) Busy() []history.NodeDown {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := slices.Clone(nm.busy)
	now := time.Now()
	for k, a := range nm.linkActive {
		if a > 0 {
			out = append(out, busyOn(k, nm.busyFrom[k], now))
		}
	}
	slices.SortFunc(out, func(a, b history.NodeDown) int { // linkActive's order is the runtime's
		if c := a.From.Compare(b.From); c != 0 {
			return c
		}
		if a.Node != b.Node {
			return a.Node - b.Node
		}
		return strings.Compare(a.Proc, b.Proc)
	})
	return out
}

// busyOn is link k (process, node; process -1: every link to the node)
// busy from from to to.
func busyOn(k [2]int, from, to time.Time) history.NodeDown {
	d := history.NodeDown{Node: k[1], Interval: history.Interval{From: from, To: to}}
	if k[0] >= 0 {
		d.Proc = ProcName(k[0])
	}
	return d
}

// NewNemesis makes a nemesis of kinds over w, one fault every about
// every.
func NewNemesis(w *World, seed uint64, kinds []string, every, guard time.Duration) *Nemesis {
	n := len(w.Nodes)
	return &Nemesis{w: w, rng: rand.New(rand.NewPCG(seed, 1)), kinds: kinds, every: every, guard: guard,
		limit: (n - 1) / 2, counts: make(map[string]int), busyTill: make([]time.Time, n),
		active: make([]int, n), quietFrom: make([]time.Time, n), linkActive: make(map[[2]int]int), linkQuiet: make(map[[2]int]time.Time),
		busyFrom: make(map[[2]int]time.Time)}
}

// Run injects faults until stop, then heals them all: every node up, every
// link whole, every clock at rate 1 (its offset kept). When and of what
// kind each fault is comes from the nemesis's source; what it hits and for
// how long from one of the fault's own, so that a fault its Schedule
// leaves out moves no other.
func (nm *Nemesis) Run(stop <-chan struct{}) {
	draws := nm.rng
	for k := 0; ; k++ {
		if !sleep(stop, randDur(draws, nm.every/2, nm.every*3/2)) {
			break
		}
		kind := nm.kinds[draws.IntN(len(nm.kinds))]
		nm.rng = rand.New(rand.NewPCG(draws.Uint64(), uint64(k)))
		if nm.Schedule.acts(k) {
			nm.k = k
			nm.inject(kind)
		}
	}
	nm.heals.Wait()
}

// Acted returns the faults that acted, by their place among the draws,
// each with when it did after since.
func (nm *Nemesis) Acted(since time.Time) []Fault {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make([]Fault, len(nm.acted))
	for i, a := range nm.acted {
		out[i] = Fault{K: a.k, At: a.at.Sub(since)}
	}
	return out
}

// Counts returns how many faults of each kind were injected.
func (nm *Nemesis) Counts() map[string]int {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make(map[string]int, len(nm.counts))
	for k, v := range nm.counts {
		out[k] = v
	}
	return out
}

// Quiet reports whether node i and every link to it are free of faults
// now, and since when.
func (nm *Nemesis) Quiet(i int) (time.Time, bool) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	return nm.quietFrom[i], nm.active[i] == 0
}

// QuietLink reports whether process proc's link to node i, and the node,
// are free of faults now, and since when: what may delay that process's
// calls to the node, as a fault of another process's link does not.
func (nm *Nemesis) QuietLink(proc, i int) (time.Time, bool) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	k := [2]int{proc, i}
	node := [2]int{-1, i}
	return history.Latest(nm.linkQuiet[k], nm.linkQuiet[node]), nm.linkActive[k] == 0 && nm.linkActive[node] == 0
}

// begin and end bracket a fault on process proc's link to node i, or on
// the node itself (proc -1).
func (nm *Nemesis) begin(proc, i int) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	k := [2]int{proc, i}
	if nm.linkActive[k] == 0 {
		nm.busyFrom[k] = time.Now()
	}
	nm.active[i]++
	nm.linkActive[k]++
}

func (nm *Nemesis) end(proc, i int) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	now := time.Now()
	nm.active[i]--
	nm.quietFrom[i] = now
	k := [2]int{proc, i}
	nm.linkActive[k]--
	nm.linkQuiet[k] = now
	if nm.linkActive[k] == 0 {
		nm.busy = append(nm.busy, busyOn(k, nm.busyFrom[k], now))
	}
}

// pickNode picks a node that a node fault may take now (a minority at a
// time), busy for d from now, or -1.
func (nm *Nemesis) pickNode(d time.Duration) int {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	now := time.Now()
	busy := 0
	var free []int
	for i, t := range nm.busyTill {
		if t.After(now) {
			busy++
		} else {
			free = append(free, i)
		}
	}
	if busy >= nm.limit || len(free) == 0 {
		return -1
	}
	i := free[nm.rng.IntN(len(free))]
	nm.busyTill[i] = now.Add(d)
	return i
}

// after heals with fn after d, in the background.
func (nm *Nemesis) after(d time.Duration, fn func()) {
	nm.heals.Add(1)
	go func() {
		defer nm.heals.Done()
		time.Sleep(d)
		fn()
	}()
}

func (nm *Nemesis) count(kind string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	nm.counts[kind]++
	nm.acted = append(nm.acted, actedFault{nm.k, time.Now()})
}

// inject makes one fault of kind, if its targets are free.
func (nm *Nemesis) inject(kind string) {
	r, net, tr := nm.rng, nm.w.Net, nm.w.Trace
	procs := nm.w.Procs()
	if len(procs) == 0 {
		return
	}
	proc := procs[r.IntN(len(procs))]
	node := r.IntN(len(nm.w.Nodes))
	d := randDur(r, 20*time.Millisecond, 2*time.Second)
	switch kind {
	case FaultDelay:
		max := randDur(r, 5*time.Millisecond, 300*time.Millisecond)
		tr.Add("fault", node, "delay c%d up to %v for %v", proc, max, d)
		nm.begin(proc, node)
		net.Delay(proc, node, max)
		nm.after(d, func() { net.Delay(proc, node, 0); nm.after(max, func() { nm.end(proc, node) }) })
	case FaultBlackhole:
		tr.Add("fault", node, "blackhole c%d for %v", proc, d)
		nm.begin(proc, node)
		net.Blackhole(proc, node, true)
		from := time.Now()
		nm.after(d, func() { net.Blackhole(proc, node, false); nm.linkCut(proc, node, from); nm.end(proc, node) })
	case FaultPartition:
		// Some processes cut from a minority of the nodes.
		nodes := r.Perm(len(nm.w.Nodes))[:1+r.IntN(max(nm.limit, 1))]
		cut := slices.DeleteFunc(slices.Clone(procs), func(int) bool { return r.IntN(2) == 0 })
		if len(cut) == 0 {
			cut = []int{proc}
		}
		tr.Add("fault", -1, "partition: clients %v cut from nodes %v for %v", cut, nodes, d)
		for _, i := range nodes {
			for _, p := range cut {
				nm.begin(p, i)
				net.Blackhole(p, i, true)
			}
		}
		from := time.Now()
		nm.after(d, func() {
			for _, i := range nodes {
				for _, p := range cut {
					net.Blackhole(p, i, false)
					nm.linkCut(p, i, from)
					nm.end(p, i)
				}
			}
		})
	case FaultFar:
		// The node's links, every process's (those made while it acts
		// too: Network.Far is the node's), from now; the fault ends when
		// the last chunk sent before the heal has landed.
		d = randDur(r, time.Second, 6*time.Second)
		base := randDur(r, 20*time.Millisecond, 80*time.Millisecond)
		tr.Add("fault", node, "far: every link to n%d up to %v one way for %v", node, base, d)
		nm.begin(-1, node)
		net.Far(node, base, true)
		nm.after(d, func() { net.Far(node, base, false); nm.after(base, func() { nm.end(-1, node) }) })
	case FaultDrop:
		d = randDur(r, 5*time.Millisecond, 500*time.Millisecond)
		tr.Add("fault", node, "drop replies to c%d for %v", proc, d)
		nm.begin(proc, node)
		net.DropReplies(proc, node, true)
		nm.after(d, func() { net.DropReplies(proc, node, false); nm.end(proc, node) })
	case FaultHoldQuick:
		// The hold as FaultHoldReset's short one, for the next quick
		// round's write within 5 s (QuickWrite). The fault ends 200 ms
		// after the held copy landed, not at the window's end: the
		// value it may leave (a TTL of 10 s at least) must outlast the
		// fault and the residue rule's bound of quiet after it.
		hold := randDur(r, 5*time.Millisecond, 60*time.Millisecond)
		reset := randDur(r, 200*time.Microsecond, 3*time.Millisecond)
		tr.Add("fault", node, "%s: c%d's next quick write held %v, its connection reset after %v", kind, proc, hold, reset)
		nm.begin(proc, node)
		net.HoldNextMatching(proc, node, hold, reset, QuickWrite)
		armed := time.Now()
		var look func()
		look = func() {
			pending, _ := net.LinkPending(proc, node)
			switch {
			case !net.HoldArmed(proc, node) && pending == 0:
				nm.after(200*time.Millisecond, func() { nm.end(proc, node) })
			case time.Since(armed) >= 5*time.Second:
				net.HoldNext(proc, node, 0, 0)
				nm.after(hold+200*time.Millisecond, func() { nm.end(proc, node) })
			default:
				nm.after(50*time.Millisecond, look)
			}
		}
		nm.after(50*time.Millisecond, look)
	case FaultHoldReset, FaultLateBeyond, FaultHoldHandover:
		hold := randDur(r, 20*time.Millisecond, 1500*time.Millisecond)
		if kind == FaultHoldReset && r.IntN(2) == 0 {
			// Within a write's deadline (the node timeout, 10-50 ms,
			// and the clock reading's error): a copy that lands after
			// its Lock's delete, which a refusal must stop, as the
			// deadline does not yet.
			hold = randDur(r, 5*time.Millisecond, 60*time.Millisecond)
		}
		var match func([]byte) bool
		var then func([]byte) func([]byte) bool
		switch kind {
		case FaultLateBeyond:
			hold = randDur(r, 3*time.Second, 5*time.Second)
		case FaultHoldHandover:
			if nm.handover == nil {
				return
			}
			hold = randDur(r, 200*time.Millisecond, 3*time.Second)
			match, then = nm.handover.Handover, nm.handover.LeavingDelete
		}
		reset := randDur(r, 200*time.Microsecond, 3*time.Millisecond)
		// The next command on the link (or the next handover, and the
		// leaving Lock's delete after it), within a while: the fault lasts
		// until the held chunks have landed (Network.Pending says).
		tr.Add("fault", node, "%s: c%d's next command held %v, its connection reset after %v", kind, proc, hold, reset)
		nm.begin(proc, node)
		net.HoldNextThen(proc, node, hold, reset, match, then, hold+200*time.Millisecond)
		wait := 2 * time.Second
		nm.after(wait, func() {
			net.HoldNext(proc, node, 0, 0)
			nm.after(hold+200*time.Millisecond, func() { nm.end(proc, node) })
		})
	case FaultPause:
		// A process stopped (SIGSTOP) and continued: what it wrote
		// before sits in its sockets and goes out at once, what the nodes
		// answer waits for it, and nothing it does in between reaches a
		// node. In the bubble its goroutines run on: its calls go out
		// when it continues, past their deadlines, after the values its
		// Locks left expired (a renewal that never came back).
		d = randDur(r, 1200*time.Millisecond, 4*time.Second)
		tr.Add("fault", -1, "pause c%d for %v", proc, d)
		for i := range nm.w.Nodes {
			nm.begin(proc, i)
			net.Blackhole(proc, i, true)
		}
		from := time.Now()
		nm.after(d, func() {
			for i := range nm.w.Nodes {
				net.Blackhole(proc, i, false)
				nm.linkCut(proc, i, from)
				nm.end(proc, i)
			}
		})
	case FaultStopLong:
		nm.nodeFault(kind, randDur(r, 2500*time.Millisecond, 8*time.Second))
		return
	case FaultStop, FaultCrash, FaultRestartEmpty, FaultFlush, FaultClock, FaultClockBeyond, FaultClockBackBeyond:
		nm.nodeFault(kind, d)
		return
	}
	nm.count(kind)
}

// nodeFault makes a node fault of kind lasting d, on a node it may take.
func (nm *Nemesis) nodeFault(kind string, d time.Duration) {
	r, w, tr := nm.rng, nm.w, nm.w.Trace
	busy := d
	if kind == FaultRestartEmpty || kind == FaultFlush {
		busy = d + nm.guard // out of the quorums until its guard passes
	}
	if kind == FaultClockBeyond || kind == FaultClockBackBeyond {
		busy = 0
	}
	i := nm.pickNode(busy)
	if i < 0 {
		return
	}
	nd := w.Nodes[i]
	nm.count(kind)
	switch kind {
	case FaultStop, FaultStopLong:
		// The node's links hold what is written to it both ways, dials
		// too, and deliver all of it at the heal: a stopped redis-server
		// keeps its connections, and runs what sat in its sockets when it
		// continues.
		tr.Add("fault", i, "%s for %v", kind, d)
		nm.begin(-1, i)
		from := time.Now()
		for _, p := range w.Procs() {
			w.Net.Blackhole(p, i, true)
		}
		nm.after(d, func() {
			for p := range w.procsUpTo() {
				w.Net.Blackhole(p, i, false)
			}
			nm.cutOff(i, from)
			nm.end(-1, i)
		})
	case FaultCrash, FaultRestartEmpty:
		keep := kind == FaultCrash
		tr.Add("fault", i, "%s: down for %v", kind, d)
		nm.begin(-1, i)
		from := time.Now()
		nd.Crash(keep)
		nm.after(d, func() { nd.Restart(); nm.cutOff(i, from); nm.end(-1, i) })
	case FaultFlush:
		tr.Add("fault", i, "flushall")
		nm.begin(-1, i)
		nd.FlushAll()
		nm.end(-1, i)
	case FaultClock:
		if r.IntN(2) == 0 {
			// Up to 0.9 %: with two steps, 1.12 ms, a node's clock gains
			// on ours at most 0.9 % of a TTL and 1.12 ms, within the
			// allowance's 1 % and 2 ms, at its edge for the long TTLs.
			rate := 1 + randSign(r)*(0.003+r.Float64()*0.006)
			tr.Add("fault", i, "clock rate %.4f for %v", rate, d)
			nd.SetRate(rate)
			nm.after(d, func() { nd.SetRate(1) })
		} else {
			step := time.Duration(randSign(r)) * randDur(r, 110*time.Microsecond, 560*time.Microsecond)
			tr.Add("fault", i, "clock step %v for %v", step, d)
			nd.Step(step)
			nm.after(d, func() { nd.Step(-step) })
		}
	case FaultClockBeyond:
		step := randDur(r, time.Second, 6*time.Second)
		tr.Add("fault", i, "clock step %v (beyond the assumption)", step)
		nd.Step(step)
	case FaultClockBackBeyond:
		step := -randDur(r, 6*time.Second, 10*time.Second)
		tr.Add("fault", i, "clock step %v (beyond the assumption)", step)
		nd.Step(step)
	}
}

// procsUpTo returns every process index made so far: a heal reaches the
// links of processes made while the fault held too.
func (w *World) procsUpTo() func(func(int) bool) {
	w.mu.Lock()
	n := w.procs
	w.mu.Unlock()
	return func(yield func(int) bool) {
		for p := range n {
			if !yield(p) {
				return
			}
		}
	}
}

func randSign(r *rand.Rand) float64 {
	if r.IntN(2) == 0 {
		return -1
	}
	return 1
}
