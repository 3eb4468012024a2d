// Package script is the format of what the lock scripts store and answer,
// in one place: a Lock's token and prefixes and the values it writes
// (prefix and generation), how a stored value is read back (its holder,
// its chain, an earlier version's tombstone), a Lock's refusals key, the
// fencing counter's key and the fence
// arithmetic, and how each script's integer reply becomes a vote (a
// confirmation, a definite refusal with its cause, or an unknown outcome).
// The Lua lives in the repository's scripts/ and is embedded by the public
// package, which pairs each script with its reader here.
package script
