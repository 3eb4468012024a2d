package containertest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRequireLogsSkip: without an engine, and without RequireDockerEnv set
// to "1", Require skips the test and appends its name and the reason to the
// file SkipLogEnv names, for ./test.sh to list.
func TestRequireLogsSkip(t *testing.T) {
	saved := available
	t.Cleanup(func() { available = saved })
	available = func() error { return errors.New("no engine here") }
	log := filepath.Join(t.TempDir(), "skipped")
	t.Setenv(RequireDockerEnv, "0")
	t.Setenv(SkipLogEnv, log)

	ran := false
	t.Run("needs-docker", func(t *testing.T) {
		Require(t)
		ran = true
	})
	if ran {
		t.Fatal("Require did not stop a test without an engine")
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "TestRequireLogsSkip/needs-docker: no engine here\n"; string(got) != want {
		t.Fatalf("skip log %q, want %q", got, want)
	}
}
