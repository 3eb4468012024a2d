package testbed

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/internal/nodetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestBed: the clients of Clients go through the proxies, so that a fault
// there reaches them and not the direct clients; the looks read what the
// servers hold and have run.
func TestBed(t *testing.T) {
	b := Start(t, 2)
	require.Len(t, b.Servers, 2)
	require.Len(t, b.Proxies, 2)
	require.Len(t, b.Direct, 2)
	ctx := t.Context()
	cs := b.Clients(func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	require.Len(t, cs, 2)
	for i, c := range cs {
		require.NoError(t, c.Set(ctx, "k", "v"+string(rune('0'+i)), time.Minute).Err())
		assert.Equal(t, "v"+string(rune('0'+i)), b.Get(i, "k"))
	}
	assert.Empty(t, b.Get(0, "absent"))
	assert.Positive(t, b.Calls(1, "set"))
	assert.Zero(t, b.Calls(1, "del"))

	b.Proxies[0].SetBlackhole(true)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	assert.True(t, nodetest.IsTimeout(cs[0].Get(short, "k").Err()), "the fault did not reach the proxied client")
	assert.Equal(t, "v0", b.Get(0, "k"), "the direct client went through the proxy")
	b.ResetFaults()
	require.Eventually(t, func() bool { return cs[0].Get(ctx, "k").Val() == "v0" }, 5*time.Second, 10*time.Millisecond)

	// Clients called again are clients of their own.
	again := b.Clients(nil)
	assert.NotSame(t, cs[0], again[0])
	assert.Equal(t, b.Proxies[1].Addr(), again[1].(*redis.Client).Options().Addr)
}

// TestLoadScripts: every script of scripts/, as the library assembles it,
// is cached on every server.
func TestLoadScripts(t *testing.T) {
	b := Start(t, 2)
	b.LoadScripts()
	src := nodetest.ScriptSource(t, "acquire.lua")
	sum := sha1.Sum([]byte(src))
	for i, d := range b.Direct {
		ok, err := d.ScriptExists(t.Context(), hex.EncodeToString(sum[:])).Result()
		require.NoError(t, err)
		assert.Equal(t, []bool{true}, ok, "server %d", i)
	}
}
