package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// What the library needs of a node that miniredis does not do as Redis
// 7.0 does, each checked against redis-server on the same inputs
// (shims_test.go):
//
//   - INFO server: miniredis refuses the section ("section (server) is not
//     supported"); the library identifies a node by its run_id, asked with
//     INFO server from Go and from the restart guard's Lua, and a restart
//     must show a new one. The shim answers the section, with a run_id of
//     40 hex digits that changes with every start of the node (node.go).
//   - Scripting (scripting.go): EVAL, EVALSHA and SCRIPT are answered by a
//     Lua state of the node's own, with Redis's script cache (every script
//     compiled is kept, until the server's restart: a node's restart is a
//     new server, node.go) and guarded globals.
//   - SET with PXAT or EXAT at a moment already past (a delete that
//     ends a Lock's value, or a refusal whose deadline has passed,
//     scripts/late.lua): Redis deletes the key, and with GET answers its
//     old value; miniredis keeps a negative TTL for a key it did not set,
//     which a later command trips over (a nil pointer). The shim deletes
//     the key.
//   - INFO server's server_time_usec, the node's clock when it answers,
//     which the library reads at first contact (internal/engine/clock.go).
//   - Expiry by the node's own clock: miniredis's keys expire by its clock
//     (ClockTTL, SetTime), set to the node's before each command (Conn.Read,
//     Node.tick); a clock stepped back keeps a TTL in miniredis where Redis,
//     which stores an absolute expiry, extends it (Node.Step raises the
//     TTLs by the step).

// installShims sets srv's pre-hook: INFO server and the scripting
// commands (scripting.go) are answered here, the rest by miniredis. The
// hook runs for the scripts' redis.call too, with the scripter's lock
// held: there it answers INFO alone.
// seen, when set, is called with each command a client sent (not a
// script's redis.call), before it runs.
func installShims(m *miniredis.Miniredis, runID string, now func() time.Time, seen func(cmd string, args []string)) *scripter {
	srv := m.Server()
	sc := newScripter(srv)
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd == "INFO" && len(args) == 1 && strings.EqualFold(args[0], "server") {
			c.WriteBulk(serverInfo(runID, now()))
			return true
		}
		if cmd == "SET" && setPast(c, m, now(), args) {
			return true
		}
		if c == sc.peer {
			return false
		}
		if seen != nil {
			seen(cmd, args)
		}
		return sc.handle(c, cmd, args)
	})
	return sc
}

// serverInfo is INFO server's reply for a server of runID whose clock
// reads now, in Redis 7.0's form (the fields a client may read; Redis has
// more).
func serverInfo(runID string, now time.Time) string {
	lines := []string{
		"# Server",
		"redis_version:7.0.15",
		"redis_mode:standalone",
		"os:Linux (simulated)",
		"arch_bits:64",
		"process_id:1",
		"run_id:" + runID,
		"tcp_port:6379",
		"server_time_usec:" + strconv.FormatInt(now.UnixMicro(), 10),
	}
	return strings.Join(lines, "\r\n") + "\r\n"
}

// setPast answers SET key value … PXAT (or EXAT) at a moment at or before
// now, as Redis does: the key is deleted, and GET answers its old value.
// It reports whether it answered: a SET with NX, XX or KEEPTTL, or with
// another expiry, is miniredis's.
func setPast(c *server.Peer, m *miniredis.Miniredis, now time.Time, args []string) bool {
	if len(args) < 3 {
		return false
	}
	key, get, past := args[0], false, false
	for i := 2; i < len(args); i++ {
		switch strings.ToUpper(args[i]) {
		case "GET":
			get = true
		case "PXAT", "EXAT":
			if i+1 >= len(args) {
				return false
			}
			n, err := strconv.ParseInt(args[i+1], 10, 64)
			if err != nil || n <= 0 {
				return false
			}
			at := time.UnixMilli(n)
			if strings.EqualFold(args[i], "EXAT") {
				at = time.Unix(n, 0)
			}
			past = !at.After(now)
			i++
		default:
			return false
		}
	}
	if !past {
		return false
	}
	old, err := m.Get(key)
	if err != nil && err != miniredis.ErrKeyNotFound {
		c.WriteError("WRONGTYPE Operation against a key holding the wrong kind of value")
		return true
	}
	m.Del(key)
	switch {
	case !get:
		c.WriteOK()
	case err != nil:
		c.WriteNull()
	default:
		c.WriteBulk(old)
	}
	return true
}
