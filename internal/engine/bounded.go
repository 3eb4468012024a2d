package engine

import "sync"

// Bounded runs tasks on the goroutines that bring them, at most Max at
// once; the others wait their turn in order, and a goroutine whose task is
// done runs the next one waiting, or ends. Thousands of tasks falling due
// together then cost a bounded number of goroutines and connections.
type Bounded[T any] struct {
	Max int
	Run func(T)

	mu      sync.Mutex // lock order: a leaf (docs/internals.md)
	running int
	waiting []T
}

// Do runs x now, on the caller's goroutine, or queues it.
func (q *Bounded[T]) Do(x T) {
	q.mu.Lock()
	if q.running >= q.Max {
		q.waiting = append(q.waiting, x)
		q.mu.Unlock()
		return
	}
	q.running++
	q.mu.Unlock()
	for {
		q.Run(x)
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		var zero T
		x = q.waiting[0]
		q.waiting[0] = zero
		q.waiting = q.waiting[1:]
		q.mu.Unlock()
	}
}
