#!/usr/bin/env bash
# Runs every test: C binaries build/tests/test_*, Python tests/test_*.py and
# shell tests/test_*.sh. Each prints "PASS name" / "FAIL name: reason" lines.
# A program that exits non-zero without printing a FAIL counts as one failure.
# Last line: "N passed, N failed".
# $1 is the build directory (default build), passed on as MHAR_BUILD; the
# tests run the binary $MHAR_BIN (default ./mhar; make test sets it).
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
export MHAR_BIN=${MHAR_BIN:-$PWD/mhar}
# The Python references run in the project's .venv (./setup.sh --test makes it).
if [ -x .venv/bin/python3 ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
passed=0; failed=0
log=$(mktemp -d)
run_one() {
    local name=$1; shift
    local out="$log/$(basename "$name").out"
    local start=$SECONDS
    "$@" >"$out" 2>&1
    local rc=$?
    local p f
    p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1; echo "FAIL $name: exited with status $rc" >>"$out"
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        f=1; echo "FAIL $name: ran no check" >>"$out"
    fi
    passed=$((passed + p)); failed=$((failed + f))
    printf '%-34s %4d passed %3d failed  (%ds)\n' "$name" "$p" "$f" $((SECONDS - start))
    if [ "$f" -ne 0 ]; then grep -E '^FAIL ' "$out" | sed 's/^/    /'; tail -n 15 "$out" | sed 's/^/    | /'; fi
}
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d) continue;; esac
    run_one "$(basename "$t")" "$t"
done
for t in tests/test_*.sh; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t")" env MHAR_BUILD="$build" bash "$t"
done
for t in tests/test_*.py; do
    [ -f "$t" ] || continue
    run_one "$(basename "$t")" env MHAR_BUILD="$build" python3 "$t"
done
rm -rf "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
