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

// line writes one line with ctx, the values of the call it belongs to (a
// handler may take a trace id from it), at level.
func (g *Log) line(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	g.l.LogAttrs(ctx, level, msg, attrs...)
}

// Attempt logs an attempt of an Acquire (Debug).
func (g *Log) Attempt(ctx context.Context, key string, n int, elapsed time.Duration, err error) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: attempt", slog.String("key", key), slog.Int("attempt", n),
			slog.Duration("elapsed", elapsed), slog.Bool("acquired", err == nil), errAttr(err))
	}
}

// Done logs the end of a call, op its name (Debug).
func (g *Log) Done(ctx context.Context, op, key string, elapsed time.Duration, err error) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: "+op, slog.String("key", key), slog.Duration("elapsed", elapsed), errAttr(err))
	}
}

// NodeError logs a node's reply that is not a confirmation, timeout when
// none came in time (Debug).
func (g *Log) NodeError(ctx context.Context, op, key string, node int, addr string, timeout bool, err error) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: node did not confirm", slog.String("op", op), slog.String("key", key),
			slog.Int("node", node), slog.String("addr", addr), slog.Bool("timeout", timeout), errAttr(err))
	}
}

// Rollback logs the launch of a failed attempt's deletes (Debug).
func (g *Log) Rollback(ctx context.Context, key string, nodes int) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: rollback", slog.String("key", key), slog.Int("nodes", nodes))
	}
}

// CleanupRetry logs a delete parked to be tried again (Info).
func (g *Log) CleanupRetry(ctx context.Context, key string, node int, addr string, try int, wait time.Duration) {
	if g != nil {
		g.line(ctx, slog.LevelInfo, "redlock: delete to be tried again", slog.String("key", key), slog.Int("node", node),
			slog.String("addr", addr), slog.Int("try", try), slog.Duration("wait", wait))
	}
}

// CleanupAbandoned logs a delete that Close gave up (Warn).
func (g *Log) CleanupAbandoned(ctx context.Context, key string, node int, addr string, tries int, err error) {
	if g != nil {
		g.line(ctx, slog.LevelWarn, "redlock: delete given up by Close, the key expires with its TTL", slog.String("key", key),
			slog.Int("node", node), slog.String("addr", addr), slog.Int("tries", tries), errAttr(err))
	}
}

// Renewal logs a renewal of a kept-alive lock (Debug).
func (g *Log) Renewal(ctx context.Context, key string, elapsed time.Duration, err error) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: renewal", slog.String("key", key), slog.Duration("elapsed", elapsed), errAttr(err))
	}
}

// Lost logs a kept-alive lock that can no longer be proven held (Warn).
func (g *Log) Lost(ctx context.Context, key string, cause error) {
	if g != nil {
		g.line(ctx, slog.LevelWarn, "redlock: lock lost", slog.String("key", key), errAttr(cause))
	}
}

// CampaignStarted logs the start of a campaign (Debug).
func (g *Log) CampaignStarted(ctx context.Context, key string) {
	if g != nil {
		g.line(ctx, slog.LevelDebug, "redlock: campaign", slog.String("key", key))
	}
}

// Elected logs a campaign that won, after elapsed (Info).
func (g *Log) Elected(ctx context.Context, key string, term uint64, elapsed time.Duration) {
	if g != nil {
		g.line(ctx, slog.LevelInfo, "redlock: elected", slog.String("key", key), slog.Uint64("term", term), slog.Duration("elapsed", elapsed))
	}
}

// LeadershipEnded logs the end of a leadership that lasted elapsed: Warn
// when it was lost, Info when it was resigned or its Client closed.
func (g *Log) LeadershipEnded(ctx context.Context, key string, term uint64, elapsed time.Duration, lost bool, cause error) {
	if g != nil {
		level := slog.LevelInfo
		if lost {
			level = slog.LevelWarn
		}
		g.line(ctx, level, "redlock: leadership ended", slog.String("key", key), slog.Uint64("term", term),
			slog.Duration("elapsed", elapsed), slog.Bool("lost", lost), errAttr(cause))
	}
}

// LeaderObserved logs a leader that an observer reports (Info).
func (g *Log) LeaderObserved(ctx context.Context, key string, term uint64) {
	if g != nil {
		g.line(ctx, slog.LevelInfo, "redlock: leader observed", slog.String("key", key), slog.Uint64("term", term))
	}
}

// errAttr is err's text, or nothing when err is nil.
func errAttr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String("err", err.Error())
}
