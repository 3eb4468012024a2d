package redisnode_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redlock-go/redlock/internal/redisnode"
)

func TestIsNil(t *testing.T) {
	var nilClient *redis.Client
	assert.True(t, redisnode.IsNil(nil))
	assert.True(t, redisnode.IsNil(nilClient), "a nil pointer in the interface")
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	assert.False(t, redisnode.IsNil(c))
}

func TestAddr(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	t.Cleanup(func() { _ = cc.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	assert.Equal(t, "127.0.0.1:1", redisnode.Addr(c))
	assert.Equal(t, "127.0.0.1:1,127.0.0.1:2", redisnode.Addr(cc))
	assert.Empty(t, redisnode.Addr(ring))
}

func TestInfoFields(t *testing.T) {
	info := "# Server\r\nredis_version:7.2.4\r\nrun_id:abc\r\n\r\n# Persistence\r\naof_enabled:0\r\nmaster_failover_state:no-failover\r\n"
	assert.Equal(t, map[string]string{
		"redis_version":         "7.2.4",
		"run_id":                "abc",
		"aof_enabled":           "0",
		"master_failover_state": "no-failover",
	}, redisnode.InfoFields(info))
}
