// Package engine runs rounds: one operation (an Op, a script with its keys
// and arguments) sent to every node in parallel, each under its own
// deadline, counted by a vote that trusts a node only once its server is
// identified, returning as soon as the outcome is decided while the rest
// finishes in the background (SendAndCount, Launch). It keeps each lock's
// calls to a node in order (Lanes), retries deletes until the key would
// have expired anyway, and carries to each node, in a write's command, its
// deadline on that node's clock, and in a delete's, the latest deadline of
// the writes it must keep from landing after it (clock.go).
// It knows no primitive: a caller brings its scripts, its readers and its
// vote rule (Spec, Tally), and a reply that never came is never a success.
package engine
