//go:build !linux

package main

// becomeSubreaper does nothing where there are no subreapers: orphans go to
// init, which reaps them.
func becomeSubreaper() {}
