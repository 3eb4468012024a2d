// Package containertest runs real Redis servers in Docker containers so that
// tests can break them on purpose: kill a node and bring it back empty, freeze
// it, cut it off the network, or fail over from a master to its replica.
//
// It exists for the chaos test suite of the lock library: containers give
// faults that look like production (a frozen process whose kernel still
// accepts connections, a host that vanishes, a restart that loses every
// key), which an in-process fake cannot.
//
// # Images
//
// No registry has to be reachable. [Image] makes a tiny image with no base
// (like FROM scratch) out of the host's own redis-server (and redis-cli) plus
// the shared libraries they load, tags it [LocalImage] and reuses it
// afterwards. To use
// another image, such as the public "redis:7", set $REDLOCK_REDIS_IMAGE
// (see [ImageEnv]); the image must accept redis-server flags as its command,
// which the official images do. Redis 7 or newer is needed for
// --enable-debug-command.
//
// # Environment
//
//   - REDLOCK_REDIS_IMAGE: image to run instead of the locally built one.
//   - REDLOCK_REQUIRE_DOCKER=1: [Require] fails the test instead of skipping
//     it when no Docker engine answers (for CI, where a skip would hide a
//     broken setup). ./test.sh sets it unless it is set to something else.
//   - REDLOCK_SKIPPED_LOG: a file to which [Require] appends each test it
//     skips, for ./test.sh to list.
//   - TESTCONTAINERS_RYUK_DISABLED and TESTCONTAINERS_HOST_OVERRIDE: set to
//     "true" and "127.0.0.1" when this package is initialised, unless they
//     are already set. Ryuk is an image that would have to be pulled; the
//     override stops testcontainers from advertising an unreachable gateway
//     address when the tests themselves run inside a container.
//
// # Networking model
//
// Every node publishes its port 6379 on a fixed, free port of 127.0.0.1
// chosen below the kernel's ephemeral range, so that [Node.Addr] stays the
// same across [Node.Kill]/[Node.Restart] and [Node.Disconnect]/[Node.Reconnect]
// and no outgoing connection of the test process can take the port while the
// node is down. This assumes the Docker engine runs on the local host (a
// Docker socket, not a remote DOCKER_HOST).
//
// # Cleanup
//
// Containers and networks are removed by t.Cleanup. Ryuk is disabled, so a
// test binary killed from outside leaves them behind; they carry the
// [Label] label and can be removed with
//
//	docker rm -f $(docker ps -aq --filter label=org.redlock-go.containertest)
package containertest
