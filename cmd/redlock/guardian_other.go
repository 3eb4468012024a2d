//go:build !linux

package main

import (
	"os"
	"os/exec"
)

// selfPath is redlock's own binary, for the gate and the guardian.
func selfPath() (string, error) {
	return os.Executable()
}

// startPinned starts cmd. Without a parent-death signal here, the guardian
// alone stops the command when redlock dies.
func startPinned(cmd *exec.Cmd) (unpin func(), err error) {
	return func() {}, cmd.Start()
}
