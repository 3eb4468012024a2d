package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// TestUnreachableCountsRefusals: a node that refused answered. A shared run
// refused because a writer waits (ErrWriterWaiting) is a conflict, exit
// status 75 with --wait 0, not a quorum of nodes unreachable (69): CI saw
// TestRunSharedExclusive get 69 for it.
func TestUnreachableCountsRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"writer waits", quorumErr(redlock.ErrWriterWaiting, redlock.ErrWriterWaiting, context.DeadlineExceeded), false},
		{"held", quorumErr(redlock.ErrHeldByOther, redlock.ErrMaxShared, context.DeadlineExceeded), false},
		{"restart guard", quorumErr(redlock.ErrRestartGuard, redlock.ErrKeyAbsent, context.DeadlineExceeded), false},
		{"silent", quorumErr(context.DeadlineExceeded, errors.New("connection refused"), redlock.ErrWriterWaiting), true},
		{"not a quorum error", errors.New("x"), false},
		{"wait ended", quorumErr(errCut, errCut, errCut), false},
	} {
		if got := unreachable(c.err, nil, 0); got != c.want {
			t.Errorf("%s: unreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	// A reply not awaited counts as a node down when the Client saw its
	// latest calls fail of themselves, not when they were merely late.
	refused := errors.New("dial tcp: connection refused")
	for _, c := range []struct {
		name   string
		status []redlock.NodeStatus
		want   bool
	}{
		{"dials refused", []redlock.NodeStatus{{}, {Index: 1, ConsecutiveFailures: 3, LastError: refused}, {Index: 2, ConsecutiveFailures: 1, LastError: refused}}, true},
		{"one dial refused", []redlock.NodeStatus{{}, {Index: 1, ConsecutiveFailures: 3, LastError: refused}, {Index: 2}}, false},
		{"late", []redlock.NodeStatus{{}, {Index: 1, ConsecutiveFailures: 1, LastError: redlock.ErrNoReply}, {Index: 2, ConsecutiveFailures: 2, LastError: context.DeadlineExceeded}}, false},
		{"failed, then on time", []redlock.NodeStatus{{}, {Index: 1, LastError: refused}, {Index: 2, LastError: refused}}, false},
	} {
		if got := unreachable(quorumErr(errCut, errCut, errCut), c.status, 0); got != c.want {
			t.Errorf("%s: unreachable = %v, want %v", c.name, got, c.want)
		}
	}
}

// errCut is a node's error in an attempt the wait's end cut short.
var errCut = fmt.Errorf("%w, the call ended first", redlock.ErrNotAwaited)

// TestAttemptLogVerdict: an acquire whose last attempt the wait's end cut
// short takes its verdict from the latest attempt that heard from the
// nodes: nodes silent through their node timeout make run exit 69 though
// the last attempt said nothing; an attempt refused by the holder, 75.
func TestAttemptLogVerdict(t *testing.T) {
	final := quorumErr(errCut, errCut, errCut)
	var a attemptLog
	if got := a.verdict(final); got != final || unreachable(got, nil, 0) {
		t.Errorf("no attempt heard: verdict %v", got)
	}
	silent := quorumErr(redlock.ErrHeldByOther, redlock.ErrNoReply, redlock.ErrNoReply)
	a.note(redlock.Event{Err: silent})
	a.note(redlock.Event{Err: final})
	if got := a.verdict(final); got != silent || !unreachable(got, nil, 0) {
		t.Errorf("after silent nodes: verdict %v", got)
	}
	held := quorumErr(redlock.ErrHeldByOther, redlock.ErrHeldByOther, errCut)
	a.note(redlock.Event{Err: held})
	if got := a.verdict(final); got != held || unreachable(got, nil, 0) {
		t.Errorf("after a refusal: verdict %v", got)
	}
	if other := errors.New("x"); a.verdict(other) != other {
		t.Error("an error not of a quorum was replaced")
	}
}

// quorumErr is an acquire's failure on "k" (quorum 2) whose node i failed
// with errs[i].
func quorumErr(errs ...error) error {
	e := &redlock.QuorumError{Op: "acquire", Key: "k", Quorum: 2}
	for i, err := range errs {
		e.Nodes = append(e.Nodes, &redlock.NodeError{Node: i, Err: err})
	}
	return e
}

// TestUnreachableFirstContact: nodes that never answered (no latency
// learned) and failed of nothing of their own are not unreachable when the
// wait was shorter than a first contact may take (nodes 400 ms away and
// --wait 300ms heard nothing); waited a first contact's bound, they are.
// A dial refused counts whatever the wait.
func TestUnreachableFirstContact(t *testing.T) {
	silent := quorumErr(redlock.ErrNoReply, redlock.ErrNoReply, redlock.ErrNoReply)
	never := []redlock.NodeStatus{{ConsecutiveFailures: 1, LastError: redlock.ErrNoReply}, {Index: 1, ConsecutiveFailures: 1, LastError: redlock.ErrNoReply}, {Index: 2}}
	if unreachable(silent, never, 300*time.Millisecond) {
		t.Error("nodes never heard from within a 300ms wait counted unreachable")
	}
	if !unreachable(silent, never, firstContact) {
		t.Error("nodes silent through a first contact's bound not counted unreachable")
	}
	answeredOnce := []redlock.NodeStatus{{Latency: time.Millisecond}, {Index: 1, Latency: time.Millisecond}, {Index: 2}}
	if !unreachable(silent, answeredOnce, 300*time.Millisecond) {
		t.Error("nodes that answered before and fell silent not counted unreachable")
	}
	refused := errors.New("dial tcp: connection refused")
	dials := []redlock.NodeStatus{{LastError: refused}, {Index: 1, LastError: refused}, {Index: 2}}
	if !unreachable(quorumErr(refused, refused, refused), dials, 0) {
		t.Error("refused dials not counted unreachable")
	}
}
