package main

import (
	"context"
	"errors"
	"testing"

	"github.com/redlock-go/redlock"
)

// TestUnreachableCountsRefusals: a node that refused answered. A shared run
// refused because a writer waits (ErrWriterWaiting) is a conflict, exit
// status 75 with --wait 0, not a quorum of nodes unreachable (69): CI saw
// TestRunSharedExclusive get 69 for it.
func TestUnreachableCountsRefusals(t *testing.T) {
	qe := func(errs ...error) error {
		e := &redlock.QuorumError{Op: "acquire", Key: "k", Quorum: 2}
		for i, err := range errs {
			e.Nodes = append(e.Nodes, &redlock.NodeError{Node: i, Err: err})
		}
		return e
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"writer waits", qe(redlock.ErrWriterWaiting, redlock.ErrWriterWaiting, context.DeadlineExceeded), false},
		{"held", qe(redlock.ErrHeldByOther, redlock.ErrMaxShared, context.DeadlineExceeded), false},
		{"restart guard", qe(redlock.ErrRestartGuard, redlock.ErrKeyAbsent, context.DeadlineExceeded), false},
		{"silent", qe(context.DeadlineExceeded, errors.New("connection refused"), redlock.ErrWriterWaiting), true},
		{"not a quorum error", errors.New("x"), false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("%s: unreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
