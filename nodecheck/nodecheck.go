// Package nodecheck asks the Redis servers behind redlock's nodes for what
// the lock's safety depends on, and says in words what to change:
//   - maxmemory-policy: only noeviction is safe; volatile-* policies evict
//     lock keys, allkeys-* ones fence counters too;
//   - persistence: without appendonly yes and appendfsync always a restart
//     or crash loses keys, so a restarted node must stay down longer than
//     the longest TTL;
//   - the clock offset against this machine (from TIME), above MaxClockOffset;
//   - two nodes that are one server (the same run_id), which would vote twice;
//   - a replica given as a node (INFO replication), alone or beside its
//     own master: it refuses writes or loses them, and beside its master
//     it votes twice for one server;
//   - nodes that refuse the client's credentials (redlock.ErrAuth) or
//     whose ACL refuses the check (redlock.ErrNoPermission);
//   - nodes that cannot be reached, and fewer reachable nodes than a quorum.
//
// The redlock command's "check" prints the same report.
package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/engine"
	"github.com/redlock-go/redlock/internal/redisnode"
)

// Timeout bounds each server's part of Run: every command sent to
// one server shares this deadline, or the caller's when it is earlier.
const Timeout = 2 * time.Second

// MaxClockOffset is the clock offset between a server and this machine above
// which Run warns. An offset alone does not break the lock (each node
// times its keys by its own clock), but clocks this far apart are not kept by
// NTP, and an unkept clock may jump or run fast, which expires keys early.
const MaxClockOffset = time.Second

// Unreadable is the value of a Server setting that the server did not let
// Run read (CONFIG disabled, renamed, or refused by an ACL).
const Unreadable = "unknown"

// Report is what Run found on the nodes, and what it advises.
type Report struct {
	// Servers has one entry per server: one per node, or one per master of
	// a *redis.ClusterClient node, in node order.
	Servers []Server
	// Quorum is the number of nodes a lock needs, len(nodes)/2+1.
	Quorum int
	// Reachable counts the nodes whose every server answered.
	Reachable int
	// Warnings are the findings that put the lock's safety at risk, each a
	// sentence naming the node and what to change. They include every
	// server's own warnings, and two nodes that are one server.
	Warnings []string
	// Unusable lists, in order, the nodes a lock cannot count on: a
	// server unreachable or refusing the client's credentials, a replica,
	// or a second node of one server. A node whose ACL only refuses the
	// check's commands (INFO, TIME) is not in it: the lock's own commands
	// may be allowed (docs/operations.md). The redlock command's check
	// exits non-zero when it is not empty.
	Unusable []int
}

// Server is what one server told Run about itself.
type Server struct {
	Node int    // the node's index in the slice given to Run
	Addr string // the server's address, when its client exposes one
	// Err is set when the server could not be reached or did not answer
	// INFO or TIME within Timeout; the fields below are then empty. It
	// matches redlock.ErrAuth when the server refused the client's
	// credentials, redlock.ErrNoPermission when its ACL refused INFO or
	// TIME.
	Err error

	Version string // redis_version
	RunID   string // run_id: two nodes with the same one are one server
	// Role is "master" or "replica", as INFO replication says. A replica
	// is no node for a lock: it refuses writes (READONLY) or loses them at
	// its next resync, and beside its own master it holds what the master
	// holds.
	Role string
	// MasterAddr is a replica's master, host:port as the replica names it.
	MasterAddr string
	// replID is the replication id the server follows (master_replid),
	// the same on a master and its replicas.
	replID string
	Uptime time.Duration // since the server started, which is when it lost what it did not persist

	// MaxmemoryPolicy, AppendOnly and AppendFsync are the server's CONFIG
	// values, or Unreadable when CONFIG GET was refused (AppendOnly then comes
	// from INFO persistence, which always tells it).
	MaxmemoryPolicy string
	AppendOnly      string
	AppendFsync     string

	// ClockOffset is the server's TIME minus this machine's clock at the
	// middle of the round trip; the round trip bounds its error.
	ClockOffset time.Duration
	RoundTrip   time.Duration

	// Warnings are this server's findings, as in Report.Warnings.
	Warnings []string
}

