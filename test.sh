#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck, and the
# race-enabled tests of every module, chaos tests in containers included.
# Installs redis-server when it is missing (Debian/Ubuntu, as root or with
# sudo). Set REDLOCK_REQUIRE_DOCKER=1 to fail, not skip, without Docker.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then
  echo "test.sh: installing redis-server" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

staticcheck="honnef.co/go/tools/cmd/staticcheck@v0.8.2"
for mod in . compare; do
  [ -f "$mod/go.mod" ] || continue
  echo "== $mod: gofmt, vet, staticcheck"
  unformatted=$(cd "$mod" && gofmt -l .)
  if [ -n "$unformatted" ]; then
    echo "gofmt would change:"; echo "$unformatted"; exit 1
  fi
  (cd "$mod" && go vet ./... && go run "$staticcheck" ./...)
done

# One package at a time: the nodes, containers and tests share two cores.
echo "== tests"
go test -race -count=1 -p 1 -timeout 30m ./...
if [ -f compare/go.mod ]; then
  (cd compare && go test -count=1 -timeout 10m ./...)
fi
