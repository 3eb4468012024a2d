package redlock

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLateWriteRefusedWhateverCameBetween: a Lock's write held in the
// network lands on a node after the Lock's delete ran there, while other
// Locks, exclusive and shared, took the key, renewed it and let it go in
// between, all within the tombstone's 2 s, some of them for a short TTL
// that runs out on the way: every script that wrote the key meanwhile must
// have kept what refuses the late copy (docs/late-writes.md).
// The sequences are random, seeded per case; a failure names its seed and
// steps. The simulator found a shared Lock's acquire accepted on a node 1.3
// s after its Release, with exclusive and shared Locks of other Clients
// taking the key in between.
func TestLateWriteRefusedWhateverCameBetween(t *testing.T) {
	n := newScriptNode(t)
	run := n.subtests(t, "late")
	const cases = 400
	for seed := range uint64(cases) {
		run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 77))
			victim := "V."
			vShared := r.IntN(2) == 0
			var steps []string
			// The victim's delete: its write to this node never came, so
			// the delete finds whatever is there, nothing yet or, from the
			// first other step on, another holder's value.
			nsteps := 1 + r.IntN(8)
			delAt := 0
			if r.IntN(2) == 0 {
				delAt = r.IntN(nsteps)
			}
			victimDelete := func() {
				if vShared {
					steps = append(steps, fmt.Sprintf("V shared release: %d → %q", n.releaseShared(victim, 0, 1), n.get()))
				} else {
					steps = append(steps, fmt.Sprintf("V release: %d → %q", n.release(victim, 0, 1), n.get()))
				}
			}
			others := []string{"A.", "B.", "C."}
			shared := map[string]bool{}
			gen := map[string]int{}
			for _, o := range others {
				shared[o] = r.IntN(2) == 0
			}
			lapsed := false
			for step := range nsteps {
				if step == delAt {
					victimDelete()
				}
				o := others[r.IntN(len(others))]
				ttl := 1000 + r.IntN(20_000)
				if r.IntN(4) == 0 {
					ttl = 30 + r.IntN(90) // a holder that stops renewing expires soon
				}
				if !lapsed && r.IntN(6) == 0 {
					// Time passes, once per case and well within the
					// victim's 2 s: the short-lived values expire on the
					// node's clock with what they carry.
					lapsed = true
					time.Sleep(150 * time.Millisecond)
					steps = append(steps, fmt.Sprintf("150 ms pass → %q", n.get()))
				}
				var code int64
				op := ""
				switch k := r.IntN(3); {
				case k == 0 || gen[o] == 0: // an attempt: a new generation
					gen[o]++
					if shared[o] {
						op, code = "shared acquire", n.tryShared(o, gen[o], ttl)
					} else {
						op, code = "acquire", n.acquire(o, gen[o], ttl)
					}
				case k == 1:
					gen[o]++
					if shared[o] {
						op, code = "shared extend", n.extendShared(o, gen[o], ttl)
					} else {
						op, code = "extend", n.extend(o, gen[o], ttl)
					}
				default:
					if shared[o] {
						op, code = "shared release", n.releaseShared(o, 0, gen[o])
					} else {
						op, code = "release", n.release(o, 0, gen[o])
					}
					gen[o] = 0 // a new Lock of the same name: others' tombstones are not its
					o2 := o[:1] + strconv.Itoa(len(steps)) + "."
					for i, x := range others {
						if x == o {
							others[i] = o2
							shared[o2] = r.IntN(2) == 0
						}
					}
				}
				steps = append(steps, fmt.Sprintf("%s %s gen %d ttl %d: %d → %q", o, op, gen[o], ttl, code, n.get()))
			}
			// The victim's held write lands.
			var code int64
			if vShared {
				code = n.tryShared(victim, 1, 20_000)
			} else {
				code = n.acquire(victim, 1, 20_000)
			}
			v := n.get()
			steps = append(steps, fmt.Sprintf("V's late write: %d → %q", code, v))
			held := strings.HasPrefix(n.holder(), victim)
			if vShared {
				for _, e := range n.entries() {
					held = held || strings.HasPrefix(e, victim)
				}
			}
			if held {
				t.Fatalf("the late write of a deleted Lock took the key:\n  %s", strings.Join(steps, "\n  "))
			}
		})
	}
}

// TestLateWriteRefusedAfterCarrierExpires: a Lock's delete found another
// holder's value and left its refusal in it (lib.lua's carry_into), or the
// holder took the key over the Lock's tombstone and carries its entries;
// then the holder's value expired on the node's clock before the refusal's
// 2 s were up (the holder stopped renewing, or renewed for less), and the
// Lock's held write landed. The simulator found both (seed 6): a shared
// Lock's write landed 0.4 s after the exclusive holder its delete had found
// expired, and another 0.2 s after a holder that carried its tombstone
// extended for 115 ms and lapsed. The write must be refused until the
// refusal's own deadline, whatever the value carrying it did.
func TestLateWriteRefusedAfterCarrierExpires(t *testing.T) {
	n := newScriptNode(t)
	run := n.subtests(t, "carrier")
	const short = 150 // the carrier's life, in milliseconds
	lapse := func() { time.Sleep(short*time.Millisecond + 100*time.Millisecond) }
	holders := []struct {
		name string
		take func() // the carrier takes the key, for short ms
	}{
		{"exclusive", func() { require.EqualValues(n.t, 1, n.acquire(lockY, 1, short)) }},
		{"shared", func() { require.EqualValues(n.t, 1, n.tryShared(shareS, 1, short)) }},
		{"permit", func() { code, _ := n.acquirePermit("P.", 1, short, 2, 0); require.EqualValues(n.t, 1, code) }},
	}
	late := []struct {
		name  string
		del   func() int64 // the victim's delete
		write func() int64 // its held write
		held  func() bool
	}{
		{"exclusive", func() int64 { return n.release("V.", 0, 1) }, func() int64 { return n.acquire("V.", 1, 20_000) },
			func() bool { return strings.HasPrefix(n.holder(), "V.") }},
		{"shared", func() int64 { return n.releaseShared("V.", 0, 1) }, func() int64 { return n.tryShared("V.", 1, 20_000) },
			func() bool {
				return slices.ContainsFunc(n.entries(), func(e string) bool { return strings.HasPrefix(e, "V.") })
			}},
	}
	for _, h := range holders {
		for _, v := range late {
			run("delete found "+h.name+"/late "+v.name, func(t *testing.T) {
				h.take()
				v.del()
				lapse()
				code := v.write()
				require.False(t, v.held(), "the late write took the key (reply %d): %q", code, n.get())
			})
		}
	}
	for _, v := range late {
		run("carried by an extension/late "+v.name, func(t *testing.T) {
			v.del()
			require.EqualValues(t, 1, n.acquire(lockY, 1, 10_000))
			require.EqualValues(t, 1, n.extend(lockY, 2, short))
			lapse()
			code := v.write()
			require.False(t, v.held(), "the late write took the key (reply %d): %q", code, n.get())
		})
		run("carried by a restore/late "+v.name, func(t *testing.T) {
			v.del()
			require.EqualValues(t, 1, n.restore(lockY, 2, short)) // over the tombstone, which is absent
			lapse()
			code := v.write()
			require.False(t, v.held(), "the late write took the key (reply %d): %q", code, n.get())
		})
	}
}