// Run checks every node's server (every master of a cluster node) in
// parallel; call it at start-up with the nodes given to redlock.New. Each
// server answers within Timeout or ctx's deadline if earlier (Run does not
// wait longer, even for a client without ContextTimeoutEnabled). It reads
// with INFO, TIME and CONFIG GET; a refused CONFIG yields Unreadable and a
// warning, not an error. The error is only for bad input (a nil context, no
// nodes, a nil node) and matches redlock.ErrInvalidArgument.
func Run(ctx context.Context, nodes []redis.UniversalClient) (*Report, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	if len(nodes) == 0 {
		return nil, invalid("no nodes")
	}
	for i, c := range nodes {
		if redisnode.IsNil(c) {
			return nil, invalid("node %d is nil", i)
		}
	}
	perNode := make([][]Server, len(nodes))
	var wg sync.WaitGroup
	for i, c := range nodes {
		wg.Go(func() { perNode[i] = checkNode(ctx, i, c) })
	}
	wg.Wait()

	r := &Report{Quorum: len(nodes)/2 + 1}
	for _, servers := range perNode {
		reachable := true
		for _, s := range servers {
			reachable = reachable && s.Err == nil
			r.Warnings = append(r.Warnings, s.Warnings...)
		}
		if reachable {
			r.Reachable++
		}
		r.Servers = append(r.Servers, servers...)
	}
	same, seconds := sameServers(r.Servers)
	r.Warnings = append(r.Warnings, same...)
	replicas, replicaNodes := replicaWarnings(r.Servers)
	r.Warnings = append(r.Warnings, replicas...)
	unusable := make([]bool, len(nodes))
	for _, s := range r.Servers {
		if s.Err != nil && !errors.Is(s.Err, redlock.ErrNoPermission) {
			unusable[s.Node] = true
		}
	}
	for _, i := range append(seconds, replicaNodes...) {
		unusable[i] = true
	}
	for i, u := range unusable {
		if u {
			r.Unusable = append(r.Unusable, i)
		}
	}
	if r.Reachable < r.Quorum {
		r.Warnings = append(r.Warnings, fmt.Sprintf(
			"only %d of %d nodes answered, fewer than the quorum of %d: no lock can be taken until more are back",
			r.Reachable, len(nodes), r.Quorum))
	}
	return r, nil
}

// checkNode checks the server behind one node, or each master of a cluster.
func checkNode(ctx context.Context, i int, c redis.UniversalClient) []Server {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return []Server{checkServer(ctx, i, redisnode.Addr(c), c)}
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	var mu sync.Mutex
	var out []Server
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		s := checkServer(ctx, i, m.Options().Addr, m)
		mu.Lock()
		out = append(out, s)
		mu.Unlock()
		return nil
	})
	if err != nil && len(out) == 0 {
		s := Server{Node: i, Addr: redisnode.Addr(c), Err: err}
		s.Warnings = []string{fmt.Sprintf("%s: unreachable: %v", s.name(), err)}
		out = append(out, s)
	}
	return out
}

// checkServer checks one server, within Timeout even when the client
// does not bound its reads by the context.
func checkServer(ctx context.Context, i int, addr string, c redis.Cmdable) Server {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	done := make(chan Server, 1)
	go func() { done <- askServer(ctx, i, addr, c) }()
	var s Server
	select {
	case s = <-done:
	case <-ctx.Done():
		s = Server{Node: i, Addr: addr, Err: fmt.Errorf("no answer: %w", context.Cause(ctx))}
	}
	if s.Err != nil {
		s.Err = misconfig(s.Err)
		switch {
		case errors.Is(s.Err, redlock.ErrAuth):
			s.Warnings = []string{fmt.Sprintf("%s: refuses the client's credentials: %v: give the node's user name and password (in its URL for the redlock command)", s.name(), s.Err)}
		case errors.Is(s.Err, redlock.ErrNoPermission):
			s.Warnings = []string{fmt.Sprintf("%s: cannot be checked, its ACL refuses the check: %v: allow INFO and TIME to check it", s.name(), s.Err)}
		default:
			s.Warnings = []string{fmt.Sprintf("%s: unreachable: %v", s.name(), s.Err)}
		}
		return s
	}
	s.Warnings = s.advise()
	return s
}

