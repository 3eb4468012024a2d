package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// nodesEnv is read when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

// nodeFlag is --nodes, common to run, status and check.
type nodeFlag struct{ urls string }

func (n *nodeFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&n.urls, "nodes", "", "comma-separated redis:// or rediss:// URLs of independent masters (default $"+nodesEnv+")")
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
		return nil, exit(exitUsage, "no nodes: give --nodes or $%s, e.g. redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379", nodesEnv)
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

func parseNodeURL(raw string) (*redis.Options, error) {
	shown := redact(raw)
	if raw == "" {
		return nil, exit(exitUsage, "bad node URL: empty entry in the node list")
	}
	if !strings.HasPrefix(raw, "redis://") && !strings.HasPrefix(raw, "rediss://") {
		return nil, exit(exitUsage, "bad node URL %q: want redis://[user:password@]host:port[/db] or rediss://... for TLS", shown)
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

// parseFlags parses a subcommand's flags: -h prints its usage and exits 0
// (errHelp), any other problem is a one-line usage error.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stderr)
		fmt.Fprintf(os.Stderr, "usage: %s %s\n\nflags:\n", fs.Name(), synopsis)
		fs.PrintDefaults()
		return &exitError{code: 0}
	}
	if err != nil {
		return exit(exitUsage, "%v (%s -h lists the flags)", err, fs.Name())
	}
	return nil
}

// usageError is a usage error about a flag's value.
func usageError(fs *flag.FlagSet, format string, args ...any) error {
	return exit(exitUsage, "%s (%s -h lists the flags)", fmt.Sprintf(format, args...), fs.Name())
}
