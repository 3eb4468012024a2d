package script

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock/internal/engine"
)

// TookOver is the acquire scripts' confirmation whose value keeps what it
// took over: the chain of a pending owner's takeover (take.lua).
const TookOver = 6

// ReadAcquire reads acquire.lua's reply: a refusal carries the other
// holder's remaining TTL in milliseconds in val (-1 when unknown).
func ReadAcquire(cmd *redis.Cmd) engine.Reply {
	v, r, done := readInt(cmd)
	switch {
	case done:
		return r
	case v == TookOver:
		return engine.Reply{Status: engine.OK, Chained: true}
	case v <= 0:
		return engine.Reply{Status: engine.Refused, Held: true, Val: -v - 1, Err: ErrHeldByOther}
	case v == 2:
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrLater}
	case v == 3:
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrRestartGuard}
	case v == Mismatch:
		return engine.Reply{Status: engine.Refused, Held: true, Val: -1, Err: ErrHeldByPermits}
	case v == SharedFull:
		return engine.Reply{Status: engine.Refused, Held: true, Val: -1, Err: ErrMaxShared}
	}
	return engine.Reply{Err: Unexpected(v)}
}

// WriterWaits is the shared acquire's refusal while an exclusive Lock
// waits for the key: {WriterWaits, ms}, ms how long the waiter's entry in
// the waiting room lives (scripts/acquire_shared.lua).
const WriterWaits = 9

// ReadAcquireShared reads acquire_shared.lua's reply: what ReadAcquire
// reads, or a refusal because an exclusive Lock waits, whose val is how
// long the waiter's announcement lives, in milliseconds.
func ReadAcquireShared(cmd *redis.Cmd) engine.Reply {
	if v, err := cmd.Slice(); err == nil {
		if len(v) == 2 {
			code, ok1 := v[0].(int64)
			ms, ok2 := v[1].(int64)
			if ok1 && ok2 && code == WriterWaits && ms >= 0 {
				return engine.Reply{Status: engine.Refused, Held: true, Val: ms, Err: ErrWriterWaiting}
			}
		}
		return engine.Reply{Err: Unexpected(v)}
	}
	return ReadAcquire(cmd)
}

// ReadAnnounce reads announce.lua's reply: 1 when every key's waiting room
// took it; 0 when one could not be used (an ACL that does not cover it, a
// Cluster node where it lies in another slot), a refusal that changes
// nothing.
func ReadAnnounce(cmd *redis.Cmd) engine.Reply {
	return readCode(cmd, announceRefusals)
}

// Mismatch is the acquire scripts' refusal of a key that another kind of
// Lock holds: permits, or for permits an exclusive or shared Lock, or
// permits of another count.
const Mismatch = 7

// SharedFull is the shared acquire's refusal of a key that the most shared
// Locks a node takes (MaxShared) hold: a shared Acquire waits, as for a
// held key.
const SharedFull = 8

// ReadPermit reads acquire_permit.lua's reply ({code, ...}, or the restart
// guard's 3): a confirmation's val is the slot the node gave, a refusal's
// the time until the first permit there expires, in milliseconds (-1 when
// unknown).
func ReadPermit(cmd *redis.Cmd) engine.Reply {
	if v, err := cmd.Int64(); err == nil && v == 3 {
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrRestartGuard}
	}
	v, err := cmd.Slice()
	if err != nil {
		return engine.Reply{Err: err}
	}
	if len(v) == 0 {
		return engine.Reply{Err: Unexpected(v)}
	}
	code, ok := v[0].(int64)
	var val int64 = -1
	if len(v) > 1 {
		val, _ = v[1].(int64)
	}
	switch {
	case !ok:
	case code == 1 && len(v) == 2 && val >= 0:
		return engine.Reply{Status: engine.OK, Val: val}
	case code == 0:
		return engine.Reply{Status: engine.Refused, Held: true, Val: val, Err: ErrHeldByOther}
	case code == 2:
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrLater}
	case code == Mismatch && len(v) == 2:
		return engine.Reply{Status: engine.Refused, Held: true, Val: -1, Err: heldByOtherKind(val)}
	}
	return engine.Reply{Err: Unexpected(v)}
}

