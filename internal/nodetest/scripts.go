package nodetest

import (
	"bytes"
	"context"
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
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module "+module+"\n")) {
			return filepath.Join(dir, "scripts")
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod of %s above the working directory", module)
		dir = parent
	}
}

// LoadScripts loads the library's scripts/*.lua on the nodes at addrs, as
// a running service has them cached: go-redis sends EVALSHA first, and on a
// stalled node the NOSCRIPT reply would arrive too late for the fallback to
// EVAL to be sent, so no write would land there, which is not the case under
// test. A node started again has lost them. The root package's
// TestLoadScripts checks that the library finds every script it runs
// already loaded.
func LoadScripts(t testing.TB, addrs ...string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(ScriptsDir(t), "*.lua"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "the library's scripts/*.lua")
	for _, addr := range addrs {
		Look(t, addr, func(ctx context.Context, rc *redis.Client) {
			for _, f := range files {
				src := ScriptSource(t, filepath.Base(f))
				require.NoError(t, rc.ScriptLoad(ctx, src).Err(), "SCRIPT LOAD %s on %s", f, addr)
			}
		})
	}
}

// ScriptSource is the script that the library runs for the file name of
// scripts/: the acquire scripts call take(), which take.lua, prepended,
// defines, and the scripts that write a lock key use what lib.lua,
// prepended before it, defines.
func ScriptSource(t testing.TB, name string) string {
	t.Helper()
	dir := ScriptsDir(t)
	read := func(name string) string {
		src, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return string(src)
	}
	src := read(name)
	switch name {
	case "lib.lua", "take.lua":
		return src
	}
	if strings.Contains(src, "take(") {
		src = read("take.lua") + src
	}
	if strings.Contains(src, "tomb_") || strings.Contains(src, "chain_") {
		src = read("lib.lua") + src
	}
	return src
}
