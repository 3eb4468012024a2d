package engine

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The engine's tests send the library's own acquire and release scripts,
// read from scripts/, with readers of their own: the engine knows no
// script, and the tests must not depend on the public package.

func mustRead(name string) string {
	b, err := os.ReadFile("../../scripts/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testSources are the texts of every script the tests send, as
// Config.Sources (testScript keeps them).
var testSources = make(map[*redis.Script]string)

func testScript(src string) *redis.Script {
	s := redis.NewScript(src)
	testSources[s] = src
	return s
}

var (
	testLib     = mustRead("lib.lua")
	testWrite   = mustRead("late.lua") + mustRead("late_write.lua")
	testAcquire = testScript(testWrite + testLib + mustRead("take.lua") + mustRead("wait.lua") + mustRead("take_fair.lua") + mustRead("acquire.lua"))
	testRelease = testScript(mustRead("late.lua") + testLib + mustRead("release.lua") + mustRead("release_one.lua"))
	testScripts = []*redis.Script{testAcquire, testRelease}

	errHeldByOther = errors.New("held by another")
	errKeyAbsent   = errors.New("key absent")
	errLater       = errors.New("a later write")
)

// testKeyLife is the library's rule, with its default drift, for how long a
// key may outlive its write: its TTL and twice the drift allowance.
func testKeyLife(ttl time.Duration) time.Duration { return ttl + 2*(ttl/100+2*time.Millisecond) }

// value is generation gen of a Lock's values, as the library writes them.
type value struct {
	prefixArg any
	holderArg any
	gen       uint64
	s         string
}

func acquireOp(key string, v value, ttlMs any) Op {
	return Op{Script: testAcquire, Read: readTestAcquire, Keys: [MaxKeys]string{key}, NKeys: 1, Refusals: refusalsKey(key, v),
		Args: [MaxArgs]any{v.s, ttlMs, v.holderArg, v.gen}, NArgs: 4}
}

// deleteOp deletes v's Lock's values up to generation upTo (0: any), and
// leaves what refuses its writes up to generation tomb until the latest
// deadline of those sent, as the library's deletes do.
func deleteOp(key string, v value, upTo, tomb uint64) Op {
	return Op{Script: testRelease, Read: readTestDelete, Keys: [MaxKeys]string{key}, NKeys: 1, Refusals: refusalsKey(key, v),
		Args: [MaxArgs]any{v.prefixArg, upTo, tomb}, NArgs: 3}
}

// refusalsKey is the refusals key of v's Lock on key, named as the
// library names it, with the Lock's prefix for its hash.
func refusalsKey(key string, v value) string {
	return key + ":redlock:late:" + strings.TrimSuffix(v.prefixArg.(string), ".")
}

func readTestAcquire(cmd *redis.Cmd) Reply {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return Reply{Err: err}
	case v == 1 || v == 6:
		return Reply{Status: OK, Chained: v == 6}
	case v <= 0:
		return Reply{Status: Refused, Held: true, Err: errHeldByOther}
	case v == 2:
		return Reply{Status: Refused, Err: errLater}
	}
	return Reply{Err: fmt.Errorf("unexpected reply %d", v)}
}

func readTestDelete(cmd *redis.Cmd) Reply {
	v, err := cmd.Int64()
	switch {
	case err != nil:
		return Reply{Err: err}
	case v == 1:
		return Reply{Status: OK}
	case v == 0:
		return Reply{Status: Refused, Err: errKeyAbsent}
	case v == -1:
		return Reply{Status: Refused, Err: errHeldByOther}
	case v == 2:
		return Reply{Status: Refused, Err: errLater}
	}
	return Reply{Err: fmt.Errorf("unexpected reply %d", v)}
}

// testTiming is the library's engine timing (the public package's clock.go).
var testTiming = Timing{CleanupRetryMin: 20 * time.Millisecond, CleanupRetryMax: 400 * time.Millisecond,
	WorkerIdle: time.Second, IdentifyTimeout: time.Second, IdentifyRetry: 100 * time.Millisecond,
	SubRetryMin: 50 * time.Millisecond, SubRetryMax: 2 * time.Second,
	ClockRefresh: 2 * time.Second, ClockDrift: 0.01, LateSlack: time.Millisecond}