// heldByOtherKind is a permit's refusal of a key that found says holds it:
// 0 an exclusive Lock, -1 shared Locks, m permits of count m.
func heldByOtherKind(found int64) error {
	switch {
	case found == 0:
		return ErrHeldExclusive
	case found < 0:
		return ErrHeldShared
	}
	return fmt.Errorf("%w: the key is held by Permits(%d), permits of another count", engine.ErrInvalidArgument, found)
}

// readCode reads a script's integer reply: 1 is a confirmation, a code in
// refusals a definite refusal with its cause; an error, or any other code,
// is an unknown outcome.
func readCode(cmd *redis.Cmd, refusals map[int64]error) engine.Reply {
	v, r, done := readInt(cmd)
	switch {
	case done:
		return r
	case refusals[v] != nil:
		return engine.Reply{Status: engine.Refused, Err: refusals[v]}
	}
	return engine.Reply{Err: Unexpected(v)}
}

// readInt reads a script's integer reply. An error, or a confirmation (1),
// is the whole reply (done); any other code v is the caller's to read.
func readInt(cmd *redis.Cmd) (v int64, r engine.Reply, done bool) {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return v, engine.Reply{Err: err}, true
	case v == 1:
		return v, engine.Reply{Status: engine.OK}, true
	}
	return v, engine.Reply{}, false
}

// ReadAcquireFenced reads {code, counter, seconds, microseconds[, pttl]}: a
// confirmation's val is the node's fence reading (see fenceReading), a
// refusal's the other holder's remaining TTL as for readAcquire.
func ReadAcquireFenced(cmd *redis.Cmd) engine.Reply {
	v, err := cmd.Slice()
	if err != nil {
		return engine.Reply{Err: err}
	}
	if len(v) != 4 && len(v) != 5 {
		return engine.Reply{Err: Unexpected(v)}
	}
	code, ok := v[0].(int64)
	counter, err1 := ParseInt(v[1])
	sec, err2 := ParseInt(v[2])
	usec, err3 := ParseInt(v[3])
	if !ok || err1 != nil || err2 != nil || err3 != nil || usec >= 1e6 {
		return engine.Reply{Err: Unexpected(v)}
	}
	r := FenceReading(counter, sec, usec)
	switch code {
	case 1, TookOver:
		return engine.Reply{Status: engine.OK, Val: r, Chained: code == TookOver}
	case 0:
		pttl := int64(-1)
		if len(v) == 5 {
			if p, ok := v[4].(int64); ok {
				pttl = p
			}
		}
		return engine.Reply{Status: engine.Refused, Held: true, Val: pttl, Err: ErrHeldByOther}
	case 2:
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrLater}
	case 3:
		return engine.Reply{Status: engine.Refused, Val: -1, Err: ErrRestartGuard}
	case Mismatch:
		return engine.Reply{Status: engine.Refused, Held: true, Val: -1, Err: ErrHeldByPermits}
	}
	return engine.Reply{Err: Unexpected(v)}
}

// ParseInt reads a non-negative integer that a script returned as a
// string (a stored counter, TIME's fields) or as an integer.
func ParseInt(x any) (int64, error) {
	switch x := x.(type) {
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err == nil && n < 0 {
			err = Unexpected(x)
		}
		return n, err
	case int64:
		if x < 0 {
			return 0, Unexpected(x)
		}
		return x, nil
	}
	return 0, Unexpected(x)
}

func ReadFenceCommit(cmd *redis.Cmd) engine.Reply { return readCode(cmd, commitRefusals) }

func ReadExtend(cmd *redis.Cmd) engine.Reply { return readCode(cmd, extendRefusals) }

func ReadRestore(cmd *redis.Cmd) engine.Reply { return readCode(cmd, restoreRefusals) }

func ReadDelete(cmd *redis.Cmd) engine.Reply { return readCode(cmd, deleteRefusals) }

// HandedAway reports whether a handover reply says the leaving holder's
// value was there: it is gone now.
func HandedAway(r engine.Reply) bool {
	return r.Val == HandedOver || r.Val == ReleasedHandover || r.Val == HandedInStreak
}

