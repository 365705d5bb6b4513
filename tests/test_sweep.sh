#!/usr/bin/env bash
# mhar sweep / report / probe end to end on a tiny grid (nano, 3 schemes x 2
# seeds, 100 steps of 2 x 16 tokens; ~20 s on 2 cores):
#   - the corpus manifest found beside the token files is hashed into
#     sweep.json and every run.json, with the commit;
#   - the grid's errors name the field;
#   - the sweep is killed with SIGKILL once its first run is done and its
#     second is under way; started again (saved grid, 2 jobs) it retrains
#     nothing that finished and resumes the interrupted run, whose result is
#     bit-identical to an uninterrupted `mhar train` with the same options;
#   - a third start has nothing to do; a changed grid or a second sweep on the
#     same directory is refused;
#   - report.md / report.json hold every run, and their numbers match a
#     Python recomputation from metrics.jsonl (mean of the last 11
#     evaluations, mean / sample sd over seeds, paired difference);
#   - probe on the attnres and mhar runs, refused on baseline, and in the report;
#   - head counts run on different seeds are also compared on their common seeds.
set -u
cd "$(dirname "$0")/.."
M=${MHAR_BIN:-$PWD/mhar}
W=$(mktemp -d)
SWEEP_PID=
cleanup() {
    [ -n "$SWEEP_PID" ] && kill -KILL "$SWEEP_PID" 2>/dev/null
    # orphaned trainers (SIGTERM from PR_SET_PDEATHSIG) hold their run's lock until they exit
    for l in "$W"/sw/runs/*/.train.lock; do [ -f "$l" ] && timeout 20 flock "$l" true; done
    rm -rf "$W"
}
trap cleanup EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
expect_error() {   # NAME PATTERN CMD...: CMD fails and says PATTERN on stderr
    local name=$1 pattern=$2; shift 2
    local err; err=$("$@" 2>&1 >/dev/null); local rc=$?
    if [ $rc -ne 0 ] && grep -qiF -- "$pattern" <<<"$err"; then pass "$name"
    else fail "$name" "rc=$rc, stderr: $err"; fi
}

for c in sweep report probe; do
    if $M $c --help | grep -q usage; then pass "help_$c"; else fail "help_$c" "no usage text"; fi
done

$M data synth --out "$W/train.bin" --vocab 64 --count 50000 --seed 1 --kind pattern 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 5000 --seed 2 --kind pattern 2>/dev/null
echo '{"format": "mhar-corpus-1", "note": "a stand-in manifest beside the token files"}' >"$W/manifest.json"
RECIPE='"steps": 100, "batch": 2, "seq": 16, "eval_every": 5, "eval_batches": 2, "save_every": 5'
cat >"$W/grid.json" <<EOF
{"name": "test", "preset": "nano", "train": "train.bin", "val": "val.bin",
 "schemes": [{"residual": "baseline"}, {"residual": "attnres"}, {"residual": "mhar", "route_heads": [2]}],
 "seeds": [1, 2], $RECIPE}
EOF

# ---- grid errors name the field
echo '{"preset": "nano", "schemes": [{"residual": "mhar", "route_heads": 3}], "seeds": [1], "steps": 10, "eval_every": 5}' >"$W/bad1.json"
expect_error grid_heads_not_dividing "not divisible by attnres_num_heads 3" $M sweep --grid "$W/bad1.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "baseline"}], "seeds": [1], "steps": 10, "eval-every": 5}' >"$W/bad2.json"
expect_error grid_unknown_field "unknown field 'eval-every'" $M sweep --grid "$W/bad2.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "baseline"}], "steps": 10, "eval_every": 5}' >"$W/bad3.json"
expect_error grid_missing_seeds "field 'seeds' is required" $M sweep --grid "$W/bad3.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "attnres", "route_heads": 4}], "seeds": [1], "steps": 10}' >"$W/bad4.json"
echo '{"preset": "nano", "schemes": [{"residual": "baseline"}], "seeds": [1], "steps": 10, "eval_every": 5}' >"$W/bad7.json"
expect_error grid_needs_data "fields 'train' and 'val' are required" $M sweep --grid "$W/bad7.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "baseline"}], "seeds": [1], "steps": 10}' >"$W/bad6.json"
expect_error grid_too_few_steps_for_evals "eval_every 100 is more than steps 10" $M sweep --grid "$W/bad6.json" --out "$W/bad"
expect_error grid_attnres_heads "attnres is single-head" $M sweep --grid "$W/bad4.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "baseline"}], "seeds": [1], "steps": 10, "eval_every": 5, "train": "nope.bin", "val": "val.bin"}' >"$W/bad5.json"
expect_error grid_missing_data "nope.bin: cannot open" $M sweep --grid "$W/bad5.json" --out "$W/bad"

# ---- the routing queries' init is a scheme key: its runs are named apart,
# their command line and config carry it, and it is refused where it cannot apply
cat >"$W/qgrid.json" <<EOF
{"preset": "nano", "train": "train.bin", "val": "val.bin", "seeds": [1], "steps": 2, "batch": 2, "seq": 16,
 "eval_every": 1, "eval_batches": 1,
 "schemes": [{"residual": "attnres"}, {"residual": "attnres", "route_query_init": "normal"},
             {"residual": "mhar", "route_heads": [2], "route_query_init": "normal"}]}
EOF
qdry=$($M sweep --grid "$W/qgrid.json" --out "$W/qsw" --dry-run 2>&1)
qorder=$(awk 'NR>1 {print $1}' <<<"$qdry" | tr '\n' ' ')
if [ "$qorder" = "nano-attnres-s1 nano-attnres-qnormal-s1 nano-mhar-h2-qnormal-s1 " ]; then pass grid_query_init_names
else fail grid_query_init_names "order '$qorder'"; fi
if $M sweep --grid "$W/qgrid.json" --out "$W/qsw" --threads 1 >"$W/qsweep.log" 2>&1 && \
   grep -q '"route_query_init": "normal"' "$W/qsw/runs/nano-mhar-h2-qnormal-s1/config.json" && \
   grep -q '"route_query_init": "zero"' "$W/qsw/runs/nano-attnres-s1/config.json" && \
   grep -q -- '--route-query-init normal' "$W/qsw/runs/nano-attnres-qnormal-s1/train.log"; then
    pass grid_query_init_runs
else fail grid_query_init_runs "$(tail -5 "$W/qsweep.log")"; fi
echo '{"preset": "nano", "schemes": [{"residual": "hc", "route_query_init": "normal"}], "seeds": [1], "steps": 10, "eval_every": 5}' >"$W/bad8.json"
expect_error grid_query_init_not_routed "does not route; route_query_init does not apply" $M sweep --grid "$W/bad8.json" --out "$W/bad"
echo '{"preset": "nano", "schemes": [{"residual": "mhar", "route_query_init": "uniform"}], "seeds": [1], "steps": 10, "eval_every": 5}' >"$W/bad9.json"
expect_error grid_query_init_value 'route_query_init must be "zero" or "normal"' $M sweep --grid "$W/bad9.json" --out "$W/bad"

# ---- dry run: 6 runs, seed-major order, nothing trained
dry=$($M sweep --grid "$W/grid.json" --out "$W/sw" --dry-run 2>&1)
order=$(awk 'NR>1 {print $1}' <<<"$dry" | tr '\n' ' ')
want="nano-baseline-s1 nano-attnres-s1 nano-mhar-h2-s1 nano-baseline-s2 nano-attnres-s2 nano-mhar-h2-s2 "
if [ "$order" = "$want" ] && [ ! -e "$W/sw/runs/nano-baseline-s1" ]; then pass sweep_dry_run
else fail sweep_dry_run "order '$order'"; fi

# ---- first sweep, killed (SIGKILL) while its second run trains
R1=$W/sw/runs/nano-baseline-s1 R2=$W/sw/runs/nano-attnres-s1
$M sweep --grid "$W/grid.json" --out "$W/sw" --threads 1 >"$W/sweep1.log" 2>&1 &
SWEEP_PID=$!
for _ in $(seq 1 1200); do   # until run 2 has its first checkpoint (step 5 of 100)
    [ -f "$R2/checkpoint/state.json" ] && break
    kill -0 "$SWEEP_PID" 2>/dev/null || break
    sleep 0.05
done
kill -KILL "$SWEEP_PID" 2>/dev/null
wait "$SWEEP_PID" 2>/dev/null
SWEEP_PID=
timeout 30 flock "$R2/.train.lock" true   # the orphaned trainer got SIGTERM: it checkpoints and exits
step2=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" "$R2/checkpoint/state.json" 2>/dev/null)
step1=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" "$R1/checkpoint/state.json" 2>/dev/null)
if [ "${step1:-0}" = 100 ] && [ -n "$step2" ] && [ "$step2" -lt 100 ]; then pass sweep_killed_mid_run
else fail sweep_killed_mid_run "run 1 at step ${step1:-none}, run 2 at ${step2:-none} (the kill must land in run 2)"; fi
sum1=$(sha256sum "$R1/model.safetensors" | cut -c1-64)
mt1=$(sha256sum "$R1/metrics.jsonl" | cut -c1-64)

# ---- a second sweep on the same directory while one holds it: refused
flock -o "$W/sw/.sweep.lock" sleep 2 &   # -o: flock holds the lock, not sleep
LOCK_PID=$!
sleep 0.3
expect_error sweep_lock "another mhar sweep is running" $M sweep --out "$W/sw"
kill "$LOCK_PID" 2>/dev/null; wait "$LOCK_PID" 2>/dev/null

# ---- started again (saved grid, 2 jobs): finished runs skipped, run 2 resumed
if $M sweep --out "$W/sw" --jobs 2 --threads 1 >"$W/sweep2.log" 2>&1; then pass sweep_resume_exit_0
else fail sweep_resume_exit_0 "$(tail -5 "$W/sweep2.log")"; fi
if grep -q "6 of 6 runs done, 0 failed" "$W/sweep2.log" && grep -q "1 already done" "$W/sweep2.log"; then
    pass sweep_resume_completes
else fail sweep_resume_completes "$(cat "$W/sweep2.log")"; fi
starts() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(len(r['starts']), r['starts'][-1]['from_step'])" "$1/run.json"; }
if [ "$(sha256sum "$R1/model.safetensors" | cut -c1-64)" = "$sum1" ] && \
   [ "$(sha256sum "$R1/metrics.jsonl" | cut -c1-64)" = "$mt1" ] && [ "$(starts "$R1")" = "1 0" ] && \
   [ "$(grep -c '^==== sweep' "$R1/train.log")" = 1 ]; then pass sweep_finished_run_not_rerun
else fail sweep_finished_run_not_rerun "run 1 changed or restarted: starts $(starts "$R1")"; fi
# Each start names the OpenBLAS kernels it ran with: they round differently.
blas=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['starts'][-1].get('blas', ''))" "$R2/run.json")
if [[ "$blas" =~ ^OpenBLAS\ [0-9.]+,\ [A-Za-z0-9]+\ kernels ]]; then pass sweep_start_records_blas
else fail sweep_start_records_blas "starts[-1].blas = '$blas'"; fi
s2=$(starts "$R2")
if [ "${s2%% *}" = 2 ] && [ "${s2##* }" -gt 0 ] && grep -q "resuming" "$R2/train.log"; then pass sweep_interrupted_run_resumed
else fail sweep_interrupted_run_resumed "starts/from_step: $s2"; fi
if [ "$(grep -c '"loss"' "$R2/metrics.jsonl")" = 100 ] && [ "$(grep -c '"val_loss"' "$R2/metrics.jsonl")" = 20 ]; then
    pass sweep_resumed_metrics_complete
else fail sweep_resumed_metrics_complete "$(grep -c '"loss"' "$R2/metrics.jsonl") step lines"; fi
# the interrupted-and-resumed run equals one uninterrupted train with the same options
OMP_NUM_THREADS=1 $M train --out "$W/ref" --preset nano --residual attnres --train "$W/train.bin" --val "$W/val.bin" \
    --steps 100 --batch 2 --seq 16 --accum 1 --lr 0.0005 --warmup 5 --seed 1 --eval-every 5 --eval-batches 2 \
    --save-every 5 >/dev/null 2>&1
if cmp -s "$W/ref/model.safetensors" "$R2/model.safetensors"; then pass sweep_resume_bit_identical
else fail sweep_resume_bit_identical "resumed run differs from an uninterrupted train"; fi

# ---- third start: nothing to do
out3=$($M sweep --out "$W/sw" --threads 1 2>&1)
if grep -q "6 already done" <<<"$out3" && grep -q "6 of 6 runs done" <<<"$out3" && [ "$(starts "$R2")" = "$s2" ]; then
    pass sweep_all_done_noop
else fail sweep_all_done_noop "$out3"; fi
sed 's/"steps": 100/"steps": 120/' "$W/grid.json" >"$W/grid120.json"
expect_error sweep_changed_grid_refused "other settings than the grid now gives" $M sweep --grid "$W/grid120.json" --out "$W/sw"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert len(j['commit'])==40 or j['commit']=='unknown'; \
assert len(j['train_sha256'])==64 and all(r['status']=='done' for r in j['runs']) and len(j['runs'])==6; \
assert j['manifest_sha256']==sys.argv[2] and j['manifest'].endswith('/manifest.json'); \
r=json.load(open(sys.argv[3])); assert r['manifest_sha256']==sys.argv[2] and r['commit']==j['invocations'][0]['commit']" \
    "$W/sw/sweep.json" "$(sha256sum "$W/manifest.json" | cut -c1-64)" "$R1/run.json" \
    && pass sweep_json || fail sweep_json "$(head -c 400 "$W/sw/sweep.json")"

# ---- probe
pj=$($M probe --run "$R2" --batches 2 --draws 3 2>/dev/null | tail -n 1)
if python3 -c "import json,sys,math; d=json.loads(sys.argv[1]); assert d['probe']=='width_disagreement' and d['slices']==4; \
assert all(math.isfinite(d[k]) for k in ('trained','null','excess')) and abs(d['excess']-(d['trained']-d['null']))<1e-12; \
assert d['route_check']<1e-4 and len(d['sites'])==12 and d['tokens']==64" "$pj"; then pass probe_attnres
else fail probe_attnres "last line: $pj"; fi
pj=$($M probe --run "$W/sw/runs/nano-mhar-h2-s1" --batches 2 --draws 2 2>/dev/null | tail -n 1)
if python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['probe']=='head_deviation' and d['heads']==2; \
assert all(len(s['per_head'])==2 for s in d['sites'])" "$pj"; then pass probe_mhar
else fail probe_mhar "last line: $pj"; fi
expect_error probe_refuses_baseline "does not route" $M probe --run "$R1"

# ---- report: every run, numbers recomputed from metrics.jsonl
if $M report "$W/sw" >"$W/report.log" 2>&1; then pass report_exit_0; else fail report_exit_0 "$(cat "$W/report.log")"; fi
n_done=$(grep -cE '^\| nano-[a-z0-9-]+-s[12] \| [12] \| done \| 100/100 ' "$W/sw/report.md")
if [ "$n_done" = 6 ] && grep -q "^## Probe" "$W/sw/report.md" && grep -q "nano-attnres-s1 | width disagreement" "$W/sw/report.md"; then
    pass report_lists_every_run
else fail report_lists_every_run "$n_done of 6 runs listed as done, or no probe table"; fi
if python3 - "$W/sw" <<'EOF'
import json, math, statistics, sys
d = sys.argv[1]
rep = json.load(open(f"{d}/report.json"))
def metric(run):
    ev = [json.loads(l)["val_loss"] for l in open(f"{d}/runs/{run}/metrics.jsonl") if "val_loss" in l]
    tail = ev[-11:]
    return sum(tail) / len(tail)
groups = {g["method"]: g for g in rep["groups"]}
assert set(groups) == {"baseline", "attnres", "mhar-h2"}, groups.keys()
for m, g in groups.items():
    v = [metric(f"nano-{m}-s{s}") for s in (1, 2)]
    assert g["n"] == 2 and g["min_evals_in_tail"] == 11
    assert abs(g["mean"] - statistics.mean(v)) < 1e-9, (m, g["mean"], v)
    assert abs(g["sd"] - statistics.stdev(v)) < 1e-9, (m, g["sd"], v)
    if m != "baseline":
        diff = [metric(f"nano-{m}-s{s}") - metric(f"nano-baseline-s{s}") for s in (1, 2)]
        p = g["minus_baseline"]
        assert p["n"] == 2 and abs(p["mean"] - statistics.mean(diff)) < 1e-9 and abs(p["sd"] - statistics.stdev(diff)) < 1e-9
        assert p["lower"] == sum(x < 0 for x in diff)
for r in rep["runs"]:  # flatness: least-squares slope of the last 11 evaluations, per 1000 steps
    ev = [json.loads(l) for l in open(f"{d}/runs/{r['name']}/metrics.jsonl") if "val_loss" in l][-11:]
    xs, ys = [e["step"] for e in ev], [e["val_loss"] for e in ev]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    assert abs(r["tail_slope_per_1k_steps"] - 1000 * b) < 1e-9, (r["name"], r["tail_slope_per_1k_steps"], 1000 * b)
EOF
then pass report_numbers_match_python; else fail report_numbers_match_python "report.json differs from a recomputation"; fi
if command -v gnuplot >/dev/null; then
    n_png=$(ls "$W/sw/plots/"*.png 2>/dev/null | wc -l)
    if [ "$n_png" -ge 4 ] && grep -q "plots/heads_nano.png" "$W/sw/report.md"; then pass report_plots
    else fail report_plots "$n_png PNGs"; fi
else
    if grep -q "gnuplot is not installed" "$W/sw/report.md"; then pass report_plots_without_gnuplot
    else fail report_plots_without_gnuplot "no note about the missing gnuplot"; fi
fi
expect_error report_not_a_sweep "cannot open" $M report "$W/nothing"

# ---- report: head counts run on different seeds are also compared on the seeds
# every H has (here mhar H = 2 loses seed 2: seed 1 only, from metrics.jsonl)
cp -r "$W/sw" "$W/sw1" && rm -rf "$W/sw1/runs/nano-mhar-h2-s2"
$M report "$W/sw1" >/dev/null 2>&1
line=$(grep "not all run on the same seeds" "$W/sw1/report.md")
if python3 - "$W/sw1" "$line" <<'EOF2'
import json, re, sys
d, line = sys.argv[1], sys.argv[2]
def metric(run):
    ev = [json.loads(l)["val_loss"] for l in open(f"{d}/runs/{run}/metrics.jsonl") if "val_loss" in l][-11:]
    return sum(ev) / len(ev)
m = re.search(r"seed every H has \(1\): H=1 ([0-9.]+), H=2 ([0-9.]+)\. Minimum at H=(\d+)", line)
assert m, line
a, b = metric("nano-attnres-s1"), metric("nano-mhar-h2-s1")
assert abs(float(m.group(1)) - a) < 6e-5 and abs(float(m.group(2)) - b) < 6e-5, (line, a, b)
assert int(m.group(3)) == (1 if a <= b else 2), line
EOF2
then pass report_heads_on_common_seeds; else fail report_heads_on_common_seeds "line: $line"; fi
if ! grep -q "not all run on the same seeds" "$W/sw/report.md"; then pass report_heads_same_seeds_no_extra_line
else fail report_heads_same_seeds_no_extra_line "the common-seeds line appears though every H has seeds 1 and 2"; fi
