#!/usr/bin/env bash
# Runs every fuzz target of the workspace for the given time each.
set -euo pipefail
time=${1:-5s}
cd "$(dirname "$0")/.."
found=0
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    found=$((found + 1))
    echo "fuzz $dir $target ($time)"
    (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" . )
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
echo "fuzz: $found targets"
