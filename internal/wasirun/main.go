// Command wasirun runs a program compiled for GOOS=wasip1 GOARCH=wasm (a
// test binary, as the simulator's replays build it) under wazero, so that
// it runs the same way every time: one thread, every random byte the Go
// runtime reads (map order, select's choice, the seeds of math/rand and
// crypto/rand) drawn from -seed, and its clocks virtual (each reading
// advances them a microsecond, a sleep by its length), so that nothing of
// the host, its load or its clock reaches the program.
//
//	wasirun [-seed N] [-cache DIR] [-cwd DIR] [-compile] prog.wasm [args...]
//
// -compile only compiles prog into -cache's directory, so that the runs
// that follow, started at once, find it there.
//
// The program sees the host's file system at /, -cwd (the current
// directory by default) as its own, no environment but PWD, and exits with
// its own status. Its arguments and environment are in its memory: a run
// whose arguments differ in length from another's may lay out its heap
// otherwise, and so iterate a map of pointers otherwise; what must not
// change a run goes in arguments of a fixed length. It is a module of its
// own so that the library's go.mod does not gain wazero.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

func main() {
	seed := flag.Uint64("seed", 0, "the seed of every random byte the program reads")
	cacheDir := flag.String("cache", "", "keep wazero's compiled code in this directory (\"\": compile every time)")
	compile := flag.Bool("compile", false, "only compile the program into -cache's directory")
	cwd := flag.String("cwd", "", "the program's working directory (\"\": the current directory)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: wasirun [-seed N] [-cache DIR] [-compile] prog.wasm [args...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	args := flag.Args()[1:]
	if *compile {
		args = nil
	}
	if *cwd == "" {
		dir, err := os.Getwd()
		if err != nil {
			fmt.Fprintln(os.Stderr, "wasirun:", err)
			os.Exit(2)
		}
		*cwd = dir
	}
	code, err := run(*seed, *cacheDir, *cwd, flag.Arg(0), args, *compile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasirun:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// run runs prog with args in directory cwd and returns its exit status;
// with compileOnly, it stops once prog is compiled.
func run(seed uint64, cacheDir, cwd, prog string, args []string, compileOnly bool) (int, error) {
	ctx := context.Background()
	bin, err := os.ReadFile(prog)
	if err != nil {
		return 0, err
	}
	// The Go runtime grows its memory a little at a time: capacity for
	// the most it may grow to saves copying it at each step (the host
	// reserves it; only what is touched is resident).
	rc := wazero.NewRuntimeConfigCompiler().WithMemoryCapacityFromMax(true)
	if cacheDir != "" {
		prune(cacheDir, 7*24*time.Hour)
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return 0, err
		}
		rc = rc.WithCompilationCache(cache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	mod, err := r.CompileModule(ctx, bin)
	if err != nil || compileOnly {
		return 0, err
	}
	clk := newClock()
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(append([]string{filepath.Base(prog)}, args...)...).
		WithEnv("PWD", cwd).
		WithStdout(os.Stdout).WithStderr(os.Stderr).
		WithFSConfig(wazero.NewFSConfig().WithDirMount("/", "/")).
		WithRandSource(newSource(seed)).
		WithNanotime(clk.nanotime, 1).
		WithWalltime(clk.walltime, 1).
		WithNanosleep(clk.sleep).
		WithOsyield(func() {})
	_, err = r.InstantiateModule(ctx, mod, cfg)
	if ee := (*sys.ExitError)(nil); errors.As(err, &ee) {
		return int(ee.ExitCode()), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// clock is the program's time: it starts at the same instant every run
// and moves only as the program reads it (a microsecond a reading, so that
// a loop that waits for time to pass ends) or sleeps.
type clock struct{ mono int64 }

// epoch is the wall clock's reading at the clock's start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func newClock() *clock { return &clock{mono: int64(time.Second)} }

const tick = int64(time.Microsecond)

func (c *clock) nanotime() int64 {
	c.mono += tick
	return c.mono
}

func (c *clock) walltime() (int64, int32) {
	c.mono += tick
	t := epoch + c.mono
	return t / 1e9, int32(t % 1e9)
}

func (c *clock) sleep(ns int64) { c.mono += max(ns, tick) }

// source is the program's random bytes: ChaCha8 from seed.
type source struct{ c *rand.ChaCha8 }

func newSource(seed uint64) source {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	copy(s[8:], "redlock simulator replay")
	return source{rand.NewChaCha8(s)}
}

func (s source) Read(p []byte) (int, error) { return s.c.Read(p) }

// prune removes what the compilation cache holds that is older than age:
// each build of a program leaves its compiled code there, tens of MB.
func prune(dir string, age time.Duration) {
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil && time.Since(info.ModTime()) > age {
			_ = os.Remove(path)
		}
		return nil
	})
}
