package script

import (
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Inspected is one node's answer to the inspect script
// (scripts/inspect.lua): what holds the key, read without changing it.
type Inspected struct {
	// Held tells whether the node holds the key: by a holder, or by a
	// live share.
	Held bool
	// Token is the exclusive holder's whole token; empty when the key is
	// not held so.
	Token string
	// TTL is the key's remaining life: the exclusive holder's, -1 for a
	// key without expiry (not a lock's), or the longest live share's.
	TTL time.Duration
	// Fence is the key's fencing counter, 0 when none was read.
	Fence uint64
	// Count is n for a key taken by permits, 0 otherwise.
	Count int
	// Shares are the live entries of a key taken shared or by permits
	// (non-nil then, perhaps empty: none live is an absent key).
	Shares []Share
}

// Share is one shared Lock's or permit's live entry on a node.
type Share struct {
	Token string
	TTL   time.Duration
	Slot  int // a permit's; -1 for a shared Lock
}

// ReadInspect reads the inspect script's reply, {value, pttl, counter[,
// now]}.
func ReadInspect(cmd *redis.Cmd) (Inspected, error) {
	var r Inspected
	v, err := cmd.Slice()
	if err != nil {
		return r, err
	}
	if len(v) != 3 && len(v) != 4 {
		return r, Unexpected(v)
	}
	pttl, ok := v[1].(int64)
	if !ok {
		return r, Unexpected(v)
	}
	s, _ := v[0].(string)
	if len(v) == 4 {
		now, ok := v[3].(int64)
		if !ok || !strings.HasPrefix(s, "^") && !strings.HasPrefix(s, "#") {
			return r, Unexpected(v)
		}
		r.readShares(s, now)
	} else if token, ok := HolderToken(s); ok && s != "" {
		r.Token, r.Held = token, true
		r.TTL = time.Duration(pttl) * time.Millisecond
		if pttl < 0 { // no expiry: not a lock's key
			r.TTL = -1
		}
	}
	if s, ok := v[2].(string); ok {
		f, err := ParseInt(s)
		if err != nil {
			return r, err
		}
		r.Fence = uint64(f)
	}
	return r, nil
}

// readShares reads the shared Locks of a key taken shared, or the permits
// of a key taken by permits, whose value is s (scripts/lib.lua), at the
// node's clock now in milliseconds: those whose entry is live. None live is
// an absent key, as for a Lock.
func (r *Inspected) readShares(s string, now int64) {
	r.Shares = []Share{}
	entries := s[1:]
	if s[0] == '#' {
		count, rest, _ := strings.Cut(entries, ",")
		r.Count, _ = strconv.Atoi(count)
		entries = rest
	}
	for e := range strings.SplitSeq(entries, ",") {
		dl, item, ok := strings.Cut(e, "=")
		at, err := strconv.ParseInt(dl, 10, 64)
		if !ok || err != nil || at <= now || strings.HasPrefix(item, "!") {
			continue
		}
		slot := -1
		if r.Count > 0 {
			n, rest, ok := strings.Cut(item, "/")
			if slot, err = strconv.Atoi(n); !ok || err != nil {
				continue
			}
			item = rest
		}
		token, _ := HolderToken(item)
		ttl := time.Duration(at-now) * time.Millisecond
		r.Shares = append(r.Shares, Share{Token: token, TTL: ttl, Slot: slot})
		r.TTL = max(r.TTL, ttl)
	}
	r.Held = len(r.Shares) > 0
	if !r.Held {
		r.Count = 0
	}
}
