#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each.
#
# Every fuzzed package's test binary is built by one `go test -c`, with the
# fuzzer's coverage instrumentation (-d=libfuzzer, what `go test -fuzz`
# adds) on this module's packages and on go-smtp (whose parser
# FuzzSMTPSession drives), and not on the rest: `go test -fuzz` builds one
# package at a time and instruments every dependency, so on a fresh
# machine it compiled SQLite, pgx, the MCP SDK and the rest once more, a
# third time beside the race and plain builds (5 min of this script's 8.5
# in a CI run). Here those come from the plain build the Linear pass
# made. The cost: coverage guides the fuzzer through our code and
# go-smtp's, not through the standard library's parsers that ours call.
#
# Each target then runs from its package's binary, one after the other,
# from the package's directory (where testdata/fuzz holds the seeds) and
# with the fuzz cache `go test -fuzz` uses, so that the inputs either finds
# serve the other. (Targets do not fuzz two at a time: several start a
# plane in every worker, and under a second fuzzer's load they spent their
# whole time gathering the baseline coverage and fuzzed nothing.)
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

dirs=$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u)
module=$(go list -m -f '{{.Path}}' | head -n 1)
# One binary per package, named for the package (go test -c -o DIR/).
if ! go test -c -o "$work/" -gcflags="$module/...=-d=libfuzzer" -gcflags='github.com/emersion/go-smtp/...=-d=libfuzzer' \
  $(sed 's|^|./|' <<<"$dirs"); then
  echo "FAIL: building the fuzz targets' test binaries"
  exit 1
fi

found=0
failed=0
for dir in $dirs; do
  name=$(go list -f '{{.Name}}' "./$dir")
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
