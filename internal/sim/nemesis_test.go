package sim

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/nodetest"
)

// TestHandoverFaultFindsItsScripts: with every script of the library
// loaded, hold-handover finds the handover's and the leaving Lock's
// delete's by the first lines of their files, each the one script that
// holds it, with the hash EVALSHA sends.
func TestHandoverFaultFindsItsScripts(t *testing.T) {
	if runtime.GOOS == "wasip1" {
		t.Skip("reads the scripts' files")
	}
	files, err := os.ReadDir(nodetest.ScriptsDir(t))
	require.NoError(t, err)
	for _, f := range files {
		if src, err := nodetest.Source(f.Name()); err == nil {
			_, err := compile(src)
			require.NoError(t, err, f.Name())
		}
	}
	for marker, file := range map[string]string{"-- handover: ": "handover.lua", "-- release_one: ": "release_one.lua"} {
		src := nodetest.ScriptSource(t, file)
		require.Equal(t, sha1Hex(src), string(scriptWith(marker)), "%s: the script %s ends", marker, file)
	}
	require.Nil(t, scriptWith("-- "), "a marker that several scripts hold finds none")
}