// ReadHandover reads handover.lua's reply as the waiter's acquire: the key
// is the waiter's on a node whose reply is OK. val keeps the code, which
// tells the leaving holder where its value is gone (handedOver and
// releasedHandover).
func ReadHandover(cmd *redis.Cmd) engine.Reply {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return engine.Reply{Err: err}
	case v == 1 || v == HandedOver || v == HandedInStreak:
		return engine.Reply{Status: engine.OK, Val: v}
	case v == TookOver:
		return engine.Reply{Status: engine.OK, Val: 1, Chained: true}
	case v == ReleasedHandover:
		return engine.Reply{Status: engine.Refused, Val: v, Err: ErrHeldByOther}
	case v == 2:
		return engine.Reply{Status: engine.Refused, Val: v, Err: ErrLater}
	case v == Mismatch:
		return engine.Reply{Status: engine.Refused, Val: v, Err: ErrHeldByPermits}
	case v <= 0:
		return engine.Reply{Status: engine.Refused, Val: v, Err: ErrHeldByOther}
	}
	return engine.Reply{Err: Unexpected(v)}
}

func Unexpected(v any) error {
	return fmt.Errorf("unexpected script reply %v", v)
}

// The refusals each script's reply can carry. A stale call (2: a later
// generation of the Lock is there) is a definite refusal: the node changed
// nothing. It is never expected in its own round, except by a delete, which
// must then leave the later value alone.
var (
	commitRefusals  = map[int64]error{0: ErrNotHeld}
	extendRefusals  = map[int64]error{0: ErrKeyAbsent, -1: ErrHeldByOther}
	restoreRefusals = map[int64]error{0: ErrHeldByOther, 2: ErrLater}
	deleteRefusals  = map[int64]error{0: ErrKeyAbsent, -1: ErrHeldByOther, 2: ErrLater}
	// announceRefusals: a waiting room that could not be used.
	announceRefusals = map[int64]error{0: errNoRoom}
)

// errNoRoom is announce.lua's refusal: the waiting room could not be used.
var errNoRoom = errors.New("the waiting room cannot be used")

// The codes of handover.lua that say the leaving holder's value was there.
const (
	HandedOver       = 3 // and the key is the waiter's now
	ReleasedHandover = 4 // and it was deleted: the waiter contends as usual
	HandedInStreak   = 5 // as handedOver, while other clients wait
)

// The errors a node's reply carries when the script did not do the
// operation. The public package re-exports all but ErrLater under the same
// names, with their documentation.
var (
	ErrHeldByOther = errors.New("redlock: key held by another token")
	ErrKeyAbsent   = errors.New("redlock: key absent on node")
	// ErrWriterWaiting is a shared acquire's refusal while an exclusive
	// Lock waits for the key (scripts/acquire_shared.lua).
	ErrWriterWaiting = errors.New("redlock: a writer waits for the key; new readers wait behind it")
	ErrRestartGuard  = errors.New("redlock: node within its restart guard")
	ErrLater         = errors.New("stale call: the key holds a later write of the same lock, or its delete came first")
	ErrNotHeld       = errors.New("redlock: not held")
	// ErrMaxShared is the refusal of a shared acquire on a node where
	// the key holds the most shared Locks it takes: a held key, which it
	// matches.
	ErrMaxShared error = &alsoError{"redlock: key held by the most shared locks a node takes (MaxShared)", ErrHeldByOther}

	// The refusals of a key that another kind of Lock holds match
	// engine.ErrInvalidArgument: an Acquire must not wait for it.
	ErrHeldByPermits = fmt.Errorf("%w: the key is held by permits (Permits)", engine.ErrInvalidArgument)
	ErrHeldExclusive = fmt.Errorf("%w: the key is held by an exclusive lock, not by permits", engine.ErrInvalidArgument)
	ErrHeldShared    = fmt.Errorf("%w: the key is held by shared locks (Shared), not by permits", engine.ErrInvalidArgument)
)

// alsoError is an error with a message of its own that matches another.
type alsoError struct {
	msg  string
	also error
}

func (e *alsoError) Error() string { return e.msg }
func (e *alsoError) Unwrap() error { return e.also }
