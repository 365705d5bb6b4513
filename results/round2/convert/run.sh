#!/usr/bin/env bash
# Experiment 4 of PLAN.md: mid-training conversion. For each seed s, from the
# final weights of the 6000-step baseline run BASE_DIR/nano-baseline-s$s (the name
# mhar sweep gives it: grid-6k-lr0.002.json has one lr, so no lr suffix)
# (experiment 1's best-lr phase), 3000 more steps twice with the same seed
# (the same data order) and the same re-warmed schedule:
#   (a) baseline:  mhar train --init-from BASE
#   (b) converted: mhar convert --run BASE --route-heads 8 --route-blocks 3,
#                  then mhar train --init-from CONVERTED
#   results/round2/convert/run.sh MHAR BASE_DIR LR OUT [SEEDS]
# MHAR: the binary, for both arms: one that records delta_mh's routing
# statistics and gates in routing.jsonl (commit after b00d364; the round's
# frozen a33a03a does not); LR: baseline's best lr from
# experiment 1; OUT: where the runs go (a sweep-like folder, OUT/runs/*).
# Resumable: a finished run is skipped, an interrupted one resumed.
# STEPS (default 3000) shortens the continued runs, for a smoke test only.
set -euo pipefail
mhar=$(realpath "$1") base_dir=$(realpath "$2") lr=$3 out=$(realpath -m "$4") seeds=${5:-"1 2 3"}
cd "$(dirname "$0")/../../.."   # repository root: data/full lives there
export OMP_NUM_THREADS=1
steps=${STEPS:-3000}
common=(--steps "$steps" --warmup 100 --lr "$lr" --batch 8 --seq 256 --eval-every 120 --eval-batches 8
        --save-every 300 --train data/full/train.bin --val data/full/val.bin)
train() { # run-dir, extra args...
    local dir=$1; shift
    if [ -f "$dir/checkpoint/state.json" ] && grep -Eq "\"step\":[[:space:]]*$steps," "$dir/checkpoint/state.json"; then return; fi
    if [ -f "$dir/checkpoint/state.json" ]; then "$mhar" train --out "$dir" --resume; return; fi
    "$mhar" train --out "$dir" "$@" "${common[@]}"
}
mkdir -p "$out/runs" "$out/converted"
for s in $seeds; do
    base=$base_dir/nano-baseline-s$s
    [ -f "$base/model.safetensors" ] || { echo "run.sh: $base: no model.safetensors" >&2; exit 1; }
    conv=$out/converted/nano-delta-mh-h8-n3-s$s
    [ -f "$conv/model.safetensors" ] || "$mhar" convert --run "$base" --out "$conv" --route-heads 8 --route-blocks 3
    train "$out/runs/cont-baseline-s$s" --init-from "$base" --seed "$s" &
    train "$out/runs/cont-delta-mh-s$s" --init-from "$conv" --seed "$s" &
    wait
done
