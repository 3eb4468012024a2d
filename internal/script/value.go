package script

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/redlock-go/redlock/internal/engine"
)

// WriteArgs are the arguments every writing script takes: the value, the
// TTL in milliseconds, a prefix and the generation. The acquire scripts take
// the holder's prefix (takeHolder), the others the Lock's own.
func WriteArgs(v Value, ttlMs any, takeHolder bool) [engine.MaxArgs]any {
	prefix := v.Prefix
	if takeHolder {
		prefix = v.Holder
	}
	return [engine.MaxArgs]any{v.S, ttlMs, prefix, v.Gen}
}

// Value is what one call writes under the key: the Lock's prefix and a
// generation. Values and TTLs travel to the scripts boxed (as any); the
// Lock boxes its prefixes once, not once per call.
type Value struct {
	Prefix any // the Lock's prefix, boxed
	Holder any // the holder's prefix, boxed: the same but for an owner's Lock
	Gen    uint64
	S      string // prefix + gen
}

// OwnerToken derives an owner's token: 25 base32 characters (125 bits) of
// a SHA-256 of the id, in the alphabet of random tokens, after a lower-case
// "o", which a random token never contains.
func OwnerToken(id string) string {
	sum := sha256.Sum256([]byte("redlock owner\x00" + id))
	return "o" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:17])[:25]
}

// Prefixes are what one Lock's values start with. A Lock's own prefix is its
// token and a dot; a Lock of an owner writes the owner's token, a tilde, an
// id of its own and a dot, so that any Lock of the owner may take the key
// over (the acquire scripts match the holder's prefix, up to the tilde)
// while each extends, commits and deletes only its own values.
type Prefixes struct {
	Token     string // the holder's token: random, or the owner's
	own       string
	ownArg    any // own, boxed once for every script call
	holderArg any // the holder's prefix, boxed: own, or an owner's part of it
}

// NewPrefixes draws a Lock's token from crypto/rand (26 base32 characters,
// 130 bits), or derives it from owner when isOwner (OwnerToken). Holder
// metadata md, if any, follows the Lock's own part of its prefix, encoded
// (MetaMark).
func NewPrefixes(owner string, isOwner bool, md string) Prefixes {
	meta := ""
	if md != "" {
		meta = MetaMark + metaEncoding.EncodeToString([]byte(md))
	}
	if !isOwner {
		p := Prefixes{Token: rand.Text()}
		p.own = p.Token + meta + "."
		p.ownArg = p.own
		p.holderArg = p.ownArg
		return p
	}
	p := Prefixes{Token: OwnerToken(owner)}
	p.own = p.Token + "~" + rand.Text()[:10] + meta + "."
	p.ownArg, p.holderArg = p.own, p.Token+"~"
	return p
}

// MetaMark starts a Lock's holder metadata in its prefix: a lower-case "m",
// which no token contains (random ones are upper-case base32, an owner's
// starts with "o"), followed by the metadata in upper-case base32 without
// padding. The scripts see letters and digits only, as in any prefix: no
// separator of theirs (".", "~", "|", ",", ":", "!") can come from a
// caller's text, so holder metadata changes nothing of what they do.
const MetaMark = "m"

var metaEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Metadata reads the holder metadata in token, as HolderToken read it from
// a node; "" when it holds none or none that decodes.
func Metadata(token string) string {
	_, enc, ok := strings.Cut(token, MetaMark)
	if !ok {
		return ""
	}
	md, err := metaEncoding.DecodeString(enc)
	if err != nil {
		return ""
	}
	return string(md)
}

// CheckMetadata says what is wrong with holder metadata md, "" if nothing
// is: at most max bytes of UTF-8 without control characters, as it is shown
// to operators as text.
func CheckMetadata(md string, max int) string {
	switch {
	case len(md) > max:
		return fmt.Sprintf("%d bytes, over %d", len(md), max)
	case !utf8.ValidString(md):
		return "not UTF-8"
	case strings.IndexFunc(md, unicode.IsControl) >= 0:
		return "a control character"
	}
	return ""
}

// Metadata is the holder metadata in the Lock's prefix, "" if none.
func (p *Prefixes) Metadata() string { return Metadata(strings.TrimSuffix(p.own, ".")) }

// At is the Lock's value of generation gen.
func (p *Prefixes) At(gen uint64) Value {
	return Value{Prefix: p.ownArg, Holder: p.holderArg, Gen: gen, S: p.own + strconv.FormatUint(gen, 10)}
}

// Any stands for every value of the Lock, for a delete of any of its
// generations: only its prefix is read.
func (p *Prefixes) Any() Value { return Value{Prefix: p.ownArg, Holder: p.holderArg} }

// Own is the Lock's own prefix, boxed.
func (p *Prefixes) Own() any { return p.ownArg }

// TakesOver reports whether the Lock's acquire may take over another Lock
// of its owner: only an owner's Lock does.
func (p *Prefixes) TakesOver() bool { return p.ownArg != p.holderArg }

// Mine reports whether token, as HolderToken read it from a node, is this
// Lock's own.
func (p *Prefixes) Mine(token string) bool { return token+"." == p.own }

// HolderToken reads a key's stored value: the token of the Lock that wrote
// it, or ok false for a value that starts with "!" (an earlier version's
// tombstone, an absent key to every lock, lib.lua). What an owner's
// pending takeover replaced follows a "|" (take.lua), and what an earlier
// version carried a ","; the generation follows the last dot before them.
func HolderToken(stored string) (token string, ok bool) {
	if strings.HasPrefix(stored, "!") {
		return "", false
	}
	token, _, _ = strings.Cut(stored, ",")
	token, _, _ = strings.Cut(token, "|")
	if dot := strings.LastIndexByte(token, '.'); dot >= 0 {
		token = token[:dot]
	}
	return token, true
}
