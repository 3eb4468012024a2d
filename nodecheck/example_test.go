package nodecheck_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/nodecheck"
)

// A service that refuses to start on nodes that put the lock at risk.
func ExampleRun() {
	var nodes []redis.UniversalClient
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	report, err := nodecheck.Run(context.Background(), nodes)
	if err != nil {
		log.Fatal(err) // bad input only
	}
	if err := report.Err(); err != nil {
		log.Fatal(err) // each warning says what to change
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
}