// askServer sends the commands of a check and reads their replies.
func askServer(ctx context.Context, i int, addr string, c redis.Cmdable) Server {
	s := Server{Node: i, Addr: addr}
	info, err := c.Info(ctx, "server", "persistence", "replication").Result()
	if err != nil {
		s.Err = err
		return s
	}
	fields := redisnode.InfoFields(info)
	s.Version, s.RunID, s.replID = fields["redis_version"], fields["run_id"], fields["master_replid"]
	switch fields["role"] {
	case "master":
		s.Role = "master"
	case "slave", "replica":
		s.Role = "replica"
		if h, p := fields["master_host"], fields["master_port"]; h != "" && p != "" {
			s.MasterAddr = net.JoinHostPort(h, p)
		}
	}
	if secs, err := strconv.ParseInt(fields["uptime_in_seconds"], 10, 64); err == nil {
		s.Uptime = time.Duration(secs) * time.Second
	}

	sent := time.Now()
	now, err := c.Time(ctx).Result()
	if err != nil {
		s.Err = err
		return s
	}
	s.RoundTrip = time.Since(sent)
	s.ClockOffset = now.Sub(sent.Add(s.RoundTrip / 2)).Round(time.Microsecond)

	s.MaxmemoryPolicy, s.AppendOnly, s.AppendFsync = Unreadable, Unreadable, Unreadable
	switch fields["aof_enabled"] {
	case "1":
		s.AppendOnly = "yes"
	case "0":
		s.AppendOnly = "no"
	}
	// One CONFIG GET per setting: Redis 7 takes several in one, older
	// servers only one.
	for _, set := range []struct {
		name string
		to   *string
	}{{"maxmemory-policy", &s.MaxmemoryPolicy}, {"appendonly", &s.AppendOnly}, {"appendfsync", &s.AppendFsync}} {
		vals, err := c.ConfigGet(ctx, set.name).Result()
		if err != nil {
			if ctx.Err() != nil {
				s.Err = err
				return s
			}
			continue // refused: stays Unreadable, advise says so
		}
		if v, ok := vals[set.name]; ok {
			*set.to = v
		}
	}
	return s
}

// advise returns the warnings about one reachable server.
func (s *Server) advise() []string {
	var w []string
	name := s.name()
	switch p := s.MaxmemoryPolicy; {
	case p == Unreadable:
		w = append(w, fmt.Sprintf("%s: maxmemory-policy unknown (CONFIG GET refused): make sure it is noeviction, or allow CONFIG GET to check it", name))
	case p == "noeviction":
	case strings.HasPrefix(p, "volatile-"):
		w = append(w, fmt.Sprintf("%s: maxmemory-policy is %s, which evicts lock keys under memory pressure: set it to noeviction", name, p))
	default:
		w = append(w, fmt.Sprintf("%s: maxmemory-policy is %s, which evicts lock keys and fence counters under memory pressure: set it to noeviction", name, p))
	}
	switch {
	case s.AppendOnly == "no":
		w = append(w, fmt.Sprintf("%s: appendonly is no, so a restart loses its lock keys and fence counters: set appendonly yes and appendfsync always, or keep a restarted node down longer than the longest TTL", name))
	case s.AppendOnly == Unreadable:
		w = append(w, fmt.Sprintf("%s: appendonly unknown: make sure it is yes with appendfsync always, or keep a restarted node down longer than the longest TTL", name))
	case s.AppendFsync == Unreadable:
		w = append(w, fmt.Sprintf("%s: appendfsync unknown (CONFIG GET refused): make sure it is always, or keep a node that crashed down longer than the longest TTL", name))
	case s.AppendFsync != "always":
		w = append(w, fmt.Sprintf("%s: appendfsync is %s, so a crash can lose the last writes: set appendfsync always, or keep a node that crashed down longer than the longest TTL", name, s.AppendFsync))
	}
	if off := s.ClockOffset; math.Abs(float64(off)) > float64(MaxClockOffset) {
		w = append(w, fmt.Sprintf("%s: clock is %v off this machine's: keep the nodes' clocks with NTP (slewed, never stepped)", name, off))
	}
	return w
}

