// Package pingfloor measures the round-trip floor of a quorum lock: the least
// any Redlock implementation can do for one operation is one parallel PING
// fan-out that returns once a quorum has answered. The benchmarks and the
// peer comparison report every latency as a ratio to it, measured in the same
// run on the same nodes.
package pingfloor

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoQuorum means fewer than a quorum of nodes answered PING in time.
var ErrNoQuorum = errors.New("pingfloor: no quorum of PINGs")

// Floor fans PINGs out to a fixed set of nodes.
type Floor struct {
	nodes   []*redis.Client
	quorum  int
	timeout time.Duration
	wg      sync.WaitGroup // PINGs still running after their fan-out returned
}

// New returns a Floor over nodes whose fan-outs wait at most timeout, the
// way a lock's per-node deadline bounds an operation.
func New(nodes []*redis.Client, timeout time.Duration) *Floor {
	return &Floor{nodes: nodes, quorum: len(nodes)/2 + 1, timeout: timeout}
}

// FanOut sends PING to every node in parallel and returns once a quorum has
// answered, or ErrNoQuorum when that became impossible or the deadline
// passed. Late PINGs finish in the background, as a lock's late calls do;
// Wait waits for them.
func (f *Floor) FanOut(ctx context.Context) error {
	n := len(f.nodes)
	round, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.timeout)
	// The last PING out releases the round's timer, as redlock does.
	var users atomic.Int32
	users.Store(int32(n))
	leave := func() {
		if users.Add(-1) == 0 {
			cancel()
		}
	}
	out := make(chan error, n)
	for _, c := range f.nodes {
		f.wg.Go(func() {
			out <- c.Ping(round).Err()
			leave()
		})
	}
	ok, pending := 0, n
wait:
	for pending > 0 && ok < f.quorum && ok+pending >= f.quorum {
		select {
		case err := <-out:
			pending--
			if err == nil {
				ok++
			}
		case <-round.Done():
			// The deadline passed, or every PING returned and the last one
			// released the round: count what has arrived.
			for len(out) > 0 {
				if <-out == nil {
					ok++
				}
			}
			break wait
		}
	}
	if ok < f.quorum {
		return ErrNoQuorum
	}
	return nil
}

// Pair times two fan-outs in a row, the floor of one Acquire+Release; a
// fan-out without a quorum counts its full wait.
func (f *Floor) Pair(ctx context.Context) time.Duration {
	start := time.Now()
	_ = f.FanOut(ctx)
	_ = f.FanOut(ctx)
	return time.Since(start)
}

// Pairs returns n samples of Pair.
func (f *Floor) Pairs(ctx context.Context, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f.Pair(ctx)
	}
	return out
}

// Wait waits for the PINGs still running in the background.
func (f *Floor) Wait() { f.wg.Wait() }

// Bare is the floor with nothing around the round trips: each fan-out starts
// one goroutine per node that sends PING, and the caller waits on a channel
// for a quorum of replies. No context deadline, no timer, no WaitGroup. It is
// the least any quorum lock can spend, and the one the targets are set
// against; Floor, which also carries a per-node deadline, is reported beside
// it. Bare has no deadline, so give it only nodes that answer: in a scenario
// with slow or silent nodes, the fast ones, with the quorum of the whole set.
type Bare struct {
	nodes  []*redis.Client
	quorum int
}

// NewBare returns a Bare floor over nodes that needs quorum replies.
func NewBare(nodes []*redis.Client, quorum int) *Bare {
	return &Bare{nodes: nodes, quorum: quorum}
}

// FanOut sends PING to every node, each from a fresh goroutine, and returns
// once a quorum has answered, or ErrNoQuorum when that became impossible.
func (b *Bare) FanOut() error {
	out := make(chan error, len(b.nodes))
	for _, c := range b.nodes {
		go func() { out <- c.Ping(context.Background()).Err() }()
	}
	ok := 0
	for pending := len(b.nodes); pending > 0 && ok < b.quorum && ok+pending >= b.quorum; pending-- {
		if <-out == nil {
			ok++
		}
	}
	if ok < b.quorum {
		return ErrNoQuorum
	}
	return nil
}

// Pair times two bare fan-outs in a row, the bare floor of one
// Acquire+Release.
func (b *Bare) Pair() time.Duration {
	start := time.Now()
	_ = b.FanOut()
	_ = b.FanOut()
	return time.Since(start)
}
