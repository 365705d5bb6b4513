#!/usr/bin/env bash
# Runs every fuzz target of BUILD (default build-fuzz) for SECONDS each
# (default 60), JOBS at a time (default: the number of cores), starting from
# its committed seeds fuzz/corpus/NAME/. New inputs go to BUILD/corpus/NAME/,
# crash inputs and logs to BUILD/crashes/. Prints one line per target with its
# executions; exits non-zero if any target crashed, leaked, hung (-timeout)
# or went over the memory limit.
set -u
cd "$(dirname "$0")/.."
build=${1:-build-fuzz} seconds=${2:-60} jobs=${3:-$(nproc)}
rm -f "$build"/crashes/*.rc
mkdir -p "$build/crashes"
run_target() {
    local bin=$1 name=${1##*/fuzz_}
    local log="$build/crashes/$name.log"
    mkdir -p "$build/corpus/$name"
    # -timeout: one input taking over 10 s is a hang. -rss_limit_mb also caps
    # single allocations (libFuzzer's malloc limit), so a size taken from the
    # input and allocated before it is checked shows up as a crash.
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$name-" "$build/corpus/$name" "fuzz/corpus/$name" >"$log" 2>&1
    local rc=$? runs
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        printf 'PASS fuzz_%s: %s executions in %s s, no crash\n' "$name" "${runs:-?}" "$seconds"
    else
        printf 'FAIL fuzz_%s: exit %d after %s executions; log %s\n' "$name" $rc "${runs:-?}" "$log"
        grep -E 'ERROR|SUMMARY|property violated|Test unit written' "$log" | head -n 8 | sed 's/^/    /'
    fi
    return $rc
}
for bin in "$build"/fuzz_*; do
    [ -x "$bin" ] || continue
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
    ( run_target "$bin"; echo $? >"$build/crashes/${bin##*/fuzz_}.rc" ) &
done
wait
failed=0
for bin in "$build"/fuzz_*; do
    [ -x "$bin" ] || continue
    [ "$(cat "$build/crashes/${bin##*/fuzz_}.rc" 2>/dev/null)" = 0 ] || failed=1
done
exit $failed
