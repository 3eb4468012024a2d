// Command compare measures redlock side by side with go-redsync/redsync (its
// defaults, and with WithFailFast) and bsm/redislock (one node) on the same
// local redis-server nodes in one run, interleaving the libraries in rounds,
// and prints a markdown table. Run it from the repository root with
//
//	go -C compare run . [-out results.md]
//
// It starts its own redis-server processes (redis-server must be installed)
// and an in-process TCP proxy for the slow and silent nodes and the links
// with latency.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	if os.Getenv(workerEnv) != "" {
		if err := workerMain(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "compare worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := mainErr(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func mainErr(args []string, stdout, stderr io.Writer) error {
	cfg := defaultConfig()
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", joinInts(cfg.nodes), "node counts of the uncontended scenarios")
	keyWorkers := fs.String("manykeys-goroutines", joinInts(cfg.keyWorkers), "goroutine counts of the many-keys scenarios")
	kinds := fs.String("scenarios", strings.Join(cfg.kinds, ","), "scenario groups: uncontended, faults, network, contention, multiprocess, manykeys")
	fs.IntVar(&cfg.rounds, "rounds", cfg.rounds, "interleaved rounds per scenario")
	fs.IntVar(&cfg.ops, "ops", cfg.ops, "most uncontended operations per library and round")
	fs.DurationVar(&cfg.roundTime, "round-time", cfg.roundTime, "most time per library and round, uncontended")
	fs.DurationVar(&cfg.sliceTime, "slice", cfg.sliceTime, "time per library and round, contention and many keys")
	fs.DurationVar(&cfg.budget, "budget", cfg.budget, "most time per library and scenario; later rounds are skipped")
	fs.IntVar(&cfg.warmup, "warmup", cfg.warmup, "uncontended operations per library before measuring")
	fs.DurationVar(&cfg.hold, "hold", cfg.hold, "critical section under contention")
	fs.IntVar(&cfg.procs, "procs", cfg.procs, "worker processes of the multi-process scenario")
	fs.BoolVar(&cfg.ctxTimeout, "ctx-timeout", cfg.ctxTimeout, "set go-redis ContextTimeoutEnabled on every client")
	out := fs.String("out", "", "also write the markdown to this file")
	chartDir := fs.String("charts", "", "write SVG charts (uncontended p50 against N, many keys' locks/s against goroutines) into this directory")
	quiet := fs.Bool("q", false, "no progress on stderr")
	fs.BoolVar(&cfg.redisLog, "redis-log", false, "keep go-redis's own log lines (dial failures after a fault, and the like)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.nodes, err = parseInts(*nodes); err != nil {
		return fmt.Errorf("-nodes: %w", err)
	}
	if cfg.keyWorkers, err = parseInts(*keyWorkers); err != nil {
		return fmt.Errorf("-manykeys-goroutines: %w", err)
	}
	cfg.kinds = strings.Split(*kinds, ",")
	for _, k := range cfg.kinds {
		switch k {
		case groupUncontended, groupFaults, groupNetwork, groupContention, groupMultiProc, groupManyKeys:
		default:
			return fmt.Errorf("-scenarios: unknown group %q", k)
		}
	}
	if cfg.rounds < 1 || cfg.ops < 1 || cfg.warmup < 1 || cfg.procs < 1 {
		return fmt.Errorf("-rounds, -ops, -warmup and -procs must be at least 1")
	}
	if !*quiet {
		cfg.progress = stderr
	}
	if !cfg.redisLog {
		// Closing a proxy with calls stuck behind it makes go-redis retry and
		// log every failed dial; that is expected here and drowns the progress.
		redis.SetLogger(quietLogger{})
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	results, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	report(&buf, cfg, results, time.Since(start))
	if _, err := stdout.Write(buf.Bytes()); err != nil {
		return err
	}
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if *chartDir != "" {
		paths, err := writeCharts(*chartDir, results)
		if err != nil {
			return err
		}
		cfg.logf("charts: %s", strings.Join(paths, ", "))
	}
	return nil
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
