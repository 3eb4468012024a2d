package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// module is the library's module path: its go.mod marks the directory that
// holds scripts/, whichever package's test runs.
const module = "github.com/redlock-go/redlock"

// ScriptsDir returns the library's scripts/ directory, found from the
// working directory of the running test upward.
func ScriptsDir(t testing.TB) string {
	t.Helper()
	dir, err := scriptsDir()
	require.NoError(t, err)
	return dir
}

func scriptsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module "+module+"\n")) {
			return filepath.Join(dir, "scripts"), nil
		}
		parent := filepath.Dir(dir)
		if dir == parent {
			return "", fmt.Errorf("no go.mod of %s above the working directory", module)
		}
		dir = parent
	}
}

// LoadScripts loads every script the library runs (Scripts) on the nodes
// at addrs, as a running service has them cached: go-redis sends EVALSHA
// first, and on a stalled node the NOSCRIPT reply would arrive too late for
// the fallback to EVAL to be sent, so no write would land there, which is
// not the case under test. A node started again has lost them. The root
// package's TestLoadScripts checks that the library finds every script it
// runs already loaded.
func LoadScripts(t testing.TB, addrs ...string) {
	t.Helper()
	for _, addr := range addrs {
		Look(t, addr, func(ctx context.Context, rc *redis.Client) {
			for name := range scriptParts {
				for _, src := range []string{ScriptSource(t, name), guardedSource(t, name)} {
					if src != "" {
						require.NoError(t, rc.ScriptLoad(ctx, src).Err(), "SCRIPT LOAD %s on %s", name, addr)
					}
				}
			}
		})
	}
}

// scriptParts is how the library assembles each script it runs (scripts.go),
// by the name of the file that ends it: the files prepended to it, in order.
var scriptParts = map[string][]string{
	"acquire.lua":            {"late.lua", "late_write.lua", "acquire_fast.lua", "lib.lua", "take.lua", "wait.lua", "take_fair.lua"},
	"acquire_fenced.lua":     {"late.lua", "late_write.lua", "lib.lua", "take.lua", "wait.lua", "take_fair.lua"},
	"acquire_all.lua":        {"late.lua", "late_write.lua", "lib.lua", "take.lua", "wait.lua", "take_fair.lua", "take_all.lua"},
	"acquire_all_fenced.lua": {"late.lua", "late_write.lua", "lib.lua", "take.lua", "wait.lua", "take_fair.lua", "take_all.lua"},
	"fence_commit.lua":       {"late.lua", "late_write.lua", "counter.lua"},
	"extend_one.lua":         {"late.lua", "late_write.lua", "counter.lua", "extend.lua"},
	"extend_all.lua":         {"late.lua", "late_write.lua", "counter.lua", "extend.lua"},
	"restore.lua":            {"late.lua", "late_write.lua", "lib.lua"},
	"release_one.lua":        {"late.lua", "release_fast.lua", "lib.lua", "release.lua"},
	"release_all.lua":        {"late.lua", "lib.lua", "release.lua"},
	"handover.lua":           {"late.lua", "late_write.lua", "lib.lua", "take.lua", "wait.lua", "take_fair.lua"},
	"inspect.lua":            nil,
	"settle.lua":             {"late.lua", "late_write.lua"},
	"leader.lua":             nil,
	"announce.lua":           {"late.lua", "late_write.lua", "lib.lua", "wait.lua"},
	"acquire_shared.lua":     {"late.lua", "late_write.lua", "lib.lua", "shared.lua", "wait.lua"},
	"extend_shared.lua":      {"late.lua", "late_write.lua", "lib.lua", "shared.lua"},
	"restore_shared.lua":     {"late.lua", "late_write.lua", "lib.lua", "shared.lua"},
	"release_shared.lua":     {"late.lua", "lib.lua", "shared.lua"},
	"acquire_permit.lua":     {"late.lua", "late_write.lua", "lib.lua", "shared.lua", "permits.lua"},
	"extend_permit.lua":      {"late.lua", "late_write.lua", "lib.lua", "shared.lua", "permits.lua"},
	"restore_permit.lua":     {"late.lua", "late_write.lua", "lib.lua", "shared.lua", "permits.lua"},
	"release_permit.lua":     {"late.lua", "lib.lua", "shared.lua", "permits.lua"},
}

// writeHead is how every write starts (scripts.go): a guarded acquire's
// guard follows it.
var writeHead = []string{"late.lua", "late_write.lua"}

// ScriptSource is the script that the library runs for the file name of
// scripts/ that ends it (scriptParts).
func ScriptSource(t testing.TB, name string) string {
	t.Helper()
	src, err := Source(name)
	require.NoError(t, err)
	return src
}

// Source is ScriptSource, for code that runs outside a test's goroutine.
func Source(name string) (string, error) {
	parts, ok := scriptParts[name]
	if !ok {
		return "", fmt.Errorf("scripts/%s ends no script the library runs", name)
	}
	dir, err := scriptsDir()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range append(parts, name) {
		src, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		b.Write(src)
	}
	return b.String(), nil
}

// guardedSource is the restart-guarded form of the acquire script that name
// ends, "" for the other scripts: the guard's prologue first, told whether
// the acquire is fenced.
func guardedSource(t testing.TB, name string) string {
	t.Helper()
	if !strings.HasPrefix(name, "acquire") {
		return ""
	}
	fenced := strings.Contains(name, "fenced")
	var head strings.Builder
	for _, f := range writeHead {
		head.WriteString(scriptFile(t, f))
	}
	src := ScriptSource(t, name)
	return head.String() + fmt.Sprintf("local guard_fenced = %t\n", fenced) + scriptFile(t, "restart_guard.lua") + strings.TrimPrefix(src, head.String())
}

// scriptFile is the text of scripts/name.
func scriptFile(t testing.TB, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(ScriptsDir(t), name))
	require.NoError(t, err)
	return string(src)
}
