#!/bin/bash
# Experiment 2's seeds 2 and 3 for baseline, attnres and the best seed-1 H
# (MHAR H 4: 2.8839 against H 8 2.9487 and H 16 2.9881), STATUS.md's rule,
# in two chains of one thread each, ordered so that every finished pair of
# runs shares a seed: A baseline s2, MHAR H 4 s2, MHAR H 4 s3; B attnres s2,
# attnres s3, baseline s3. Run it again after an interruption: a sweep skips
# finished runs and resumes an interrupted one from its last checkpoint.
set -u
cd "$(dirname "$0")"
. ./chains.sh
chain_a() {
    sweep --grid grid-s2-lr0.002.json --out "$S/micro-s2-lr0.002" &&
        sweep --grid grid-s3-lr0.002-mhar-h4.json --out "$S/micro-s3-mhar-h4"
}
chain_b() {
    sweep --grid grid-s23-lr0.004-attnres.json --out "$S/micro-s23-attnres" &&
        sweep --grid grid-s3-lr0.002-baseline.json --out "$S/micro-s3-baseline"
}
chain_a >> "$S/seeds23-chain-a.log" 2>&1 &
chain_b >> "$S/seeds23-chain-b.log" 2>&1 &
wait
