package sim

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// scripter runs a node's scripts as Redis 7.0 does, in place of
// miniredis's own EVAL: one Lua state for the server's life, its globals
// guarded (a script may not create or read an unknown global), a script
// cache of its own that SCRIPT LOAD and EVAL fill and a restart (a new
// server) empties, EVALSHA of an unknown script answered NOSCRIPT. Each
// command a script calls runs through miniredis (its SET, GET, PTTL...).
// miniredis makes a Lua state for every script it runs, which took half
// the simulator's time; its cache also keeps only the scripts that ran
// without an error, where Redis keeps every one it compiled.
//
// A script runs under mu, and so does every look at the node's keys from
// outside (Node.Keys, a crash's snapshot): no other script, nor a look,
// sees a script's keys half-written.
type scripter struct {
	srv     *server.Server
	mu      sync.Mutex
	scripts map[string]string // sha1 → source
	l       *lua.LState
	peer    *server.Peer // the scripts' connection: their commands' replies land in buf
	buf     bytes.Buffer
	wr      *bufio.Writer
	rd      *bufio.Reader
}

// compiled caches the compiled scripts by source, for every node.
var compiled sync.Map

func newScripter(srv *server.Server) *scripter {
	s := &scripter{srv: srv, scripts: make(map[string]string)}
	s.wr = bufio.NewWriter(&s.buf)
	s.rd = bufio.NewReader(&s.buf)
	s.peer = server.NewPeer(s.wr)
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.fn))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	// gopher-lua's string.match returns nothing when the pattern does not
	// match, where Lua 5.1 (Redis's) returns one nil: tonumber(
	// string.match(v, p)) then fails ("bad argument #1 to tonumber")
	// where Redis gets nil, as the permit scripts do (seen in the
	// simulator; TestShimLuaStringMatch).
	str := l.GetGlobal("string").(*lua.LTable)
	match := str.RawGetString("match").(*lua.LFunction)
	str.RawSetString("match", l.NewFunction(func(l *lua.LState) int {
		top := l.GetTop()
		l.Push(match)
		for i := 1; i <= top; i++ {
			l.Push(l.Get(i))
		}
		l.Call(top, lua.MultRet)
		if n := l.GetTop() - top; n > 0 {
			return n
		}
		l.Push(lua.LNil)
		return 1
	}))
	redis := l.NewTable()
	l.SetField(redis, "call", l.NewFunction(s.call(true)))
	l.SetField(redis, "pcall", l.NewFunction(s.call(false)))
	l.SetField(redis, "sha1hex", l.NewFunction(func(l *lua.LState) int {
		l.Push(lua.LString(sha1Hex(l.CheckString(1))))
		return 1
	}))
	l.SetField(redis, "error_reply", l.NewFunction(func(l *lua.LState) int {
		t := l.NewTable()
		t.RawSetString("err", lua.LString(l.CheckString(1)))
		l.Push(t)
		return 1
	}))
	l.SetField(redis, "status_reply", l.NewFunction(func(l *lua.LState) int {
		t := l.NewTable()
		t.RawSetString("ok", lua.LString(l.CheckString(1)))
		l.Push(t)
		return 1
	}))
	l.SetGlobal("redis", redis)
	// As Redis: a script that creates a global, or reads one that does not
	// exist, fails (KEYS and ARGV are set raw).
	if err := l.DoString(`setmetatable(_G, {
  __newindex = function(t, k) error("Script attempted to create global variable '" .. tostring(k) .. "'", 2) end,
  __index = function(t, k) error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end,
})`); err != nil {
		panic("sim: lua: " + err.Error())
	}
	s.l = l
	return s
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// handle answers the scripting commands, and reports whether cmd was one.
func (s *scripter) handle(c *server.Peer, cmd string, args []string) bool {
	switch cmd {
	case "EVAL", "EVALSHA":
	case "SCRIPT":
		s.script(c, args)
		return true
	default:
		return false
	}
	if len(args) < 2 {
		c.WriteError(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(cmd)))
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src := args[0]
	if cmd == "EVALSHA" {
		var ok bool
		if src, ok = s.scripts[strings.ToLower(args[0])]; !ok {
			c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
			return true
		}
	}
	proto, err := compile(src)
	if err != nil {
		c.WriteError("ERR Error compiling script (new function): " + err.Error())
		return true
	}
	if cmd == "EVAL" {
		s.scripts[sha1Hex(src)] = src
	}
	nkeys, err := strconv.Atoi(args[1])
	switch {
	case err != nil:
		c.WriteError("ERR value is not an integer or out of range")
		return true
	case nkeys < 0:
		c.WriteError("ERR Number of keys can't be negative")
		return true
	case nkeys > len(args)-2:
		c.WriteError("ERR Number of keys can't be greater than number of args")
		return true
	}
	l := s.l
	keys, argv := l.NewTable(), l.NewTable()
	for i, k := range args[2 : 2+nkeys] {
		keys.RawSetInt(i+1, lua.LString(k))
	}
	for i, a := range args[2+nkeys:] {
		argv.RawSetInt(i+1, lua.LString(a))
	}
	g := l.Get(lua.GlobalsIndex).(*lua.LTable)
	g.RawSetString("KEYS", keys)
	g.RawSetString("ARGV", argv)
	l.SetTop(0)
	l.Push(l.NewFunctionFromProto(proto))
	if err := l.PCall(0, 1, nil); err != nil {
		l.SetTop(0)
		msg := err.Error()
		if ae, ok := err.(*lua.ApiError); ok {
			msg = ae.Object.String()
		}
		if !strings.HasPrefix(msg, "ERR ") && !isErrorCode(msg) {
			msg = "ERR " + msg
		}
		c.WriteError(msg)
		return true
	}
	writeReply(c, l, l.Get(1))
	l.SetTop(0)
	return true
}

