//go:build !linux

package main

import "time"

// raisePriority does nothing outside Linux: the killer's thread stays an
// ordinary one.
func raisePriority() bool { return false }

// sleepThread sleeps d.
func sleepThread(d time.Duration) { time.Sleep(d) }