// name is how warnings refer to the server.
func (s *Server) name() string {
	if s.Addr != "" {
		return fmt.Sprintf("node %d (%s)", s.Node, s.Addr)
	}
	return fmt.Sprintf("node %d", s.Node)
}

// sameServers warns about servers of different nodes with the same
// run_id, and returns the later node of each pair.
func sameServers(servers []Server) ([]string, []int) {
	var w []string
	var seconds []int
	for i, a := range servers {
		for _, b := range servers[i+1:] {
			if a.RunID != "" && a.RunID == b.RunID && a.Node != b.Node {
				w = append(w, fmt.Sprintf("%s and %s are one server (run_id %s), which would vote twice: give each node its own independent master",
					a.name(), b.name(), a.RunID))
				seconds = append(seconds, b.Node)
			}
		}
	}
	return w, seconds
}

// replicaWarnings warns about every replica given as a node, naming the
// node that is its master when one is (by address, or by the replication
// id they share), and returns their nodes.
func replicaWarnings(servers []Server) ([]string, []int) {
	var w []string
	var nodes []int
	for _, s := range servers {
		if s.Role != "replica" {
			continue
		}
		nodes = append(nodes, s.Node)
		of := ""
		if s.MasterAddr != "" {
			of = " of " + s.MasterAddr
		}
		var master *Server
		for j := range servers {
			m := &servers[j]
			if m.Node != s.Node && m.Role == "master" && (sameAddr(m.Addr, s.MasterAddr) || s.replID != "" && m.replID == s.replID) {
				master = m
				break
			}
		}
		if master != nil {
			w = append(w, fmt.Sprintf("%s is a replica of %s: it holds what that node holds and would vote twice with it; Redlock needs independent masters: give it a master of its own, or remove it",
				s.name(), master.name()))
			continue
		}
		w = append(w, fmt.Sprintf("%s is a replica%s: it refuses the lock's writes (READONLY) or loses them at its next resync; Redlock needs independent masters: list masters only",
			s.name(), of))
	}
	return w, nodes
}

// sameAddr reports whether two host:port addresses name one endpoint as
// written (localhost for 127.0.0.1 too).
func sameAddr(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	loop := func(h string) string {
		if h == "localhost" || h == "::1" {
			return "127.0.0.1"
		}
		return h
	}
	return loop(ha) == loop(hb)
}

// misconfig is err as the library shows a refusal of the client's
// credentials or rights (redlock.ErrAuth, redlock.ErrNoPermission), or
// err itself.
func misconfig(err error) error {
	if m := engine.Misconfig(err); m != nil {
		return m
	}
	return err
}

// Err returns nil when the report has no warning, and otherwise an error that
// lists them, for a service that refuses to start on an unsafe node.
func (r *Report) Err() error {
	if len(r.Warnings) == 0 {
		return nil
	}
	return errors.New("nodecheck: " + strings.Join(r.Warnings, "; "))
}

// invalid returns an error for bad input to Run, matching
// redlock.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: nodecheck: "+format, append([]any{redlock.ErrInvalidArgument}, args...)...)
}
