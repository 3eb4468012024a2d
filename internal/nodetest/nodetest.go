// Package nodetest holds what tests do with a Redis node whatever runs it, a
// process (internal/redistest) or a container (internal/containertest): the
// faults both can apply, under the same names, the readiness PING both wait
// for, telling a deadline from another failure, a test's own look at a node
// (Look, Get, CommandCalls), and the library's scripts loaded on it as a
// running service has them (LoadScripts).
package nodetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Faults are the faults every test node can be put through, with the same
// meaning whatever runs it. No method takes a context: each is bounded by
// the node's own timeouts, so that a fault cannot hang a test.
type Faults interface {
	// Addr is where clients reach the node; it survives every fault.
	Addr() string
	// Kill crashes the node (SIGKILL). Without persistence every key is lost.
	Kill() error
	// Stop shuts the node down cleanly (SIGTERM, SIGKILL if it lingers).
	Stop() error
	// Restart brings the node back empty at the same address, killing it
	// first if it still runs, and returns once it answers PING.
	Restart() error
	// Pause freezes the node: connections are accepted, nothing is answered.
	Pause() error
	// Resume thaws a paused node; it answers what queued up meanwhile.
	Resume() error
}

// Per-attempt bound of Ping within WaitReady: short, so that a port owned by
// something that accepts and never answers does not eat the whole wait.
const pingAttempt = 250 * time.Millisecond

// Ping dials addr, sends PING in RESP and expects +PONG, within ctx. Raw
// RESP leaves no client pool or goroutine behind.
func Ping(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// ErrExited is returned by WaitReady when the server's process is gone.
var ErrExited = errors.New("nodetest: process exited during startup")

// WaitReady polls addr with Ping, on fresh connections, until it answers,
// ctx ends, or exited is closed (nil when there is no process to watch).
func WaitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	backoff := 5 * time.Millisecond
	var last error
	for {
		select {
		case <-exited:
			return ErrExited
		default:
		}
		actx, cancel := context.WithTimeout(ctx, pingAttempt)
		last = Ping(actx, addr)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG from %s: %w (last: %v)", addr, ctx.Err(), last)
		case <-exited:
			return ErrExited
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// IsTimeout reports whether err is a deadline, a context's or a socket's.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
