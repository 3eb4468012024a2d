package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/nodecheck"
)

// checkStatuses is check -h's word on its exit statuses.
const checkStatuses = `exit status: 0 every node usable (warnings may remain); 1 a node a lock
cannot use (unreachable, refusing the URL's credentials, a replica, or a
second address of one server), or with --strict any warning; 69 fewer
than a quorum of nodes answered; 64 a usage error.
`

// serverJSON is one server in check --json.
type serverJSON struct {
	Node            int      `json:"node"`
	Addr            string   `json:"addr"`
	Reachable       bool     `json:"reachable"`
	Error           string   `json:"error,omitempty"`
	Version         string   `json:"version,omitempty"`
	RunID           string   `json:"run_id,omitempty"`
	Role            string   `json:"role,omitempty"`
	MasterAddr      string   `json:"master,omitempty"`
	UptimeSeconds   int64    `json:"uptime_s,omitempty"`
	MaxmemoryPolicy string   `json:"maxmemory_policy,omitempty"`
	AppendOnly      string   `json:"appendonly,omitempty"`
	AppendFsync     string   `json:"appendfsync,omitempty"`
	ClockOffsetMs   float64  `json:"clock_offset_ms"`
	RoundTripMs     float64  `json:"round_trip_ms"`
	Warnings        []string `json:"warnings"`
}

func checkCmd(args []string) error {
	fs := flag.NewFlagSet("redlock check", flag.ContinueOnError)
	var nf nodeFlag
	nf.register(fs)
	strict := fs.Bool("strict", false, "exit 1 on any warning")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, "[--nodes NODE,...] [--strict] [--json]", checkStatuses, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fs, "unexpected argument %q", fs.Arg(0))
	}
	nodes, err := nf.open()
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	warnFewNodes("redlock check", len(nodes))
	r, err := nodecheck.Run(context.Background(), clients(nodes))
	if err != nil {
		return err
	}
	if *asJSON {
		err = printCheckJSON(r)
	} else {
		printCheck(r)
	}
	switch {
	case err != nil:
		return err
	case r.Reachable < r.Quorum:
		return exit(exitUnavailable, "only %d of %d nodes answered, fewer than the quorum of %d", r.Reachable, len(nodes), r.Quorum)
	case len(r.Unusable) > 0:
		return exit(1, "%s cannot be used by a lock (the warnings say why)", nodeList(r.Unusable))
	case *strict && len(r.Warnings) > 0:
		return exit(1, "%d warning(s), --strict", len(r.Warnings))
	}
	return nil
}

func printCheck(r *nodecheck.Report) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "node\taddress\trole\tversion\tmaxmemory-policy\tappendonly\tappendfsync\tuptime\tclock offset\trun_id")
	for _, s := range r.Servers {
		if s.Err != nil { // the warnings below say why
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\n", s.Node, cell(s.Addr), unreadable(s.Err))
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%v\t%v (±%v)\t%s\n", s.Node, cell(s.Addr), cell(s.Role), cell(s.Version), cell(s.MaxmemoryPolicy),
			cell(s.AppendOnly), cell(s.AppendFsync), s.Uptime, s.ClockOffset, (s.RoundTrip / 2).Round(time.Microsecond), cell(shortRunID(s.RunID)))
	}
	_ = tw.Flush()
	if len(r.Warnings) == 0 {
		fmt.Println("no warnings")
		return
	}
	fmt.Printf("%d warning(s):\n", len(r.Warnings))
	for _, w := range r.Warnings {
		fmt.Println("  - " + oneLine(w))
	}
}

// unreadable is what check's table says of a server it could not read.
func unreadable(err error) string {
	switch {
	case errors.Is(err, redlock.ErrAuth):
		return "auth refused"
	case errors.Is(err, redlock.ErrNoPermission):
		return "ACL refused"
	}
	return "unreachable"
}

// nodeList says which nodes: "node 2", "nodes 0, 2".
func nodeList(nodes []int) string {
	if len(nodes) == 1 {
		return fmt.Sprintf("node %d", nodes[0])
	}
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = strconv.Itoa(n)
	}
	return "nodes " + strings.Join(s, ", ")
}

// shortRunID is enough of a run_id to tell servers apart.
func shortRunID(id string) string {
	if r := []rune(id); len(r) > 8 {
		return string(r[:8]) + "…"
	}
	return id
}

func printCheckJSON(r *nodecheck.Report) error {
	out := struct {
		Quorum    int          `json:"quorum"`
		Reachable int          `json:"reachable"`
		Unusable  []int        `json:"unusable"`
		Servers   []serverJSON `json:"servers"`
		Warnings  []string     `json:"warnings"`
	}{Quorum: r.Quorum, Reachable: r.Reachable, Unusable: r.Unusable, Warnings: r.Warnings}
	if out.Unusable == nil {
		out.Unusable = []int{}
	}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	for _, s := range r.Servers {
		j := serverJSON{Node: s.Node, Addr: s.Addr, Reachable: s.Err == nil, Version: s.Version, RunID: s.RunID, Role: s.Role, MasterAddr: s.MasterAddr,
			UptimeSeconds: int64(s.Uptime / time.Second), MaxmemoryPolicy: s.MaxmemoryPolicy, AppendOnly: s.AppendOnly,
			AppendFsync: s.AppendFsync, ClockOffsetMs: ms(s.ClockOffset), RoundTripMs: ms(s.RoundTrip), Warnings: s.Warnings}
		if s.Err != nil {
			j.Error = s.Err.Error()
		}
		if j.Warnings == nil {
			j.Warnings = []string{}
		}
		out.Servers = append(out.Servers, j)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
