#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each.
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
found=0
failed=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    found=$((found + 1))
    echo "fuzz $dir $target ($time)"
    out=$(cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" . 2>&1)
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
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
echo "fuzz: $found targets, $failed failed"
[ "$failed" -eq 0 ]
