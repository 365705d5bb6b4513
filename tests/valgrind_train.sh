#!/usr/bin/env bash
# The training engine under valgrind memcheck (make valgrind): the nano model
# trains a few steps on a small synthetic token file (forward, backward,
# AdamW, an evaluation, a checkpoint), stops, and resumes for the last step.
# Any invalid read or write, conditional jump on uninitialised memory, bad
# free or definite leak makes valgrind exit 1. Not a tests/test_*.sh: it
# needs valgrind and a build without AVX-512 (see the Makefile).
set -eu
bin=${1:-build-valgrind/mhar}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# valgrind 3.19 decodes AVX2, not AVX-512: keep OpenBLAS on its Haswell kernels.
export OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
vg=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes --quiet)
"${vg[@]}" "$bin" data synth --out "$W/train.bin" --vocab 512 --count 4000 --seed 1
"${vg[@]}" "$bin" data synth --out "$W/val.bin" --vocab 512 --count 1000 --seed 2
run=(--out "$W/run" --preset nano --train "$W/train.bin" --val "$W/val.bin" --steps 3 --batch 2 --seq 32
     --eval-every 2 --eval-batches 1 --save-every 1)
"${vg[@]}" "$bin" train "${run[@]}" --stop-at 2
"${vg[@]}" "$bin" train --out "$W/run" --resume
"${vg[@]}" "$bin" eval --run "$W/run" --data "$W/val.bin" --batch 2 --seq 32 --batches 1 >/dev/null
echo "valgrind: mhar data synth, train (3 steps, stopped and resumed), eval: no error"
