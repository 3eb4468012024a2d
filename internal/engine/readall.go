package engine

import (
	"context"
	"time"
)

// ReadAll runs read on every node of p in parallel, each under a context
// that ends after timeout or with ctx, and returns their results in node
// order once every node answered or that context ended; answered marks
// the nodes whose result came in time. A read still under way then goes on
// in the background, counted by p's Life, so that Close waits for it.
func ReadAll[T any](ctx context.Context, p *Set, timeout time.Duration, read func(ctx context.Context, node int) T) (out []T, answered []bool) {
	n := len(p.nodes)
	out, answered = make([]T, n), make([]bool, n)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		node int
		v    T
	}
	results := make(chan result, n)
	for i := range n {
		p.Life.Add(1)
		go func() {
			defer p.Life.End()
			results <- result{i, read(ctx, i)}
		}()
	}
	for range n {
		select {
		case r := <-results:
			out[r.node], answered[r.node] = r.v, true
		case <-ctx.Done():
			return out, answered
		}
	}
	return out, answered
}
