package sim

import (
	"strings"

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
func installShims(srv *server.Server, runID string, seen func(cmd string, args []string)) *scripter {
	info := serverInfo(runID)
	sc := newScripter(srv)
	srv.SetPreHook(func(c *server.Peer, cmd string, args ...string) bool {
		if cmd == "INFO" && len(args) == 1 && strings.EqualFold(args[0], "server") {
			c.WriteBulk(info)
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

// serverInfo is INFO server's reply for a server of runID, in Redis 7.0's
// form (the fields a client may read; Redis has more).
func serverInfo(runID string) string {
	lines := []string{
		"# Server",
		"redis_version:7.0.15",
		"redis_mode:standalone",
		"os:Linux (simulated)",
		"arch_bits:64",
		"process_id:1",
		"run_id:" + runID,
		"tcp_port:6379",
	}
	return strings.Join(lines, "\r\n") + "\r\n"
}
