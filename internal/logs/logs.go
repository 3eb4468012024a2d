// Package logs writes what a Client does to the slog.Logger of
// redlock.WithLogger: one method per event, each one line at the level the
// option documents. No line holds a token or a value. A nil *Log writes
// nothing, so that a Client without a logger pays one nil check.
package logs

import (
	"context"
	"log/slog"
	"time"
)

// Log is a Client's logger.
type Log struct{ l *slog.Logger }

// New returns the Log that writes to l, nil when l is nil.
func New(l *slog.Logger) *Log {
	if l == nil {
		return nil
	}
	return &Log{l}
}

func (g *Log) line(level slog.Level, msg string, attrs ...slog.Attr) {
	g.l.LogAttrs(context.Background(), level, msg, attrs...)
}

// Attempt logs an attempt of an Acquire (Debug).
func (g *Log) Attempt(key string, n int, elapsed time.Duration, err error) {
	if g != nil {
		g.line(slog.LevelDebug, "redlock: attempt", slog.String("key", key), slog.Int("attempt", n),
			slog.Duration("elapsed", elapsed), slog.Bool("acquired", err == nil), errAttr(err))
	}
}

// Done logs the end of a call, op its name (Debug).
func (g *Log) Done(op, key string, elapsed time.Duration, err error) {
	if g != nil {
		g.line(slog.LevelDebug, "redlock: "+op, slog.String("key", key), slog.Duration("elapsed", elapsed), errAttr(err))
	}
}

// NodeError logs a node's reply that is not a confirmation, timeout when
// none came in time (Debug).
func (g *Log) NodeError(op, key string, node int, addr string, timeout bool, err error) {
	if g != nil {
		g.line(slog.LevelDebug, "redlock: node did not confirm", slog.String("op", op), slog.String("key", key),
			slog.Int("node", node), slog.String("addr", addr), slog.Bool("timeout", timeout), errAttr(err))
	}
}

// Rollback logs the launch of a failed attempt's deletes (Debug).
func (g *Log) Rollback(key string, nodes int) {
	if g != nil {
		g.line(slog.LevelDebug, "redlock: rollback", slog.String("key", key), slog.Int("nodes", nodes))
	}
}

// CleanupRetry logs a delete parked to be tried again (Info).
func (g *Log) CleanupRetry(key string, node int, addr string, try int, wait time.Duration) {
	if g != nil {
		g.line(slog.LevelInfo, "redlock: delete to be tried again", slog.String("key", key), slog.Int("node", node),
			slog.String("addr", addr), slog.Int("try", try), slog.Duration("wait", wait))
	}
}

// CleanupAbandoned logs a delete that Close gave up (Warn).
func (g *Log) CleanupAbandoned(key string, node int, addr string, tries int, err error) {
	if g != nil {
		g.line(slog.LevelWarn, "redlock: delete given up by Close, the key expires with its TTL", slog.String("key", key),
			slog.Int("node", node), slog.String("addr", addr), slog.Int("tries", tries), errAttr(err))
	}
}

// Renewal logs a renewal of a kept-alive lock (Debug).
func (g *Log) Renewal(key string, elapsed time.Duration, err error) {
	if g != nil {
		g.line(slog.LevelDebug, "redlock: renewal", slog.String("key", key), slog.Duration("elapsed", elapsed), errAttr(err))
	}
}

// Lost logs a kept-alive lock that can no longer be proven held (Warn).
func (g *Log) Lost(key string, cause error) {
	if g != nil {
		g.line(slog.LevelWarn, "redlock: lock lost", slog.String("key", key), errAttr(cause))
	}
}

// errAttr is err's text, or nothing when err is nil.
func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("err", err.Error())
}
