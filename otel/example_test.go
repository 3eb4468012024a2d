package redlockotel_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	redlockotel "github.com/redlock-go/redlock/otel"
)

// The example runs against three real local servers, started on first use
// and stopped by TestMain.
var examples struct {
	once    sync.Once
	servers []*redistest.Server
	err     error
}

func exampleAddrs() []string {
	examples.once.Do(func() { examples.servers, examples.err = redistest.Start(3) })
	if examples.err != nil {
		panic(examples.err)
	}
	addrs := make([]string, len(examples.servers))
	for i, s := range examples.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

func stopExampleServers() {
	for _, s := range examples.servers {
		_ = s.Close()
	}
}

// Example reports a lock's life to OpenTelemetry. In-memory exporters stand
// in for a service's own (OTLP, stdout, ...); leave out the With*Provider
// options to use the global providers.
func Example() {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	var nodes []redis.UniversalClient
	for _, addr := range exampleAddrs() { // "10.0.0.1:6379", ...
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	hooks := redlockotel.Hooks(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp))
	// A node deadline of a second rather than the one derived from the TTL
	// (50 ms for 10 s): the output below is checked on busy test machines,
	// where a reply later than that adds the redlock.node.errors metric.
	locks, err := redlock.New(nodes, redlock.WithHooks(hooks), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer locks.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := locks.Acquire(ctx, "orders:42", 10*time.Second)
	if err != nil {
		fmt.Println("not locked:", err)
		return
	}
	_ = lock.Release(ctx)

	for _, s := range spans.GetSpans() {
		fmt.Println("span", s.Name, len(s.Events), "event(s)")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		fmt.Println("metric", m.Name)
	}
	// Output:
	// span redlock.acquire 1 event(s)
	// span redlock.release 0 event(s)
	// metric redlock.attempts
	// metric redlock.operation.duration
}

// readmeOtel is the code block of docs/observability.md, as its body: its
// snippet test in the root module compares the two.
func readmeOtel(nodes []redis.UniversalClient) (*redlock.Client, error) {
	// The hooks report to the global providers; give each Client its own Hooks().
	return redlock.New(nodes, redlock.WithHooks(redlockotel.Hooks()))
}
