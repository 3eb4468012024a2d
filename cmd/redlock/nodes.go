package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodesEnv is read when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

// nodeFlag is --nodes, common to run, status and check.
type nodeFlag struct{ urls string }

func (n *nodeFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&n.urls, "nodes", "", "comma-separated independent masters, each host:port or a redis:// or rediss:// URL (default $"+nodesEnv+")")
}

// node is one master given on the command line.
type node struct {
	addr   string // host:port (or socket path), never the password
	client *redis.Client
}

// open parses the node URLs with go-redis's own parser and makes one client
// per node; a bad URL is a usage error. Calls are bounded by their context
// (ContextTimeoutEnabled), so that every deadline of the command holds.
func (n *nodeFlag) open() ([]node, error) {
	list := n.urls
	if list == "" {
		list = os.Getenv(nodesEnv)
	}
	if strings.TrimSpace(list) == "" {
		return nil, exit(exitUsage, "no nodes: give --nodes or $%s, e.g. 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379", nodesEnv)
	}
	var nodes []node
	for raw := range strings.SplitSeq(list, ",") {
		raw = strings.TrimSpace(raw)
		opts, err := parseNodeURL(raw)
		if err != nil {
			closeNodes(nodes)
			return nil, err
		}
		opts.ContextTimeoutEnabled = true
		if opts.DialerRetries == 0 { // not set in the URL
			// One dial per call: a node that refuses connections is
			// reported at once, not after go-redis's five tries.
			opts.DialerRetries = 1
		}
		nodes = append(nodes, node{addr: opts.Addr, client: redis.NewClient(opts)})
	}
	return nodes, nil
}

// parseNodeURL reads one node: host:port, as redis-cli takes it, or a URL.
func parseNodeURL(raw string) (*redis.Options, error) {
	shown := redact(raw)
	if raw == "" {
		return nil, exit(exitUsage, "bad node URL: empty entry in the node list")
	}
	if !strings.Contains(raw, "://") {
		if _, port, err := net.SplitHostPort(raw); err != nil || port == "" {
			return nil, exit(exitUsage, "bad node %q: want host:port, redis://[user:password@]host:port[/db] or rediss://... for TLS", shown)
		}
		raw = "redis://" + raw
	}
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return nil, exit(exitUsage, "bad node URL %q: want host:port, redis://[user:password@]host:port[/db] or rediss://... for TLS", shown)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		// net/url's errors quote the whole URL, password and all: keep
		// only their reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, exit(exitUsage, "bad node URL %q: %v", shown, strings.TrimPrefix(err.Error(), "redis: "))
	}
	return opts, nil
}

// redact hides a URL's password.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		scheme, _, _ := strings.Cut(raw, "://")
		return scheme + "://***" + raw[at:]
	}
	return raw
}

func clients(nodes []node) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		out[i] = n.client
	}
	return out
}

func closeNodes(nodes []node) {
	for _, n := range nodes {
		_ = n.client.Close()
	}
}

// parseFlags parses a subcommand's flags: -h prints its usage, and after
// the flags the text of more (if any) and the command's exit statuses
// (exitHelp), on stdout, as asked for, and exits 0; any other problem is a
// one-line usage error.
func parseFlags(fs *flag.FlagSet, synopsis, more string, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Printf("usage: %s %s\n\nflags:\n", fs.Name(), synopsis)
		fs.PrintDefaults()
		if more != "" {
			fmt.Print("\n" + more)
		}
		if exits := exitHelp[fs.Name()]; exits != "" {
			fmt.Print("\n" + exits)
		}
		return &exitError{code: 0}
	}
	if err != nil {
		return exit(exitUsage, "%v%s (%s -h lists the flags)", err, flagHint(fs, err), fs.Name())
	}
	return nil
}

// renamedFlags are flags that other commands, or earlier releases, call
// otherwise: a typed one is pointed to its name here.
var renamedFlags = map[string]string{"addrs": "nodes", "timeout": "wait", "nonblock": "wait 0", "n": "wait 0"}

// flagHint suggests, for a flag fs does not define, the one meant.
func flagHint(fs *flag.FlagSet, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: ")
	if !ok {
		return ""
	}
	typed = strings.TrimLeft(typed, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	meant := renamedFlags[typed]
	if meant == "" || fs.Lookup(strings.Fields(meant)[0]) == nil {
		meant = closest(typed, names)
	}
	if meant == "" {
		return ""
	}
	return "; did you mean --" + meant + "?"
}

// usageError is a usage error about a flag's value.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	return exit(exitUsage, "%s (%s -h lists the flags)", fmt.Sprintf(format, args...), fs.Name())
}

// warnFewNodes prints one line when the nodes cannot outvote a failure.
func warnFewNodes(prefix string, n int) {
	switch n {
	case 1:
		fmt.Fprintf(os.Stderr, "%s: warning: 1 node: the lock does not survive its failure; use 3 or more independent masters\n", prefix)
	case 2:
		fmt.Fprintf(os.Stderr, "%s: warning: 2 nodes: a majority of 2 is both, so either one down stops every lock; use 3 or more independent masters\n", prefix)
	}
}

// durationFlag is a duration flag that takes a number without a unit as
// seconds, as flock(1) takes its timeout, and knows whether it was given.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// parseDuration reads a duration such as 1m30s or 500ms, or a number of
// seconds such as 10 or 0.5.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	f, ferr := strconv.ParseFloat(s, 64)
	switch {
	case ferr != nil || math.IsNaN(f):
		return 0, errors.New("not a duration such as 30s, 1m30s or 500ms, nor a number of seconds")
	case math.Abs(f) > float64(math.MaxInt64)/float64(time.Second):
		return 0, fmt.Errorf("%q seconds is too long", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// durationVar defines a duration flag with a default.
func durationVar(fs *flag.FlagSet, name string, def time.Duration, usage string) *durationFlag {
	f := &durationFlag{d: def}
	fs.Var(f, name, usage)
	return f
}

// keysFlag is a --key that may be given several times: each one appends.
type keysFlag struct{ keys []string }

func (f *keysFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.keys, ",")
}

func (f *keysFlag) Set(s string) error {
	f.keys = append(f.keys, s)
	return nil
}

// distinct returns the keys in the order given, each once.
func (f *keysFlag) distinct() []string {
	var out []string
	for _, k := range f.keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// one returns the only --key, "" if none was given, or a usage error if
// it was given several times: for a command that reads one key, the last
// of several is not silently the one.
func (f *keysFlag) one(fs *flag.FlagSet) (string, error) {
	switch keys := f.distinct(); len(keys) {
	case 0:
		return "", nil
	case 1:
		return keys[0], nil
	default:
		return "", usageError(fs, "--key given %d times (%s): %s takes one key", len(f.keys), quoteKeys(keys), fs.Name())
	}
}

// quoteKeys shows keys as "a", "b".
func quoteKeys(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}
