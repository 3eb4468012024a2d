package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Trace is what happened in a run, in order: faults, the network's and
// the nodes' notable events, and the workload's calls, each with the
// bubble's time. A report prints the lines around a violation.
type Trace struct {
	mu     sync.Mutex
	start  time.Time
	events []Event
}

// Event is one line of a Trace. Node is -1 for an event of no node; Keys
// are the lock keys it concerns, nil for one that concerns every key.
type Event struct {
	At   time.Time
	Kind string // "fault", "net", "node", "op", "check"
	Node int
	Keys []string
	Text string
}

// NewTrace starts a trace at the bubble's now.
func NewTrace() *Trace { return &Trace{start: time.Now()} }

// Add adds an event of kind about node (-1: none), concerning every key.
func (t *Trace) Add(kind string, node int, format string, args ...any) {
	t.AddKeys(kind, node, nil, format, args...)
}

// AddKeys adds an event about keys.
func (t *Trace) AddKeys(kind string, node int, keys []string, format string, args ...any) {
	if t == nil {
		return
	}
	e := Event{At: time.Now(), Kind: kind, Node: node, Keys: keys, Text: fmt.Sprintf(format, args...)}
	t.mu.Lock()
	t.events = append(t.events, e)
	t.mu.Unlock()
}

// Len is how many events the trace holds.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.events)
}

// Count returns how many events of kind the trace holds whose text starts
// with prefix.
func (t *Trace) Count(kind, prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.events {
		if e.Kind == kind && strings.HasPrefix(e.Text, prefix) {
			n++
		}
	}
	return n
}

// Around returns the events from before until after at that concern key
// (every key's too), at most max of them, the latest kept.
func (t *Trace) Around(key string, at time.Time, before, after time.Duration, max int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, e := range t.events {
		if e.At.Before(at.Add(-before)) || e.At.After(at.Add(after)) {
			continue
		}
		if e.Keys != nil && !contains(e.Keys, key) {
			continue
		}
		lines = append(lines, t.line(e))
	}
	if len(lines) > max {
		lines = append([]string{fmt.Sprintf("... %d earlier lines", len(lines)-max)}, lines[len(lines)-max:]...)
	}
	return strings.Join(lines, "\n")
}

func (t *Trace) line(e Event) string {
	node := "  "
	if e.Node >= 0 {
		node = fmt.Sprintf("n%d", e.Node)
	}
	return fmt.Sprintf("%12s %-5s %s %s", Since(t.start, e.At), e.Kind, node, e.Text)
}

// Since formats at as the simulated time since start, in seconds.
func Since(start, at time.Time) string {
	return fmt.Sprintf("%.6fs", at.Sub(start).Seconds())
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// WriteTo writes every event, one a line.
func (t *Trace) WriteTo(w io.Writer) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, e := range t.events {
		k, err := fmt.Fprintln(w, t.line(e))
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
