package engine

import (
	"context"
	"runtime"
	"sync"
	"weak"

	"github.com/redis/go-redis/v9"
)

// A *redis.Client without ContextTimeoutEnabled holds a call until its
// reply comes or its ReadTimeout passes (5 s by default), whatever the
// call's context says; a call whose reply was lost keeps its connection
// that long, and a few lost replies leave the node's pool without a
// connection for anything else, deletes included. The library's commands
// (once) go through a copy of the client that has the option
// (redis.Client.WithTimeout shares the pool, but not the hooks): a hook on
// the user's client hands them to the copy, so that a call given up on
// frees its connection at its deadline, and the hooks added to the client
// before it still see every call. A Cluster or Ring client is left as it
// is (docs/observability.md).

// bounders maps a user's client, by its Options, to its bounded copy, so
// that one client shared by several Sets gets one hook.
var bounders sync.Map // weak.Pointer[redis.Options] -> *redis.Client

// bound hooks rc, once, so that the library's calls through it end at
// their context's deadline, and reports whether they now do.
func bound(rc *redis.Client) bool {
	key := weak.Make(rc.Options())
	if _, ok := bounders.Load(key); ok {
		return true
	}
	cp := rc.WithTimeout(0) // 0: the context's deadline is the only one
	if cp == rc || cp.Options() == rc.Options() {
		return false // not a copy: setting the option would change the user's client
	}
	cp.Options().ContextTimeoutEnabled = true
	if !boundsCalls(cp) {
		return false
	}
	if _, loaded := bounders.LoadOrStore(key, cp); loaded {
		return true
	}
	rc.AddHook(boundHook{cp})
	runtime.AddCleanup(rc.Options(), func(k weak.Pointer[redis.Options]) { bounders.Delete(k) }, key)
	return true
}

// boundHook hands the library's commands to to, and anything else on.
type boundHook struct{ to *redis.Client }

func (h boundHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h boundHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ours := cmd.(once); ours {
			return h.to.Process(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (h boundHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 {
			return next(ctx, cmds)
		}
		if _, ours := cmds[0].(once); !ours {
			return next(ctx, cmds)
		}
		_, err := h.to.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range cmds {
				_ = p.Process(ctx, c)
			}
			return nil
		})
		return err
	}
}
