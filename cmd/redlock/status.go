package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock"
)

// nodeTimeout bounds each node's part of status and check.
const nodeTimeout = 2 * time.Second

// holderChars is how much of a holder's token status shows: enough to tell
// holders apart, too little to release someone else's lock with.
const holderChars = 8

// status's exit statuses for a verdict other than held (0) or unknown
// (exitUnavailable): as an init script's status action says "not running"
// (LSB's 3), and distinct from 1, which any failure returns.
const (
	exitFree  = 3 // no node that answered holds the key, and a quorum answered
	exitSplit = 4 // some nodes hold it, no quorum agrees on a holder
)

// Verdicts of status.
const (
	verdictHeld    = "held"    // a quorum holds one token
	verdictShared  = "shared"  // a quorum holds the key for one or more shared locks
	verdictPermits = "permits" // a quorum holds the key for one or more permits
	verdictFree    = "free"    // no reachable node holds it, and a quorum answered
	verdictSplit   = "split"   // some nodes hold it, no quorum agrees on a holder
	verdictUnknown = "unknown" // fewer than a quorum answered
)

// keyState is what one node holds for the key.
type keyState struct {
	Node      int    `json:"node"`
	Addr      string `json:"addr"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	Held      bool   `json:"held"`
	// Holder is the start of the holder's token; never the whole value.
	Holder string `json:"holder,omitempty"`
	// Metadata is what the holder stored with it (redlock.WithMetadata).
	Metadata string `json:"metadata,omitempty"`
	// TTLMillis is the key's remaining time to live; -1 when it has none
	// (not written by the library), absent when the key is.
	TTLMillis *int64 `json:"ttl_ms,omitempty"`
	// Fence is the fence counter, absent when the node has none.
	Fence *uint64 `json:"fence,omitempty"`
	// Shared are the shared locks holding the key on this node, when it
	// is taken shared: Held then has no Holder, and TTLMillis is the
	// longest of theirs.
	Shared []sharedHolder `json:"shared,omitempty"`
	// Permits are the permits holding the key on this node, when it is
	// taken by permits, and Count the n they were taken with: Held then
	// has no Holder, and TTLMillis is the longest of theirs.
	Permits []permitHolder `json:"permits,omitempty"`
	Count   int            `json:"count,omitempty"`

	token string // the exclusive holder's token prefix, to compare holders
}

// sharedHolder is one shared lock holding the key.
type sharedHolder struct {
	Holder   string `json:"holder"`             // the start of its token, as keyState.Holder
	Metadata string `json:"metadata,omitempty"` // as keyState.Metadata
	// TTLMillis is its remaining time to live: on the node, or in
	// keyStatus.SharedHolders the time left before fewer than a quorum
	// of nodes hold it.
	TTLMillis int64 `json:"ttl_ms"`
	// HeldOn is how many nodes hold it, in keyStatus.SharedHolders.
	HeldOn int `json:"held_on,omitempty"`
}

// permitHolder is one permit holding the key.
type permitHolder struct {
	Slot     int    `json:"slot"`               // its slot, 0 to n-1
	Holder   string `json:"holder"`             // the start of its token, as keyState.Holder
	Metadata string `json:"metadata,omitempty"` // as keyState.Metadata
	// TTLMillis is its remaining time to live: on the node, or in
	// keyStatus.PermitHolders the time left before fewer than a quorum
	// of nodes hold it.
	TTLMillis int64 `json:"ttl_ms"`
	// HeldOn is how many nodes hold it in its slot, in
	// keyStatus.PermitHolders.
	HeldOn int `json:"held_on,omitempty"`
}

// keyStatus is status's report.
type keyStatus struct {
	Key     string     `json:"key"`
	Quorum  int        `json:"quorum"`
	Nodes   []keyState `json:"nodes"`
	Verdict string     `json:"verdict"`
	// Holder and HeldOn are the quorum's holder and how many nodes hold it,
	// with verdict held, and Metadata what that holder stored.
	Holder   string `json:"holder,omitempty"`
	HeldOn   int    `json:"held_on,omitempty"`
	Metadata string `json:"metadata,omitempty"`
	// Term is, with verdict held, the highest fence counter of the nodes
	// that hold the quorum's holder: a fenced holder's fence, which for
	// redlock elect's leader is its term (REDLOCK_TERM). The counter is
	// committed only on nodes that hold the holder's value, so no later
	// holder's fence is among them; 0 when none has a counter.
	Term uint64 `json:"term,omitempty"`
	// Shared is how many shared locks a quorum holds the key for, and
	// SharedHolders are those locks, longest-lived first, with verdict
	// shared.
	Shared        int            `json:"shared,omitempty"`
	SharedHolders []sharedHolder `json:"shared_holders,omitempty"`
	// Permits is how many permits a quorum holds the key for, Count the n
	// they were taken with, and PermitHolders those permits by slot, with
	// verdict permits.
	Permits       int            `json:"permits,omitempty"`
	Count         int            `json:"count,omitempty"`
	PermitHolders []permitHolder `json:"permit_holders,omitempty"`
}

func statusCmd(args []string) error {
	fs := flag.NewFlagSet("redlock status", flag.ContinueOnError)
	var nf nodeFlag
	nf.register(fs)
	var kf keysFlag
	fs.Var(&kf, "key", "the lock's `key` (required; one key)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, "--key K [--nodes NODE,...] [--json]", "", args); err != nil {
		return err
	}
	key, err := kf.one(fs)
	if err != nil {
		return err
	}
	if key == "" {
		return usageError(fs, "--key is required")
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	nodes, err := nf.open()
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	warnFewNodes("redlock status", len(nodes))

	st := readStatus(context.Background(), nodes, key)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else {
		printStatus(st)
	}
	switch st.Verdict {
	case verdictUnknown:
		return exit(exitUnavailable, "only %d of %d nodes answered, fewer than the quorum of %d", st.reachable(), len(st.Nodes), st.Quorum)
	case verdictFree:
		return &exitError{code: exitFree} // the verdict, on stdout, says it
	case verdictSplit:
		return &exitError{code: exitSplit}
	}
	return nil
}

// readStatus reads the key on every node through the library's Inspect, in
// parallel, without taking it.
func readStatus(ctx context.Context, nodes []node, key string) *keyStatus {
	locks, err := redlock.New(clients(nodes), redlock.WithFencing())
	var ks redlock.KeyState
	if err == nil {
		ks, err = locks.Inspect(ctx, key)
		cctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
		_ = locks.Close(cctx)
		cancel()
	}
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.addr
	}
	return buildStatus(key, addrs, ks, err)
}

// buildStatus is status's report of what Inspect read (ks, or err) from
// the nodes at addrs.
func buildStatus(key string, addrs []string, ks redlock.KeyState, err error) *keyStatus {
	st := &keyStatus{Key: key, Quorum: len(addrs)/2 + 1, Nodes: make([]keyState, len(addrs))}
	for i, addr := range addrs {
		s := keyState{Node: i, Addr: addr}
		switch {
		case err != nil:
			s.Error = err.Error()
		case ks.Nodes[i].Err != nil:
			s.Error = ks.Nodes[i].Err.Error()
		default:
			ns := ks.Nodes[i]
			s.Reachable = true
			if ns.Held {
				s.Held = true
				if len(ns.Shared) == 0 && len(ns.Permits) == 0 {
					s.Holder, s.token, s.Metadata = ns.Holder, ns.Holder, ns.Metadata
				}
				for _, h := range ns.Shared {
					s.Shared = append(s.Shared, sharedHolder{Holder: h.Holder, Metadata: h.Metadata, TTLMillis: h.TTL.Milliseconds()})
				}
				for _, h := range ns.Permits {
					s.Permits = append(s.Permits, permitHolder{Slot: h.Slot, Holder: h.Holder, Metadata: h.Metadata, TTLMillis: h.TTL.Milliseconds()})
				}
				if len(ns.Permits) > 0 {
					s.Count = ns.Count
				}
				ms := ns.TTL.Milliseconds()
				if ns.TTL < 0 {
					ms = -1
				}
				s.TTLMillis = &ms
			}
			if ns.Fence > 0 {
				f := ns.Fence
				s.Fence = &f
			}
		}
		st.Nodes[i] = s
	}
	st.judge()
	return st
}

func shortHolder(token string) string {
	if len(token) > holderChars {
		return token[:holderChars]
	}
	return token
}

// permitOn names a permit on a node: its count, slot and holder. A permit
// holds when a quorum of nodes gave its lock the same slot, of one count.
type permitOn struct {
	count, slot int
	holder      string
}

// judge sets the verdict: held when a quorum of nodes holds one token,
// shared when a quorum holds the key for one shared lock or more, permits
// when a quorum holds it for one permit or more.
func (st *keyStatus) judge() {
	count := map[string]int{}
	meta := map[string]string{}       // a holder's metadata, by the start of its token
	shares := map[string][]int64{}    // a shared lock's TTL on each node that holds it
	permits := map[permitOn][]int64{} // a permit's TTL on each node that holds it
	holding := 0
	for _, n := range st.Nodes {
		if !n.Held {
			continue
		}
		holding++
		if len(n.Shared) == 0 && len(n.Permits) == 0 {
			count[n.token]++
			meta[n.token] = n.Metadata
		}
		for _, h := range n.Shared {
			shares[h.Holder] = append(shares[h.Holder], h.TTLMillis)
			meta[h.Holder] = h.Metadata
		}
		for _, h := range n.Permits {
			meta[h.Holder] = h.Metadata
			p := permitOn{count: n.Count, slot: h.Slot, holder: h.Holder}
			permits[p] = append(permits[p], h.TTLMillis)
		}
	}
	for token, c := range count {
		if c >= st.Quorum {
			st.Verdict, st.Holder, st.HeldOn, st.Metadata = verdictHeld, shortHolder(token), c, meta[token]
			st.Term = st.termOf(token)
			return
		}
	}
	for holder, ttls := range shares {
		if len(ttls) >= st.Quorum {
			// Once the quorum-th longest runs out, fewer than a quorum hold it.
			slices.Sort(ttls)
			st.SharedHolders = append(st.SharedHolders, sharedHolder{Holder: holder, Metadata: meta[holder], TTLMillis: ttls[len(ttls)-st.Quorum], HeldOn: len(ttls)})
		}
	}
	if len(st.SharedHolders) > 0 {
		slices.SortFunc(st.SharedHolders, func(a, b sharedHolder) int {
			return cmp.Or(cmp.Compare(b.TTLMillis, a.TTLMillis), strings.Compare(a.Holder, b.Holder))
		})
		st.Verdict, st.Shared = verdictShared, len(st.SharedHolders)
		return
	}
	for p, ttls := range permits {
		if len(ttls) >= st.Quorum {
			// Two permits held by quorums share a node, which holds one
			// count: every permit found here has the same.
			slices.Sort(ttls)
			st.Count = p.count
			st.PermitHolders = append(st.PermitHolders, permitHolder{Slot: p.slot, Holder: p.holder, Metadata: meta[p.holder], TTLMillis: ttls[len(ttls)-st.Quorum], HeldOn: len(ttls)})
		}
	}
	if len(st.PermitHolders) > 0 {
		slices.SortFunc(st.PermitHolders, func(a, b permitHolder) int {
			return cmp.Or(cmp.Compare(a.Slot, b.Slot), strings.Compare(a.Holder, b.Holder))
		})
		st.Verdict, st.Permits = verdictPermits, len(st.PermitHolders)
		return
	}
	switch {
	case st.reachable() < st.Quorum:
		st.Verdict = verdictUnknown
	case holding == 0:
		st.Verdict = verdictFree
	default:
		st.Verdict = verdictSplit
	}
}

// termOf is the highest fence counter of the nodes that hold token: those
// whose commit of the holder's fence is late show a lower one, or none.
func (st *keyStatus) termOf(token string) uint64 {
	var term uint64
	for _, n := range st.Nodes {
		if n.Held && n.token == token && len(n.Shared) == 0 && len(n.Permits) == 0 && n.Fence != nil {
			term = max(term, *n.Fence)
		}
	}
	return term
}

func (st *keyStatus) reachable() int {
	r := 0
	for _, n := range st.Nodes {
		if n.Reachable {
			r++
		}
	}
	return r
}

func printStatus(st *keyStatus) {
	fmt.Printf("key %q on %d nodes (quorum %d)\n", st.Key, len(st.Nodes), st.Quorum)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "node\taddress\tkey\tholder\tttl\tfence")
	var notes []string // the errors, below the table: a cell holds a word
	for _, n := range st.Nodes {
		state, holder, ttl, fence := "free", "-", "-", "-"
		switch {
		case !n.Reachable:
			state = "unreachable"
		case n.Error != "":
			state = "error"
		case len(n.Shared) > 0:
			state, holder = "shared", plural(len(n.Shared), "lock")
		case len(n.Permits) > 0:
			state, holder = "permits", fmt.Sprintf("%d of %d", len(n.Permits), n.Count)
		case n.Held:
			state, holder = "held", n.Holder+"…"
		}
		if n.Error != "" {
			notes = append(notes, fmt.Sprintf("node %d (%s): %s: %s", n.Node, n.Addr, state, oneLine(n.Error)))
		}
		if n.TTLMillis != nil {
			ttl = "no expiry"
			if *n.TTLMillis >= 0 {
				ttl = (time.Duration(*n.TTLMillis) * time.Millisecond).String()
			}
		}
		if n.Fence != nil {
			fence = strconv.FormatUint(*n.Fence, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", n.Node, cell(n.Addr), state, cell(holder), ttl, fence)
	}
	_ = tw.Flush()
	for _, note := range notes {
		fmt.Println(note)
	}
	switch st.Verdict {
	case verdictHeld:
		fmt.Printf("verdict: held by a quorum (%s… on %d of %d nodes)\n", st.Holder, st.HeldOn, len(st.Nodes))
		if st.Metadata != "" {
			fmt.Printf("holder metadata: %s\n", st.Metadata)
		}
		if st.Term > 0 {
			// A line of its own, after the lines that were there before
			// it: the leader's term (redlock elect), or a fenced
			// holder's fence.
			fmt.Printf("term: %d\n", st.Term)
		}
	case verdictShared:
		for _, h := range st.SharedHolders {
			fmt.Printf("shared by %s… for %v on %d of %d nodes%s\n", h.Holder, time.Duration(h.TTLMillis)*time.Millisecond, h.HeldOn, len(st.Nodes), metaNote(h.Metadata))
		}
		fmt.Printf("verdict: shared by a quorum (%s)\n", plural(st.Shared, "lock"))
	case verdictPermits:
		for _, h := range st.PermitHolders {
			fmt.Printf("slot %d of %d held by %s… for %v on %d of %d nodes%s\n", h.Slot, st.Count, h.Holder, time.Duration(h.TTLMillis)*time.Millisecond, h.HeldOn, len(st.Nodes), metaNote(h.Metadata))
		}
		fmt.Printf("verdict: permits held by a quorum (%d of %d)\n", st.Permits, st.Count)
	case verdictFree:
		fmt.Println("verdict: free")
	case verdictSplit:
		fmt.Println("verdict: split (held on some nodes, by no quorum: an acquire in progress, a lock expiring, or leftovers that expire with their TTL)")
	default:
		fmt.Printf("verdict: unknown (only %d of %d nodes answered, fewer than the quorum of %d)\n", st.reachable(), len(st.Nodes), st.Quorum)
	}
}

// metaNote is what a holder's line adds for its metadata: nothing when it
// has none, so that the line reads as it did before holder metadata.
func metaNote(md string) string {
	if md == "" {
		return ""
	}
	return ", metadata: " + md
}

// cellChars bounds a table cell that a node's answer fills.
const cellChars = 40

// cell makes s fit a table cell: one line, no tab, at most cellChars.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > cellChars {
		s = string(r[:cellChars-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}

// plural is "1 lock", "2 locks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
