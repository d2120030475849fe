#!/usr/bin/env bash
# The long form of the reliability suite (make hardening-long), whose
# figures the table in docs/reliability.md reports: every fuzz target of the workspace for
# the given time each, with the executions it made, then the tests of
# internal/hardening with MAILPLANE_HARDENING=long. Logs go to
# .cache/hardening/; the summary (every FIGURE line and a table of fuzz
# executions) is printed at the end.
set -euo pipefail
time=${1:-60s}
cd "$(dirname "$0")/.."
out="$PWD/.cache/hardening"
mkdir -p "$out"
: >"$out/fuzz.txt"

# Tracked and new test files alike (every test file outside a git
# checkout): a target added since the last commit runs too.
while IFS= read -r file; do
  dir=$(dirname "$file")
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)' "$file" | awk '{print $2}'); do
    log="$out/fuzz-${dir//\//_}-$target.log"
    echo "fuzz $dir $target ($time)"
    result=ok
    if ! (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" . >"$log" 2>&1); then
      tail -30 "$log"
      echo "fuzz: $dir $target failed; its crasher is in $dir/testdata/fuzz/$target/ (log: $log)" >&2
      result=FAILED
      status=1
    fi
    execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | awk '{print $2}')
    printf '%-28s %-22s %12s %s\n' "$dir" "$target" "${execs:-0}" "$result" | tee -a "$out/fuzz.txt"
  done
done < <({ git ls-files --cached --others --exclude-standard '*_test.go' 2>/dev/null ||
  find . -name '*_test.go' -not -path './.cache/*' | sed 's#^\./##'; } | sort -u | xargs grep -l '^func Fuzz' || true)

echo "hardening tests, long form"
MAILPLANE_HARDENING=long CGO_ENABLED=1 go test -count=1 -timeout 60m -v ./internal/hardening/ >"$out/hardening.log" 2>&1 || status=1

echo
echo "== fuzz executions per target ($time each)"
cat "$out/fuzz.txt"
echo
echo "== figures"
grep -oE 'FIGURE .*' "$out/hardening.log" || true
grep -E '^(--- FAIL|FAIL|ok)' "$out/hardening.log" || true
exit "${status:-0}"
