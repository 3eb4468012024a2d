#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, vet, staticcheck, a module
# that imports the library as a user's would, the race-enabled tests of every
# module, chaos tests in containers included, and each benchmark once.
# Installs redis-server and libfaketime (the nemesis's clock faults) when
# they are missing (Debian/Ubuntu, as root or with sudo).
#
# Docker is required: without it the chaos suite fails. On a machine
# without Docker, REDLOCK_REQUIRE_DOCKER=0 ./test.sh runs everything else
# and lists, at the end, the tests it skipped.
set -euo pipefail
cd "$(dirname "$0")"

export REDLOCK_REQUIRE_DOCKER="${REDLOCK_REQUIRE_DOCKER:-1}"
scratch=$(mktemp -d)

# Each stage opens with "== name" and closes with "-- name: N s", and the run
# ends with its total, so that a log shows where the time went; a failing
# stage ends the run (set -e) and the exit names it.
suite_start=$SECONDS
stage_name=""
stage_start=$SECONDS
stage_done() {
  if [ -n "$stage_name" ]; then
    echo "-- $stage_name: $((SECONDS - stage_start)) s"
  fi
  stage_name=""
}
stage() {
  stage_done
  stage_name=$1
  stage_start=$SECONDS
  echo "== $1"
}
on_exit() {
  local rc=$?
  if [ "$rc" != 0 ]; then
    echo "test.sh: FAILED (exit $rc) in stage: ${stage_name:-setup}, after $((SECONDS - suite_start)) s" >&2
  fi
  rm -rf "$scratch"
}
trap on_exit EXIT
if [ "$REDLOCK_REQUIRE_DOCKER" != 1 ]; then
  export REDLOCK_SKIPPED_LOG="$scratch/skipped"
  : >"$REDLOCK_SKIPPED_LOG"
fi

missing=()
if ! command -v redis-server >/dev/null 2>&1 && [ ! -x /usr/bin/redis-server ]; then
  missing+=(redis-server)
fi
if [ -z "${LIBFAKETIME:-}" ] && ! compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null; then
  missing+=(libfaketime)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The repository carries sources, not builds: no tracked file is an
# executable binary (git's own test of binary, NUL bytes, with the exec bit
# or an executable's magic number) or over 1 MB.
stage "tracked files: no executable binary, none over 1 MB"
# Sizes and the text files are read in one process each, not one a file
# (hundreds of processes take a loaded machine most of a minute).
big=()
while IFS=' ' read -r -d '' size f; do
  if [ -f "$f" ] && [ "$size" -gt 1048576 ]; then
    big+=("$f: $size bytes, over 1 MB")
  fi
done < <(git ls-files -z | xargs -0 -r stat -L --printf '%s %n\0' -- 2>/dev/null)
declare -A text=()
while IFS= read -r f; do
  text[$f]=1
done < <(git grep -I -l -e '' -- . || true)
while IFS=$' \t' read -r mode _ _ f; do
  [ -s "$f" ] || continue
  if [ -n "${text[$f]:-}" ]; then
    continue
  fi
  magic=$(od -An -tx1 -N4 "$f" | tr -d ' \n')
  case "$mode:$magic" in
  100755:* | *:7f454c46 | *:cffaedfe | *:cefaedfe | *:feedfacf | *:feedface | *:4d5a*) big+=("$f: an executable binary") ;;
  esac
