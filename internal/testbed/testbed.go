// Package testbed builds what a test runs locks over: real redis-server
// processes (internal/redistest), each behind a fault proxy
// (internal/faultproxy), with go-redis clients through the proxies for the
// lock and direct ones for the test's own look at the servers. It knows no
// lock: a test makes its Client over Bed.Clients, so that the tests of
// package redlock can use it as well as those of redlock_test.
//
// Everything it starts or opens is closed when the test ends, clients
// before proxies before servers.
package testbed

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/nodetest"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Bed is n redis-server processes, each behind a fault proxy.
type Bed struct {
	t       testing.TB
	Servers []*redistest.Server
	// Proxies stand between the servers and the clients of Clients: a
	// fault injected there is what the lock sees.
	Proxies []*faultproxy.Proxy
	// Direct bypass the proxies, for the test's own look at what the
	// servers hold; their reads are bounded by their context.
	Direct []*redis.Client
}

// Start starts n servers, with opts (persistence, say), and a proxy and a
// direct client for each.
func Start(t testing.TB, n int, opts ...redistest.Option) *Bed {
	t.Helper()
	b := &Bed{t: t, Servers: redistest.StartT(t, n, opts...)}
	for _, s := range b.Servers {
		b.Proxies = append(b.Proxies, Proxy(t, s.Addr()))
	}
	b.Direct = Dial(t, b.Addrs(), func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	return b
}

// Addrs are the servers' own addresses, behind no proxy.
func (b *Bed) Addrs() []string { return Addrs(b.Servers) }

// Clients returns a new go-redis client per server, through its proxy, with
// go-redis's default options changed by opt (nil for none), closed when the
// test ends. Each call gives clients of their own, as a process of its own
// has.
func (b *Bed) Clients(opt func(*redis.Options)) []redis.UniversalClient {
	b.t.Helper()
	addrs := make([]string, len(b.Proxies))
	for i, p := range b.Proxies {
		addrs[i] = p.Addr()
	}
	cs := Dial(b.t, addrs, opt)
	out := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// LoadScripts loads the library's scripts on every server (see
// nodetest.LoadScripts), as a running service has them.
func (b *Bed) LoadScripts() {
	b.t.Helper()
	nodetest.LoadScripts(b.t, b.Addrs()...)
}

// ResetFaults ends every fault of every proxy and drops the connections
// through them.
func (b *Bed) ResetFaults() {
	for _, p := range b.Proxies {
		p.Reset()
	}
}

// Get returns what server i holds under key, "" when absent.
func (b *Bed) Get(i int, key string) string {
	b.t.Helper()
	return nodetest.Get(b.t, context.Background(), b.Direct[i], key)
}

// Calls returns how many times server i has run command (lower case),
// scripts' commands included: evidence that a write landed even when its
// key is gone.
func (b *Bed) Calls(i int, command string) int {
	b.t.Helper()
	return nodetest.CommandCalls(b.t, context.Background(), b.Direct[i])[command]
}

// Proxy starts a fault proxy in front of addr, closed when the test ends.
func Proxy(t testing.TB, addr string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addrs are the addresses of servers.
func Addrs(servers []*redistest.Server) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Dial returns a go-redis client per address, with go-redis's default
// options changed by opt (nil for none), closed when the test ends.
func Dial(t testing.TB, addrs []string, opt func(*redis.Options)) []*redis.Client {
	out := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{Addr: a}
		if opt != nil {
			opt(o)
		}
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		out[i] = c
	}
	return out
}
