package sim

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
)

// staleHook is a hook of the simulator's go-redis clients: a command, or a
// pipeline, whose connection was dead before it was written (ErrStale:
// nothing of it was sent) goes again at once on another connection, up to
// tries times, as go-redis's pool check would have dropped the dead one
// before handing it out. go-redis does not retry it itself (the library's
// commands are sent once) and removes the connection (an error not of
// Redis's is a bad connection).
type staleHook struct{ tries int }

func (staleHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h staleHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		for i := 0; i < h.tries && errors.Is(err, ErrStale); i++ {
			cmd.SetErr(nil)
			err = next(ctx, cmd)
		}
		return err
	}
}

func (h staleHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for i := 0; i < h.tries && errors.Is(err, ErrStale); i++ {
			for _, cmd := range cmds {
				cmd.SetErr(nil)
			}
			err = next(ctx, cmds)
		}
		return err
	}
}
