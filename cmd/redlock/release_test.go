package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"

	"github.com/redlock-go/redlock"
)

// The module paths a release publishes, as docs/operations.md tags them:
// the library at vX.Y.Z, the others at cmd/redlock/vX.Y.Z and otel/vX.Y.Z.
const (
	libraryPath = "github.com/redlock-go/redlock"
	commandPath = "github.com/redlock-go/redlock/cmd/redlock"
	otelPath    = "github.com/redlock-go/redlock/otel"
)

// TestReleaseInstallsOffline cuts a release of this checkout as
// docs/operations.md says, into a module proxy on disk, and installs it as
// a user would, with no network: go install of the command at
// redlock.Version, and go get of the library and of the otel module from a
// fresh module, which then builds. The third-party modules come from this
// machine's module cache, read as a second file proxy; nothing is fetched
// from the network (GOPROXY has only file:// entries, GOSUMDB=off,
// GOVCS=*:off) or taken from the development workspace (GOWORK=off). It
// also checks what makes the release installable: no replace directive in
// the released modules' go.mod, and each requiring the library at the
// version Version names.
func TestReleaseInstallsOffline(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	version := redlock.Version
	if err := module.Check(libraryPath, version); err != nil || module.CanonicalVersion(version) != version {
		t.Fatalf("redlock.Version %q is no canonical release version of %s: %v", version, libraryPath, err)
	}
	cache := goEnv(t, "GOMODCACHE")
	// The third-party modules the released modules build with come from
	// this machine's module cache. Building this test put the command's
	// there; the otel module's are put there by listing its packages, as
	// a build of it would (nothing is fetched when they are there already,
	// as after test.sh's vet of otel). The install itself is offline.
	warm := exec.Command("go", "list", "-deps", "-test", "./...")
	warm.Dir = filepath.Join(root, "otel")
	if out, err := warm.CombinedOutput(); err != nil {
		t.Fatalf("go list -deps -test ./... in otel: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	env := append(os.Environ(),
		"GOWORK=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(filepath.Join(cache, "cache", "download")),
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GONOPROXY=", "GOVCS=*:off", "GOTOOLCHAIN=local",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"), // a fresh one: nothing of ours cached from an earlier run
		"GOPATH="+filepath.Join(tmp, "gopath"),
		"GOBIN="+filepath.Join(tmp, "bin"),
		// -modcacherw: t.TempDir's cleanup can remove the module cache;
		// -trimpath: the builds' cache entries do not depend on where the
		// fresh module cache is, so that a later run reuses them.
		"GOFLAGS=-modcacherw -trimpath",
	)
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		t.Logf("go %s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return string(out)
	}

	// 1. The library, tagged vX.Y.Z.
	publish(t, proxy, libraryPath, version, root)

	// 2. The nested modules: each must require the library at the
	// release's version and replace nothing; the release commit records
	// the library's checksums in their go.sum (GOWORK=off go get, which
	// must leave the requirement as it is), and they are tagged.
	for _, m := range []struct{ path, dir string }{{commandPath, "cmd/redlock"}, {otelPath, "otel"}} {
		src := filepath.Join(root, filepath.FromSlash(m.dir))
		checkReleasable(t, filepath.Join(src, "go.mod"), version)
		dir := filepath.Join(tmp, "release", filepath.FromSlash(m.dir))
		copyTree(t, src, dir)
		run(dir, "get", libraryPath+"@"+version)
		checkReleasable(t, filepath.Join(dir, "go.mod"), version)
		publish(t, proxy, m.path, version, dir)
	}

	// 3. go install of the command, from no module at all.
	run(tmp, "install", commandPath+"@"+version)
	out, err := exec.Command(filepath.Join(tmp, "bin", "redlock"), "--version").Output()
	if err != nil {
		t.Fatalf("the installed redlock --version: %v", err)
	}
	if !strings.HasPrefix(string(out), "redlock "+version+" ") {
		t.Errorf("the installed redlock --version says %q, want version %s", out, version)
	}

	// 4. go get of the library and the otel module from a fresh module,
	// which builds a program that uses both.
	user := filepath.Join(tmp, "user")
	writeFile(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26.0\n")
	writeFile(t, filepath.Join(user, "main.go"), `package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	redlockotel "github.com/redlock-go/redlock/otel"
)

func main() {
	_, _ = redlock.New([]redis.UniversalClient{redis.NewClient(&redis.Options{})}, redlock.WithHooks(redlockotel.Hooks()))
}
`)
	run(user, "get", libraryPath+"@"+version, otelPath+"@"+version)
	run(user, "build", "-o", filepath.Join(tmp, "user.bin"), ".")
	mf := readModFile(t, filepath.Join(user, "go.mod"))
	for _, p := range []string{libraryPath, otelPath} {
		if v := required(mf, p); v != version {
			t.Errorf("the user's go.mod requires %s at %q, want %s", p, v, version)
		}
	}
}

// publish writes module path at version, from the module in dir, to the
// file proxy at proxy: its list, .info, .mod and .zip, as a proxy serves
// them (the layout of the module cache's download directory).
func publish(t *testing.T, proxy, path, version, dir string) {
	t.Helper()
	escaped, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// A nested module's directory is left out, as the go command leaves
	// it out of a module's zip; so are VCS directories.
	if err := zip.CreateFromDir(f, module.Version{Path: path, Version: version}, dir); err != nil {
		t.Fatalf("zip of %s@%s from %s: %v", path, version, dir, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(at, version+".mod"), string(gomod))
	writeFile(t, filepath.Join(at, version+".info"), string(info))
	writeFile(t, filepath.Join(at, "list"), version+"\n")
}

// checkReleasable fails the test unless the go.mod at path has no replace
// directive and requires the library at version.
func checkReleasable(t *testing.T, path, version string) {
	t.Helper()
	mf := readModFile(t, path)
	for _, r := range mf.Replace {
		t.Errorf("%s: replace %s => %s: go install ...@version refuses a module with a replace directive; the go.work at the repository's root is for development", path, r.Old.Path, r.New.Path)
	}
	if v := required(mf, libraryPath); v != version {
		t.Errorf("%s requires %s at %q, want %s, the release redlock.Version names", path, libraryPath, v, version)
	}
}

func readModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse(path, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

// required is the version at which mf requires path, "" if it does not.
func required(mf *modfile.File, path string) string {
	for _, r := range mf.Require {
		if r.Mod.Path == path {
			return r.Mod.Version
		}
	}
	return ""
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goEnv is go env name, as this test's go command sees it.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
