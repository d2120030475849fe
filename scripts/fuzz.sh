#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each.
#
# Each package's test binary is built once, with the fuzzer's coverage
# instrumentation (go test -c -fuzz), two packages at a time; then each
# target runs from its package's binary, one after the other, from the
# package's directory (where testdata/fuzz holds the seeds) and with the
# fuzz cache `go test -fuzz` uses, so that the inputs either finds serve
# the other. (Linking a test binary for every target took more time than
# fuzzing it. Targets do not fuzz two at a time: several start a plane in
# every worker, and under a second fuzzer's load they spent their whole
# time gathering the baseline coverage and fuzzed nothing.)
#
# A target fails when the fuzzer finds a failing input (it then writes it
# under testdata/fuzz/, to be committed as a regression seed) or when the
# test itself fails. Go's fuzzer sometimes ends a run whose time is up while
# it is still minimizing a new interesting input, and then reports "context
# deadline exceeded" with no failing input: that is the clock, not the
# code, and is not counted as a failure.
set -uo pipefail
time=${1:-5s}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cache=$(go env GOCACHE)/fuzz

# build DIR: builds DIR's test binary into $work, or writes why it failed
# to $work/DIR.build.
build() {
  local dir=$1 name out
  name=${dir//\//_}
  if ! out=$(go test -c -fuzz=. -o "$work/$name.test" "./$dir" 2>&1); then
    echo "$out" >"$work/$name.build"
  fi
}
export -f build
export work

dirs=$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u)
xargs -P 2 -I{} bash -c 'build "$1"' _ {} <<<"$dirs"

found=0
failed=0
for dir in $dirs; do
  name=${dir//\//_}
  if [ -f "$work/$name.build" ]; then
    cat "$work/$name.build"
    echo "FAIL: $dir (build)"
    failed=$((failed + 1))
    continue
  fi
  importpath=$(go list -f '{{.ImportPath}}' "./$dir")
  for target in $(grep -ohE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go | awk '{print $2}'); do
    found=$((found + 1))
    echo "fuzz $dir $target ($time)"
    out=$(cd "$dir" && "$work/$name.test" -test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$time" \
      -test.fuzzcachedir="$cache/$importpath" 2>&1)
    rc=$?
    echo "$out" | tail -n 3
    if grep -q "Failing input written to" <<<"$out" || { [ $rc -ne 0 ] && ! grep -q "context deadline exceeded" <<<"$out"; }; then
      echo "$out"
      echo "FAIL: $dir $target"
      failed=$((failed + 1))
    elif [ $rc -ne 0 ]; then
      echo "note: $target stopped while minimizing (context deadline exceeded), no failing input"
    fi
  done
done
echo "fuzz: $found targets, $failed failed"
[ "$failed" -eq 0 ]
