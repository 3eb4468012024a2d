package sim

import (
	"fmt"
	"os"
	"runtime"
	"strings"
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

// TestQuickWrite: FaultHoldQuick's match takes a quick round's write, its
// value the prefix and a generation, and not its delete, which names the
// prefix alone, nor another Lock's write.
func TestQuickWrite(t *testing.T) {
	prefix := "ZM552DPMSTIJVXECGQQCI43W4Q" + string(quickMeta)
	write := "*6\r\n$7\r\nevalsha\r\n$40\r\n0123456789012345678901234567890123456789\r\n$1\r\n2\r\n$6\r\nsim:k1\r\n$" +
		fmt.Sprint(len(prefix)+1) + "\r\n" + prefix + "1\r\n$4\r\n7000\r\n"
	del := "*6\r\n$7\r\nevalsha\r\n$40\r\n0123456789012345678901234567890123456789\r\n$1\r\n2\r\n$6\r\nsim:k1\r\n$" +
		fmt.Sprint(len(prefix)) + "\r\n" + prefix + "\r\n$1\r\n1\r\n"
	if !QuickWrite([]byte(write)) {
		t.Errorf("a quick round's write not matched: %q", write)
	}
	if QuickWrite([]byte(del)) {
		t.Errorf("a quick round's delete matched: %q", del)
	}
	if other := strings.Replace(write, string(quickMeta), "m"+"ABCD.", 1); QuickWrite([]byte(other)) {
		t.Errorf("another Lock's write matched: %q", other)
	}
}
