// Package redisnode holds what the library and nodecheck both need to know
// about a user's node client: whether it is nil, its address, and the
// fields of its server's INFO.
package redisnode

import (
	"reflect"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IsNil reports a nil interface or an interface holding a nil pointer, which
// would otherwise panic on first use.
func IsNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// Addr returns the address of a plain client, the comma-joined seed
// addresses of a cluster client, and "" for any other client.
func Addr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return ""
}

// InfoFields reads INFO's "name:value" lines; section headers ("# Server")
// and blank lines are skipped.
func InfoFields(info string) map[string]string {
	fields := make(map[string]string)
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields
}