// isErrorCode reports whether msg starts with an upper-case error code, as
// a command's error reply (WRONGTYPE ..., NOSCRIPT ...) does.
func isErrorCode(msg string) bool {
	code, _, ok := strings.Cut(msg, " ")
	return ok && code != "" && strings.ToUpper(code) == code && strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

func compile(src string) (*lua.FunctionProto, error) {
	if p, ok := compiled.Load(src); ok {
		return p.(*lua.FunctionProto), nil
	}
	chunk, err := parse.Parse(strings.NewReader(src), "user_script")
	if err != nil {
		return nil, err
	}
	p, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, err
	}
	compiled.Store(src, p)
	return p, nil
}

// scriptWith returns the SHA-1, as EVALSHA names it, of the one script a
// node has run or loaded whose source holds marker, nil when none has or
// several have. The faults that hold one script's commands find it so:
// the library's sources are in its package, and a wasm run reads no file.
func scriptWith(marker string) []byte {
	var found []byte
	n := 0
	compiled.Range(func(k, _ any) bool {
		if src := k.(string); strings.Contains(src, marker) {
			found = []byte(sha1Hex(src))
			n++
		}
		return true
	})
	if n != 1 {
		return nil
	}
	return found
}

// script answers SCRIPT LOAD, EXISTS and FLUSH.
func (s *scripter) script(c *server.Peer, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(args) == 0 {
		c.WriteError("ERR wrong number of arguments for 'script' command")
		return
	}
	switch strings.ToUpper(args[0]) {
	case "LOAD":
		if len(args) != 2 {
			c.WriteError("ERR wrong number of arguments for 'script|load' command")
			return
		}
		if _, err := compile(args[1]); err != nil {
			c.WriteError("ERR Error compiling script (new function): " + err.Error())
			return
		}
		sha := sha1Hex(args[1])
		s.scripts[sha] = args[1]
		c.WriteBulk(sha)
	case "EXISTS":
		if len(args) < 2 {
			c.WriteError("ERR wrong number of arguments for 'script|exists' command")
			return
		}
		c.WriteLen(len(args) - 1)
		for _, sha := range args[1:] {
			if _, ok := s.scripts[strings.ToLower(sha)]; ok {
				c.WriteInt(1)
			} else {
				c.WriteInt(0)
			}
		}
	case "FLUSH":
		s.scripts = make(map[string]string)
		c.WriteOK()
	default:
		c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", args[0]))
	}
}

