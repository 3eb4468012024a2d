package containertest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// RequireDockerEnv names the environment variable that turns a missing Docker
// engine from a skip into a failure (value "1"). CI sets it so that a broken
// Docker setup cannot pass silently as a run of skipped tests.
const RequireDockerEnv = "REDLOCK_REQUIRE_DOCKER"

// SkipLogEnv names the environment variable that, set to a file's path,
// makes [Require] append a line to that file for each test it skips, so
// that a script that allowed the skips can list them.
const SkipLogEnv = "REDLOCK_SKIPPED_LOG"

// Label is put on every container this package creates, so that containers
// left behind by a killed test binary (there is no Ryuk to reap them) can be
// found and removed.
const Label = "org.redlock-go.containertest"

// dockerTimeout bounds every single call to the Docker engine that is not
// bounded more tightly by its caller.
const dockerTimeout = 30 * time.Second

func init() {
	// testcontainers reads its configuration once, on first use, so the
	// defaults must be in place before any testcontainers call; init is the
	// only place that is guaranteed to run first.
	setDefaultEnv("TESTCONTAINERS_RYUK_DISABLED", "true")
	setDefaultEnv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
}

// setDefaultEnv sets key to value unless the user already set it.
func setDefaultEnv(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		_ = os.Setenv(key, value)
	}
}

var (
	dockerMu  sync.Mutex
	dockerCli *testcontainers.DockerClient
)

// withDocker runs fn with the package's shared Docker client, creating it on
// first use. Afterwards it drops the client's idle connections, as
// testcontainers does after each of its own calls: an idle keep-alive
// connection holds two goroutines, which goleak would report at the end of a
// test binary. Calls that are still running keep their connections.
func withDocker(ctx context.Context, fn func(cli *client.Client) error) error {
	dockerMu.Lock()
	cli := dockerCli
	if cli == nil {
		var err error
		cli, err = testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			dockerMu.Unlock()
			return fmt.Errorf("containertest: connect to Docker: %w", err)
		}
		dockerCli = cli
	}
	dockerMu.Unlock()

	defer func() { _ = cli.Close() }()
	return fn(cli.Client)
}

// available caches the answer of [Available]: whether an engine answers does
// not change during a test binary's life, and asking costs up to a timeout.
var available = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return withDocker(ctx, func(cli *client.Client) error {
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			return fmt.Errorf("containertest: ping Docker: %w", err)
		}
		return nil
	})
})

// Available returns nil if a Docker engine answers, and otherwise the reason
// it does not. It returns an error rather than a bool so that a skipped test
// can say why. The answer is computed once per process.
func Available() error {
	return available()
}

// Require skips the test when no Docker engine answers, or fails it when
// $REDLOCK_REQUIRE_DOCKER is "1" (as ./test.sh sets it unless told
// otherwise), so that container tests never fail on a laptop without
// Docker but cannot silently stop running in CI. A skip is logged to the
// file $REDLOCK_SKIPPED_LOG names, if set.
// [StartCluster] and [StartReplicated] call it themselves.
func Require(tb testing.TB) {
	tb.Helper()
	err := Available()
	if err == nil {
		return
	}
	if os.Getenv(RequireDockerEnv) == "1" {
		tb.Fatalf("containertest: Docker is required (%s=1) but not available: %v", RequireDockerEnv, err)
	}
	if path := os.Getenv(SkipLogEnv); path != "" {
		if f, ferr := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); ferr == nil {
			_, _ = fmt.Fprintf(f, "%s: %v\n", tb.Name(), err)
			_ = f.Close()
		}
	}
	tb.Skipf("containertest: skipping, Docker is not available (set %s=1 to fail instead): %v", RequireDockerEnv, err)
}
