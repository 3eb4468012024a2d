#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck, a module
# that imports the library as a user's would, and the race-enabled tests of
# every module, chaos tests in containers included. Installs redis-server when
# it is missing (Debian/Ubuntu, as root or with sudo). Set
# REDLOCK_REQUIRE_DOCKER=1 to fail, not skip, without Docker.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then
  echo "test.sh: installing redis-server" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

# The library, then the nested modules, which have their own go.mod so that
# their dependencies stay out of the library's.
modules=(. compare cmd/redlock otel)

staticcheck="honnef.co/go/tools/cmd/staticcheck@v0.8.2"
for mod in "${modules[@]}"; do
  echo "== $mod: gofmt, vet, staticcheck"
  unformatted=$(cd "$mod" && gofmt -l .)
  if [ -n "$unformatted" ]; then
    echo "gofmt would change:"; echo "$unformatted"; exit 1
  fi
  (cd "$mod" && go vet ./... && go run "$staticcheck" ./...)
done

# A user's module sees the library's go.mod without its replace directives,
# so the library must resolve without any; and a user's plain go mod tidy
# must succeed and keep the user's go line.
echo "== a module that imports the library"
if grep -Eq '^[[:space:]]*replace\b' go.mod; then
  echo "go.mod has a replace directive, which a user's build ignores"; exit 1
fi
consumer=$(mktemp -d)
trap 'rm -rf "$consumer"' EXIT
cat >"$consumer/go.mod" <<MOD
module example.com/consumer

go 1.26.0

require github.com/redlock-go/redlock v0.0.0-00010101000000-000000000000

replace github.com/redlock-go/redlock => $PWD
MOD
cat >"$consumer/main.go" <<'GO'
package main

import (
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

func main() {
	_, _ = redlock.New([]redis.UniversalClient{redis.NewClient(&redis.Options{})})
}
GO
(cd "$consumer" && go mod tidy && go vet ./...)
if ! grep -qx 'go 1.26.0' "$consumer/go.mod"; then
  echo "go mod tidy raised the user's go line:"; grep '^go ' "$consumer/go.mod"; exit 1
fi

# One package at a time: the nodes, containers and tests share two cores.
echo "== tests"
go test -race -count=1 -p 1 -timeout 30m ./...
(cd cmd/redlock && go test -race -count=1 -timeout 10m ./...)
(cd otel && go test -race -count=1 -timeout 10m ./...)
(cd compare && go test -count=1 -timeout 10m ./...)
