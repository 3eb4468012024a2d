package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
)

// Hash is a digest of what the run recorded: every line of its trace
// (faults, the network's and the nodes' events, every call with its
// outcome and instant), the history the checker judged and its findings.
// Two runs with the same hash made the same calls at the same instants,
// with the same results: a replay that prints the seed's hash again ran
// the same interleaving.
func (r *Result) Hash() string {
	h := sha256.New()
	if r.Trace != nil {
		_, _ = r.Trace.WriteTo(h)
	}
	if rec := r.Record; rec != nil {
		hashJSON(h, "locks", rec.Locks)
		hashJSON(h, "writes", rec.Writes)
		hashJSON(h, "leases", rec.Leases)
		hashJSON(h, "observations", rec.Observations)
		hashJSON(h, "seen", rec.Seen)
		hashJSON(h, "leftovers", rec.Leftovers)
		hashJSON(h, "down", rec.Down)
		for _, p := range rec.Probes {
			fmt.Fprintf(h, "probe %s %v %d %d %v\n", p.Key, p.Shared, p.Permits, p.Took, p.Err)
		}
	}
	if v := r.Verdict; v != nil {
		for _, f := range v.Found {
			fmt.Fprintf(h, "found %s %s %d %s\n", f.Kind, f.Key, f.At.UnixNano(), f.Detail)
		}
	}
	for _, w := range r.Wrongs {
		fmt.Fprintf(h, "wrong %s\n", w)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func hashJSON(h hash.Hash, name string, v any) {
	_, _ = io.WriteString(h, name+"\n")
	if err := json.NewEncoder(h).Encode(v); err != nil {
		fmt.Fprintf(h, "%s: %v\n", name, err)
	}
}
