// Package engine runs rounds: one operation (an Op, a script with its keys
// and arguments) sent to every node in parallel, each under its own
// deadline, counted by a vote that trusts a node only once its server is
// identified, returning as soon as the outcome is decided while the rest
// finishes in the background (SendAndCount, Launch). It keeps each lock's
// calls to a node in order (Lanes), retries deletes until the key would
// have expired anyway, and leaves tombstones where a write may still land.
// It knows no primitive: a caller brings its scripts, its readers and its
// vote rule (Spec, Tally), and a reply that never came is never a success.
package engine
