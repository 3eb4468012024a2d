package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock"
)

// shell runs -c's command, as "/bin/sh -c command": flock(1) takes $SHELL,
// but a cron job's or a user's login shell (fish, csh) would read the same
// line otherwise on another machine; /bin/sh reads it the same everywhere.
const shell = "/bin/sh"

// nonblockFlag is -n, flock's --nonblock: --wait 0, one try.
type nonblockFlag struct{ wait *durationFlag }

func (f *nonblockFlag) String() string   { return "false" }
func (f *nonblockFlag) IsBoolFlag() bool { return true }

func (f *nonblockFlag) Set(s string) error {
	switch s {
	case "true":
		f.wait.d, f.wait.set = 0, true
	case "false":
	default:
		return fmt.Errorf("-n takes no value")
	}
	return nil
}

// given reports whether any of names was set on the command line.
func given(fs *flag.FlagSet, names ...string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || slices.Contains(names, f.Name) })
	return found
}

// shellFlag registers -c, flock's: a command line for /bin/sh.
func shellFlag(fs *flag.FlagSet) *string {
	return fs.String("c", "", "run `command` through "+shell+" -c, as flock -c does: one string, with nothing after --")
}

// commandLine returns the command to run: -c's through /bin/sh, or the
// arguments after the flags; a usage error when there is none, or both.
func commandLine(fs *flag.FlagSet, shellCmd string) ([]string, error) {
	switch {
	case given(fs, "c") && fs.NArg() > 0:
		return nil, usageError(fs, "-c with a command after it too (%q): give the command once, as -c 'command' or after --", fs.Arg(0))
	case given(fs, "c") && strings.TrimSpace(shellCmd) == "":
		return nil, usageError(fs, "-c with an empty command")
	case given(fs, "c"):
		return []string{shell, "-c", shellCmd}, nil
	case fs.NArg() == 0:
		return nil, usageError(fs, "no command to run: give it after --, or as -c 'command'")
	}
	return fs.Args(), nil
}

// holderTimeout bounds the look at the key's holders after a conflict.
const holderTimeout = time.Second

// holders says who holds keys, for a conflict's message: each holder a
// quorum holds, its metadata and how long before fewer than a quorum hold
// it; "" when the nodes could not say (they did not answer in time). The
// look comes after the attempt: the holder may have changed since.
func holders(locks *redlock.Client, keys []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), holderTimeout)
	defer cancel()
	addrs := make([]string, len(locks.Nodes()))
	for i, n := range locks.Nodes() {
		addrs[i] = n.Addr
	}
	notes := make([]string, len(keys))
	done := make(chan struct{}, len(keys))
	for i, key := range keys {
		go func() {
			defer func() { done <- struct{}{} }()
			ks, err := locks.Inspect(ctx, key)
			st := buildStatus(key, addrs, ks, err)
			if len(keys) == 1 || st.Verdict != verdictFree { // of several keys, those held
				notes[i] = holderNote(st)
			}
		}()
	}
	for range keys {
		<-done
	}
	var out []string
	for i, n := range notes {
		if n == "" {
			continue
		}
		if len(keys) > 1 {
			n = fmt.Sprintf("%q %s", keys[i], n)
		}
		out = append(out, n)
	}
	const most = 3
	if len(out) > most {
		out = append(out[:most], fmt.Sprintf("and %d more", len(out)-most))
	}
	return strings.Join(out, "; ")
}

// holderNote describes st's holders in a few words: "" when no quorum
// answered.
func holderNote(st *keyStatus) string {
	meta := func(md string) string {
		if md == "" {
			return ""
		}
		return fmt.Sprintf(" (metadata %q)", md)
	}
	left := func(ms int64) string {
		return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
	}
	switch st.Verdict {
	case verdictHeld:
		ttl := "no expiry"
		if ms, ok := st.holderTTL(); ok {
			ttl = left(ms) + " left"
		}
		return fmt.Sprintf("held by %s…%s, %s", st.Holder, meta(st.Metadata), ttl)
	case verdictShared:
		var hs []string
		for _, h := range st.SharedHolders {
			hs = append(hs, fmt.Sprintf("%s…%s, %s left", h.Holder, meta(h.Metadata), left(h.TTLMillis)))
		}
		return fmt.Sprintf("held shared by %s: %s", plural(st.Shared, "lock"), strings.Join(hs, "; "))
	case verdictPermits:
		var hs []string
		for _, h := range st.PermitHolders {
			hs = append(hs, fmt.Sprintf("slot %d by %s…%s, %s left", h.Slot, h.Holder, meta(h.Metadata), left(h.TTLMillis)))
		}
		return fmt.Sprintf("%d of %d permits held: %s", st.Permits, st.Count, strings.Join(hs, "; "))
	case verdictFree:
		return "free now (released since the attempt)"
	case verdictSplit:
		return "held by no quorum now (a holder expiring or another acquire under way)"
	}
	return ""
}

// holderTTL is how long before fewer than a quorum of nodes hold the
// quorum's holder (verdict held): the quorum-th longest of their TTLs;
// false when one of them has none (a value not written by the library).
func (st *keyStatus) holderTTL() (int64, bool) {
	var ttls []int64
	for _, n := range st.Nodes {
		if n.Held && n.Holder == st.Holder && len(n.Shared) == 0 && len(n.Permits) == 0 && n.TTLMillis != nil {
			if *n.TTLMillis < 0 {
				return 0, false
			}
			ttls = append(ttls, *n.TTLMillis)
		}
	}
	if len(ttls) < st.Quorum {
		return 0, false
	}
	slices.Sort(ttls)
	return ttls[len(ttls)-st.Quorum], true
}

// exitHelp is each subcommand's "Exit statuses" section, which -h prints
// after the flags and the command's other help.
var exitHelp = map[string]string{
	"redlock run": `Exit statuses:
  the command's   it ran under the lock to the end (128+n: killed by signal n)
  64              a usage error or a bad node, or a key held by another kind
                  of lock (--permits, --shared)
  69              fewer than a quorum of nodes reachable
  70              the lock was lost and the command stopped
  75              the lock was not acquired within --wait (-E or
                  --conflict-exit-code sets another, and then says nothing
                  on stderr, as -q does; --verbose says it anyway)
  126, 127        the command could not be started, or was not found
  128+n           redlock got signal n while waiting for the lock
`,
	"redlock elect": `Exit statuses:
  the command's   it exited while elect led (128+n: killed by signal n), or
                  after a signal elect forwarded to it
  64              a usage error or a bad node, or a key held by another kind
                  of lock (shared, permits)
  126, 127        the command could not be started, or was not found
  128+n           elect got signal n while it did not lead
elect never exits 69, 70 or 75: it campaigns through outages, and again
after a lost leadership.
`,
	"redlock status": `Exit statuses (the verdict, as a script tests it; the same with --json):
  0               held: a quorum holds the key (one lock, shared locks, or
                  permits)
  3               free: no node that answered holds it, and a quorum answered
  4               split: some nodes hold it, no quorum agrees on a holder (an
                  acquire under way, a lock expiring, leftovers)
  64              a usage error or a bad node
  69              unknown: fewer than a quorum of nodes answered
`,
	"redlock check": `Exit statuses:
  0               every node usable (warnings are printed)
  1               a node a lock cannot use (unreachable, refusing the
                  credentials, a replica, a second address of one
                  server), or --strict and a warning
  64              a usage error or a bad node
  69              fewer than a quorum of nodes answered
`,
	"redlock demo": `Exit statuses:
  0               the demo ran to its end
  1               it failed (a node could not be started or reached)
  64              a usage error or a bad node
`,
}
