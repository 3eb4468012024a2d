// Package leadership lets the simulator (internal/sim) follow an
// Election's leaderships as the Locks they are: its recorder judges Locks
// by their handles (token, fence, validity), which a Leadership hides
// from users on purpose, so that a leader cannot extend or release it
// behind its campaign's back.
package leadership

// Lock returns the *redlock.Lock of a *redlock.Leadership, as any; set by
// package redlock when it is initialized.
var Lock func(leadership any) any
