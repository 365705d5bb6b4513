#!/bin/bash
# Experiment 2's seed-1 runs in the budget rule's order (STATUS.md), two
# chains of one thread each: A baseline, MHAR H 4, H 16; B attnres, MHAR H 8,
# hc. Run it again after an interruption: a sweep skips finished runs and
# resumes an interrupted one from its last checkpoint. MHAR H 2 is not here:
# it runs only when everything else is done.
set -u
cd "$(dirname "$0")"
. ./chains.sh
# The baseline lives in the sweep of grid-s1-lr0.002.json, whose next run
# would be H 2: continue it for one run only, and only until it is done.
# (--grid as well: on a machine that lost /work/sweeps the folder is new.)
baseline_done() { "$MHAR" sweep --grid grid-s1-lr0.002.json --out "$S/micro-s1-lr0.002" --dry-run | grep -q '^micro-baseline-s1 *done'; }
chain_a() {
    { baseline_done || sweep --grid grid-s1-lr0.002.json --out "$S/micro-s1-lr0.002" --max-runs 1; } &&
        sweep --grid grid-s1-lr0.002-mhar-h4.json --out "$S/micro-s1-mhar-h4" &&
        sweep --grid grid-s1-lr0.002-mhar-h16.json --out "$S/micro-s1-mhar-h16"
}
chain_b() {
    sweep --grid grid-s1-lr0.004-attnres.json --out "$S/micro-s1-attnres" &&
        sweep --grid grid-s1-lr0.002-mhar-h8.json --out "$S/micro-s1-mhar-h8" &&
        sweep --grid grid-s1-lr0.008-hc.json --out "$S/micro-s1-hc"
}
chain_a >> "$S/seed1-chain-a.log" 2>&1 &
chain_b >> "$S/seed1-chain-b.log" 2>&1 &
wait
