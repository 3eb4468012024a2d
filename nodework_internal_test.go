package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// The least scripted lock (compare's min-script-script): acquire with a GET
// and a SET PX, release with a token-checked DEL. No waiting room, no
// refusals, no deadlines.
var (
	plainAcquireScript = redis.NewScript(`local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)
	plainReleaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

	// The least lock with the property (compare's min-deadline): its
	// acquire carries a node-clock deadline (ARGV[3]) and reads its own
	// refusal key (KEYS[2]) with the key; its release deletes its value
	// and, while the deadline (ARGV[2]) runs, leaves the refusal until it.
	minDeadlineAcquireScript = redis.NewScript(`local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[3]) then return 0 end
local r = redis.call('MGET', KEYS[1], KEYS[2])
if r[1] or r[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)
	minDeadlineReleaseScript = redis.NewScript(`local n = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then n = redis.call('DEL', KEYS[1]) end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) <= tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '!', 'PXAT', ARGV[2])
end
return n`)
)

// BenchmarkNodeScriptTime: what an uncontended acquire and its release cost
// the node in script time (INFO commandstats, evalsha's usec), the library's
// scripts against the least scripted lock's, in one run: rounds of 64 keys,
// each round one pipeline of acquires and one of releases, the three kinds
// of round interleaved. "within" releases inside the acquires' deadline (a
// copy may still land: the release leaves a refusal), "past" after it (a
// plain delete; the benchmark sends the deadline as already passed, as the
// engine does once the node's clock is past it), "plain" is the least
// lock, "min-within" and "min-past" the least lock with the property
// (a deadline and a refusal key of its own) releasing inside and after
// the deadline. Reported: µs per lock of each, the library's ÷ plain, and
// the library's ÷ the least lock with the property.
func BenchmarkNodeScriptTime(b *testing.B) {
	s := redistest.StartT(b, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
	b.Cleanup(func() { _ = rc.Close() })
	ctx := context.Background()
	for _, sc := range []*redis.Script{acquireScript, releaseScript, plainAcquireScript, plainReleaseScript, minDeadlineAcquireScript, minDeadlineReleaseScript} {
		if err := sc.Load(ctx, rc).Err(); err != nil {
			b.Fatal(err)
		}
	}
	const keys = 64
	evalUsec := func() int64 {
		txt, err := rc.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.SplitSeq(txt, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
			if !ok {
				continue
			}
			for f := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					return n
				}
			}
		}
		return 0
	}
	nowMs := func() int64 {
		t, err := rc.Time(ctx).Result()
		if err != nil {
			b.Fatal(err)
		}
		return t.UnixMilli()
	}
	// round takes and releases the keys of kind once and returns the
	// script time of the acquires and of the releases.
	round := func(kind string, r int) (acq, rel int64) {
		// Each round's Locks are new ones, as each Acquire's: a prefix,
		// and so a refusals key, of their own.
		prefix := "X~" + strconv.Itoa(r) + "."
		p := rc.Pipeline()
		// The deadline is far enough ahead that a loaded machine's
		// scheduling (other suites beside this one) delivers the
		// pipeline before it, and the release after the acquires
		// before it too: past it, the acquires would be refused (LATE)
		// and "within" would measure a release past its deadline. Its
		// value changes nothing in what the scripts do within it.
		at := nowMs() + 5_000
		var gone int64 // a delete's latest deadline: 0, none that may land
		if kind == "within" || kind == "min-within" {
			gone = at
		}
		minimal := strings.HasPrefix(kind, "min-")
		for k := range keys {
			key := fmt.Sprintf("ns:%s:%d", kind, k)
			if kind == "plain" {
				plainAcquireScript.EvalSha(ctx, p, []string{key}, prefix, 10_000)
				continue
			}
			if minimal {
				minDeadlineAcquireScript.EvalSha(ctx, p, []string{key, key + ":!" + prefix}, prefix, 10_000, at)
				continue
			}
			acquireScript.EvalSha(ctx, p, []string{script.RefusalsKeyOf(key, prefix, false), key},
				at, prefix+"1", 10_000, holderOfLock(prefix), 1)
		}
		before := evalUsec()
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(kind, " acquire: ", err)
		}
		mid := evalUsec()
		p = rc.Pipeline()
		for k := range keys {
			key := fmt.Sprintf("ns:%s:%d", kind, k)
			if kind == "plain" {
				plainReleaseScript.EvalSha(ctx, p, []string{key}, prefix)
				continue
			}
			if minimal {
				minDeadlineReleaseScript.EvalSha(ctx, p, []string{key, key + ":!" + prefix}, prefix, gone)
				continue
			}
			releaseScript.EvalSha(ctx, p, []string{script.RefusalsKeyOf(key, prefix, false), key}, gone, prefix, 0, 1)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(kind, " release: ", err)
		}
		return mid - before, evalUsec() - mid
	}
	kinds := []string{"within", "past", "plain", "min-within", "min-past"}
	acq, rel := map[string]int64{}, map[string]int64{}
	for r := range 20 { // warm: the scripts compiled, the keys' refusals in place
		for _, k := range kinds {
			round(k, r)
		}
	}
	b.ResetTimer()
	for r := 0; b.Loop(); r++ {
		for i := range kinds {
			k := kinds[(i+r)%len(kinds)]
			a, l := round(k, 20+r)
			acq[k] += a
			rel[k] += l
		}
	}
	locks := float64(b.N * keys)
	for _, k := range kinds {
		b.ReportMetric(float64(acq[k]+rel[k])/locks, k+"-µs/lock")
		if testing.Verbose() {
			b.Logf("%s: acquire %.2f µs, release %.2f µs", k, float64(acq[k])/locks, float64(rel[k])/locks)
		}
	}
	plain := float64(acq["plain"] + rel["plain"])
	b.ReportMetric(float64(acq["within"]+rel["within"])/plain, "within÷plain")
	b.ReportMetric(float64(acq["past"]+rel["past"])/plain, "past÷plain")
	b.ReportMetric(float64(acq["within"]+rel["within"])/float64(acq["min-within"]+rel["min-within"]), "within÷min-within")
	b.ReportMetric(float64(acq["past"]+rel["past"])/float64(acq["min-past"]+rel["min-past"]), "past÷min-past")
}
