package script

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/engine"
)

// reply is a script's reply v as go-redis hands it over.
func reply(v any) *redis.Cmd {
	cmd := redis.NewCmd(context.Background())
	cmd.SetVal(v)
	return cmd
}

// TestRefusalsSayWhy: a refusal names what the node found: the kind of
// lock that holds a key taken another way, and a key full of shared Locks
// apart from one held by another token.
func TestRefusalsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       engine.Reply
		is      error
		message string
	}{
		{"an exclusive acquire, permits found", ReadAcquire(reply(int64(Mismatch))), engine.ErrInvalidArgument, "held by permits"},
		{"a shared acquire, MaxShared found", ReadAcquire(reply(int64(SharedFull))), ErrHeldByOther, "MaxShared"},
		{"a permit, an exclusive lock found", ReadPermit(reply([]any{int64(Mismatch), int64(0)})), engine.ErrInvalidArgument, "held by an exclusive lock"},
		{"a permit, shared locks found", ReadPermit(reply([]any{int64(Mismatch), int64(-1)})), engine.ErrInvalidArgument, "held by shared locks"},
		{"a permit, another count found", ReadPermit(reply([]any{int64(Mismatch), int64(5)})), engine.ErrInvalidArgument, "held by Permits(5)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.r.Status != engine.Refused {
				t.Fatalf("status %v, want a refusal: %v", tc.r.Status, tc.r.Err)
			}
			if !errors.Is(tc.r.Err, tc.is) {
				t.Errorf("%v does not match %v", tc.r.Err, tc.is)
			}
			if !strings.Contains(tc.r.Err.Error(), tc.message) {
				t.Errorf("%q does not say %q", tc.r.Err, tc.message)
			}
		})
	}
	if r := ReadAcquire(reply(int64(SharedFull))); r.Err != ErrMaxShared || errors.Is(r.Err, engine.ErrInvalidArgument) {
		t.Errorf("MaxShared reached is a busy key, not a mistake: %v", r.Err)
	}
	if r := ReadPermit(reply([]any{int64(Mismatch)})); r.Status != engine.Unknown {
		t.Errorf("a mismatch that names nothing found is an unexpected reply: %v", r)
	}
}

// TestHeldRefusals: an acquire's refusal because another Lock holds the
// key, or waits for it, says the key is contended (engine.Reply.Held),
// which shortens its round's wait; a refusal for any other reason, and an
// extension's, does not.
func TestHeldRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    engine.Reply
		held bool
	}{
		{"acquire, another holder", ReadAcquire(reply(int64(-500))), true},
		{"acquire, permits found", ReadAcquire(reply(int64(Mismatch))), true},
		{"acquire, MaxShared", ReadAcquire(reply(int64(SharedFull))), true},
		{"shared acquire, a writer waits", ReadAcquireShared(reply([]any{int64(WriterWaits), int64(200)})), true},
		{"fenced acquire, another holder", ReadAcquireFenced(reply([]any{int64(0), "7", "1", "2", int64(300)})), true},
		{"permit, another holder", ReadPermit(reply([]any{int64(0), int64(100)})), true},
		{"permit, another kind", ReadPermit(reply([]any{int64(Mismatch), int64(0)})), true},
		{"acquire, a later write", ReadAcquire(reply(int64(2))), false},
		{"acquire, the restart guard", ReadAcquire(reply(int64(3))), false},
		{"extend, another holder", ReadExtend(reply(int64(-1))), false},
	} {
		if tc.r.Status != engine.Refused || tc.r.Held != tc.held {
			t.Errorf("%s: status %v held %v, want a refusal held %v", tc.name, tc.r.Status, tc.r.Held, tc.held)
		}
	}
}