// call is redis.call (raise) or redis.pcall (return the error as a table).
func (s *scripter) call(raise bool) lua.LGFunction {
	return func(l *lua.LState) int {
		top := l.GetTop()
		if top == 0 {
			l.Error(lua.LString("Please specify at least one argument for this redis lib call"), 1)
			return 0
		}
		args := make([]string, top)
		for i := 1; i <= top; i++ {
			switch a := l.Get(i).(type) {
			case lua.LNumber:
				args[i-1] = a.String()
			case lua.LString:
				args[i-1] = string(a)
			default:
				l.Error(lua.LString("Lua redis lib command arguments must be strings or integers"), 1)
				return 0
			}
		}
		if cmd := strings.ToUpper(args[0]); cmd == "EVAL" || cmd == "EVALSHA" || cmd == "SCRIPT" {
			return s.fail(l, raise, "ERR This Redis command is not allowed from script")
		}
		s.buf.Reset()
		s.srv.Dispatch(s.peer, args)
		_ = s.wr.Flush()
		s.rd.Reset(&s.buf)
		res, err := server.ParseReply(s.rd)
		if err != nil {
			msg := err.Error()
			if strings.HasPrefix(msg, "ERR unknown command") {
				msg = "ERR Unknown Redis command called from script"
			}
			return s.fail(l, raise, msg)
		}
		if e, ok := res.(error); ok {
			return s.fail(l, raise, e.Error())
		}
		l.Push(toLua(l, res))
		return 1
	}
}

// fail raises msg (redis.call) or returns it as an error table
// (redis.pcall).
func (s *scripter) fail(l *lua.LState, raise bool, msg string) int {
	if raise {
		l.Error(lua.LString(msg), 1)
		return 0
	}
	t := l.NewTable()
	t.RawSetString("err", lua.LString(msg))
	l.Push(t)
	return 1
}

// toLua converts a command's reply as Redis does for a script: an integer
// to a number, a bulk string to a string, nil to false, an array to a
// table, a status to {ok = status}.
func toLua(l *lua.LState, r any) lua.LValue {
	switch v := r.(type) {
	case nil:
		return lua.LFalse
	case int:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []byte:
		return lua.LString(v)
	case string:
		return lua.LString(v)
	case server.Simple:
		t := l.NewTable()
		t.RawSetString("ok", lua.LString(string(v)))
		return t
	case []any:
		t := l.NewTable()
		for i, e := range v {
			t.RawSetInt(i+1, toLua(l, e))
		}
		return t
	}
	panic(fmt.Sprintf("sim: a reply of type %T", r))
}

// writeReply writes a script's result as Redis converts it: a number
// truncated to an integer, a string as a bulk string, false or nil as
// nil, true as 1, a table with err or ok as an error or a status, any
// other table as an array up to its first nil.
func writeReply(c *server.Peer, l *lua.LState, v lua.LValue) {
	switch t := v.(type) {
	case *lua.LNilType:
		c.WriteNull()
	case lua.LBool:
		if t {
			c.WriteInt(1)
		} else {
			c.WriteNull()
		}
	case lua.LNumber:
		c.WriteInt(int(t))
	case lua.LString:
		c.WriteBulk(string(t))
	case *lua.LTable:
		if e := t.RawGetString("err"); e.Type() == lua.LTString {
			c.WriteError(e.String())
			return
		}
		if o := t.RawGetString("ok"); o.Type() == lua.LTString {
			c.WriteInline(o.String())
			return
		}
		var items []lua.LValue
		for i := 1; ; i++ {
			e := t.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			items = append(items, e)
		}
		c.WriteLen(len(items))
		for _, e := range items {
			writeReply(c, l, e)
		}
	default:
		c.WriteNull()
	}
}
