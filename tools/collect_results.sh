#!/usr/bin/env bash
# Gathers the runs of one or more sweep directories into a results folder
# (run.json, config.json, metrics, routing statistics, probe results, the
# checkpoint's state.json; no weights), then writes the report there with mhar report.
#   tools/collect_results.sh OUT SWEEP_DIR/runs/RUN ...
set -euo pipefail
out=$1; shift
mkdir -p "$out/runs"
for run in "$@"; do
    name=$(basename "$run")
    mkdir -p "$out/runs/$name"
    for f in run.json config.json metrics.jsonl routing.jsonl probe.json train.log; do
        [ -f "$run/$f" ] && cp "$run/$f" "$out/runs/$name/"
    done
    mkdir -p "$out/runs/$name/checkpoint"  # the state only (how far it ran), no weights
    cp "$run/checkpoint/state.json" "$out/runs/$name/checkpoint/"
done
./mhar report "$out"