done < <(git ls-files -s)
if [ ${#big[@]} -gt 0 ]; then
  printf '%s\n' "${big[@]}"; exit 1
fi

# The library, then the nested modules, which have their own go.mod so that
# their dependencies stay out of the library's; go.work builds them against
# this checkout's library (their go.mod files replace nothing, so that they
# install as released: docs/operations.md).
modules=(. compare cmd/redlock otel internal/wasirun)

staticcheck="honnef.co/go/tools/cmd/staticcheck@v0.8.2"
for mod in "${modules[@]}"; do
  stage "$mod: gofmt, vet, staticcheck"
  unformatted=$(cd "$mod" && gofmt -l .)
  if [ -n "$unformatted" ]; then
    echo "gofmt would change:"; echo "$unformatted"; exit 1
  fi
  (cd "$mod" && go vet ./... && go run "$staticcheck" ./...)
done

# A user's module sees the library's go.mod without its replace directives,
# so the library must resolve without any; and a user's plain go mod tidy
# must succeed and keep the user's go line.
stage "a module that imports the library"
if grep -Eq '^[[:space:]]*replace\b' go.mod; then
  echo "go.mod has a replace directive, which a user's build ignores"; exit 1
fi
consumer="$scratch/consumer"
mkdir "$consumer"
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
# The nemesis runs on its own with -v, so that a passing run shows what it
# did (its summary and activity lines).
stage "tests: every package of the library's module"
go test -race -count=1 -p 1 -timeout 30m -skip '^TestNemesis$|^TestSim$|^TestSimHandovers$|^TestSimControls$' ./...
stage "tests: the nemesis"
go test -race -count=1 -timeout 25m -run '^TestNemesis$' -v .

# The simulator (docs/testing.md): its fixed seeds and a fresh one,
# $REDLOCK_SIM_DUR (two simulated minutes) each, every run deterministic
# (the package's tests built for wasip1 and run by internal/wasirun, two at
# once, one per core), and its controls, with -v for their lines; a failing
# seed's findings come again at the end of TestSim's output. Then the fixed
# seeds a simulated minute each in the run where Releases hand keys over
# (TestSimHandovers), and two of the seeds for a minute each under -race, in
# the test's own process (wasm has no race detector).
stage "simulator: fixed seeds, a fresh one, controls"
sim_dur="${REDLOCK_SIM_DUR:-2m}"
go test -c -o "$scratch/sim.test" ./internal/sim
(cd internal/sim && "$scratch/sim.test" -test.count=1 -test.timeout 30m -test.run '^TestSim$|^TestSimControls$' -test.v -sim.dur="$sim_dur" -sim.jobs=2)
stage "simulator: handovers"
(cd internal/sim && "$scratch/sim.test" -test.count=1 -test.timeout 30m -test.run '^TestSimHandovers$' -test.v -sim.dur=1m -sim.jobs=2)
stage "simulator: two seeds under -race"
go test -race -count=1 -timeout 15m -run '^TestSim$' ./internal/sim
# cmd/redlock's tests include TestReleaseInstallsOffline, which builds the
# command and a user's module from a module proxy on disk: minutes on a
# loaded machine.
stage "tests: cmd/redlock"
(cd cmd/redlock && go test -race -count=1 -timeout 25m ./...)
stage "tests: otel"
(cd otel && go test -race -count=1 -timeout 10m ./...)
stage "tests: compare"
(cd compare && go test -count=1 -timeout 10m ./...)
stage "tests: internal/wasirun"
(cd internal/wasirun && go test -count=1 -timeout 10m ./...)

# Each benchmark once, for the checks it makes (BenchmarkContention fails on
# overlapping holders): 100 iterations, so that contention has holders to
# overlap; the figures mean nothing at this size.
stage "benchmarks, once: the library's module"
go test -race -count=1 -p 1 -timeout 10m -run '^$' -bench . -benchtime 100x ./...
stage "benchmarks, once: otel"
(cd otel && go test -race -count=1 -timeout 10m -run '^$' -bench . -benchtime 100x ./...)

if [ -n "${REDLOCK_SKIPPED_LOG:-}" ]; then
  if [ -s "$REDLOCK_SKIPPED_LOG" ]; then
    echo "test.sh: REDLOCK_REQUIRE_DOCKER=$REDLOCK_REQUIRE_DOCKER: these tests were SKIPPED, Docker was not available:"
    sed 's/^/  /' "$REDLOCK_SKIPPED_LOG"
  else
    echo "test.sh: REDLOCK_REQUIRE_DOCKER=$REDLOCK_REQUIRE_DOCKER, but Docker answered: nothing was skipped"
  fi
fi

stage_done
echo "== total: $((SECONDS - suite_start)) s"
