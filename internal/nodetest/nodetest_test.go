package nodetest

import (
	"bufio"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve accepts connections on a loopback port and answers each with reply
// once it has read a line ("" for never), until the test ends.
func serve(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn // closed once the listener is
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, conn)
			if reply != "" {
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte(reply))
			}
		}
	}()
	return ln.Addr().String()
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestPing(t *testing.T) {
	if err := Ping(within(t, time.Second), serve(t, "+PONG\r\n")); err != nil {
		t.Fatalf("PONG: %v", err)
	}
	if err := Ping(within(t, time.Second), serve(t, "-LOADING\r\n")); err == nil {
		t.Fatal("an error reply passed for PONG")
	}
	err := Ping(within(t, 100*time.Millisecond), serve(t, ""))
	if !IsTimeout(err) {
		t.Fatalf("silent server: %v, want a timeout", err)
	}
}

func TestWaitReady(t *testing.T) {
	if err := WaitReady(within(t, time.Second), serve(t, "+PONG\r\n"), nil); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	err := WaitReady(within(t, 600*time.Millisecond), serve(t, ""), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent server: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("WaitReady took %v with a 600ms deadline", took)
	}

	exited := make(chan struct{})
	close(exited)
	if err := WaitReady(within(t, time.Second), serve(t, ""), exited); !errors.Is(err, ErrExited) {
		t.Fatalf("exited process: %v, want ErrExited", err)
	}
}

// TestScriptSource: the scripts are found from this package's directory,
// a write starts with late.lua and late_write.lua, a script that calls
// take() gets take.lua and lib.lua before it, and every file of scripts/ is
// a part of some script the library runs.
func TestScriptSource(t *testing.T) {
	late, write := scriptFile(t, "late.lua"), scriptFile(t, "late_write.lua")
	lib, take := scriptFile(t, "lib.lua"), scriptFile(t, "take.lua")
	if lib == "" || take == "" || late == "" || write == "" {
		t.Fatal("a part is empty")
	}
	acquire := ScriptSource(t, "acquire.lua")
	if !strings.HasPrefix(acquire, late+write+scriptFile(t, "acquire_fast.lua")+lib+take) {
		t.Fatalf("acquire.lua does not begin with late.lua, late_write.lua, its fast path, lib.lua and take.lua:\n%.200s", acquire)
	}
	if release := ScriptSource(t, "release_one.lua"); !strings.HasPrefix(release, late+scriptFile(t, "release_fast.lua")) {
		t.Fatalf("release_one.lua does not begin with late.lua and its fast path:\n%.200s", release)
	}
	used := map[string]bool{"restart_guard.lua": true}
	for name, parts := range scriptParts {
		used[name] = true
		for _, p := range parts {
			used[p] = true
		}
	}
	files, err := filepath.Glob(filepath.Join(ScriptsDir(t), "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("scripts/*.lua: %v", err)
	}
	for _, f := range files {
		if !used[filepath.Base(f)] {
			t.Errorf("scripts/%s is in no script", filepath.Base(f))
		}
	}
}
