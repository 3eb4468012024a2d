package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestCheckMisconfigured: check shows each node's role, and exits 1 for a
// node a lock cannot use: a replica beside its master, a node refusing the
// URL's password; the same nodes well configured exit 0.
func TestCheckMisconfigured(t *testing.T) {
	servers, good := startServers(t, 3)
	host, port, err := net.SplitHostPort(servers[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	replica := redistest.StartT(t, 1, redistest.WithArgs("--replicaof", host, port))[0]

	ok := redlockRun(t, "check", "--nodes", good)
	wantExit(t, ok, 0)
	if strings.Count(ok.stdout, "master") != 3 || !strings.Contains(ok.stdout, "role") {
		t.Errorf("check does not show each node's role:\n%s", ok.stdout)
	}

	withReplica := good + ",redis://" + replica.Addr()
	r := redlockRun(t, "check", "--nodes", withReplica)
	wantExit(t, r, 1)
	if !strings.Contains(r.stdout, "replica") ||
		!strings.Contains(r.stdout, "node 3 ("+replica.Addr()+") is a replica of node 0 ("+servers[0].Addr()+")") ||
		!strings.Contains(r.stderr, "node 3 cannot be used by a lock") {
		t.Errorf("check beside a replica:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	j := redlockRun(t, "check", "--nodes", withReplica, "--json")
	wantExit(t, j, 1)
	var report struct {
		Unusable []int
		Servers  []serverJSON
	}
	if err := json.Unmarshal([]byte(j.stdout), &report); err != nil {
		t.Fatalf("%v:\n%s", err, j.stdout)
	}
	if len(report.Unusable) != 1 || report.Unusable[0] != 3 || len(report.Servers) != 4 ||
		report.Servers[3].Role != "replica" || report.Servers[0].Role != "master" || report.Servers[3].MasterAddr != servers[0].Addr() {
		t.Errorf("check --json: %+v", report)
	}

	admin := servers[1].Client()
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.ConfigSet(t.Context(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	wrong := "redis://" + servers[0].Addr() + ",redis://:wrong@" + servers[1].Addr() + ",redis://" + servers[2].Addr()
	a := redlockRun(t, "check", "--nodes", wrong)
	wantExit(t, a, 1)
	if !strings.Contains(a.stdout, "auth refused") || !strings.Contains(a.stdout, "WRONGPASS") || strings.Contains(a.stdout, "unreachable") {
		t.Errorf("check of a node refusing the password:\n%s\n%s", a.stdout, a.stderr)
	}
	right := "redis://" + servers[0].Addr() + ",redis://:secret@" + servers[1].Addr() + ",redis://" + servers[2].Addr()
	wantExit(t, redlockRun(t, "check", "--nodes", right), 0)
}

// TestRunAuthRefused: run and elect refuse nodes that refuse the URL's
// password, or want one it does not give, at once with a usage error
// naming them, and never run the command, however long --wait is.
func TestRunAuthRefused(t *testing.T) {
	servers, _ := startServers(t, 3)
	admin := servers[0].Client()
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.ConfigSet(t.Context(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	for _, first := range []string{"redis://:wrong@", "redis://"} {
		nodes := first + servers[0].Addr() + ",redis://" + servers[1].Addr() + ",redis://" + servers[2].Addr()
		for _, args := range [][]string{
			{"run", "--nodes", nodes, "--key", "k", "--wait", "1m", "--", "touch", ran},
			{"elect", "--nodes", nodes, "--key", "k", "--", "touch", ran},
		} {
			r := redlockRun(t, args...)
			wantExit(t, r, exitUsage)
			if r.took > 20*time.Second || !strings.Contains(r.stderr, "node 0 ("+servers[0].Addr()+")") ||
				!strings.Contains(r.stderr, "authentication refused") {
				t.Errorf("%s with %s: took %v; stderr %q", args[0], first, r.took, r.stderr)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Fatalf("%s ran its command with a node refusing its credentials", args[0])
			}
		}
	}
}
