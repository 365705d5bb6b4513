#!/usr/bin/env bash
# Data-parallel training under mpirun (ZeRO-1), on a tiny model:
#   - N ranks × --accum K against one process with --accum N·K, every scheme
#     (N = 2 and 3): the same losses and the same final weights and
#     optimizer state, bit for bit;
#   - a repeated N-rank run is bit-identical;
#   - a run checkpointed on 2 ranks resumes on 1 and one from 1 on 2, ending
#     bit-identical to the uninterrupted run;
#   - the same with the continued-training recipe (--wd-exclude, --z-loss,
#     --ema: the EMA sharded like the optimizer state and gathered to save);
#   - SIGTERM to mpirun: every rank stops after the same step, one
#     checkpoint, exit 0, and --resume ends bit-identical;
#   - one rank given a corrupt token file: a clear error naming the rank,
#     non-zero exit, no hang; a rank that dies ends the job.
set -u
SECONDS=0
cd "$(dirname "$0")/.."
source tests/lib.sh
# One thread per process, the same in every run compared (the kernels' sums
# do not depend on the thread count, but this keeps 3 ranks on 2 cores sane).
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
MPI="timeout 300 mpirun --allow-run-as-root --oversubscribe"
# Under the sanitizer build (make asan-test): Open MPI never frees what
# MPI_Init allocates, in components it unloads at exit (so no suppression can
# name them); leak checking stays on in every single-process test, which runs
# the same training code through the same data-parallel module at one rank.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"

$M data synth --out "$W/train.bin" --vocab 64 --count 20000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 2000 --seed 2 2>/dev/null
cat >"$W/tiny.json" <<'J'
{"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 16, "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 64}
J
D="--train $W/train.bin --val $W/val.bin --batch 2 --seq 16 --eval-every 4 --eval-batches 5 --steps 8"
A="--config $W/tiny.json $D"

# same_run REF DIR: final weights, optimizer state and metrics (without the
# timing field) are byte-identical.
same_run() {
    cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
        cmp -s "$1/checkpoint/optimizer.safetensors" "$2/checkpoint/optimizer.safetensors" &&
        diff <(sed 's/"tok_per_s":[^,]*,//' "$1/metrics.jsonl") <(sed 's/"tok_per_s":[^,]*,//' "$2/metrics.jsonl") >/dev/null
}
check() { if eval "$2"; then pass "$1"; else fail "$1" "$3"; fi; }
ckpt_step() { sed -n 's/^[[:space:]]*"step":[[:space:]]*\([0-9]*\).*/\1/p' "$1/checkpoint/state.json" 2>/dev/null | head -n 1; }

# delta_mh starts from a converted baseline model.
$M train --out "$W/base" $A --residual baseline 2>/dev/null
$M convert --run "$W/base" --out "$W/delta" --route-heads 4 2>/dev/null

for s in baseline hc denseformer attnres mhar block delta_mh; do
    case $s in
        delta_mh) B="$D --init-from $W/delta" ;;
        block) B="$A --residual block --route-blocks 2" ;;
        *) B="$A --residual $s" ;;
    esac
    for n in 2 3; do
        $M train --out "$W/$s.1x$n" $B --accum $((2 * n)) 2>"$W/$s.1x$n.log"
        $MPI -np $n $M train --out "$W/$s.${n}r" $B --accum 2 2>"$W/$s.${n}r.log"
        check "$s: $n ranks x accum 2 = 1 process x accum $((2 * n)), bit-identical" \
            "same_run $W/$s.1x$n $W/$s.${n}r" "$(tail -n 3 "$W/$s.${n}r.log")"
    done
done

# The continued-training recipe (weight decay off every class but the
# matrices, z-loss, an EMA held per shard like the moments and gathered into
# DIR/ema): 2 and 3 ranks cut the tensors at other places, the same bits.
same_ema() { same_run "$1" "$2" && cmp -s "$1/ema/model.safetensors" "$2/ema/model.safetensors"; }
C="$D --init-from $W/delta --wd-exclude all --z-loss 1e-4 --ema 0.9"
for n in 2 3; do
    $M train --out "$W/recipe.1x$n" $C --accum $((2 * n)) 2>/dev/null
    $MPI -np $n $M train --out "$W/recipe.${n}r" $C --accum 2 2>"$W/recipe.${n}r.log"
    check "recipe (--wd-exclude --z-loss --ema): $n ranks x accum 2 = 1 process x accum $((2 * n)), EMA included" \
        "same_ema $W/recipe.1x$n $W/recipe.${n}r" "$(tail -n 3 "$W/recipe.${n}r.log")"
done
$MPI -np 2 $M train --out "$W/recipe.r21" $C --accum 2 --stop-at 3 2>/dev/null
$M train --out "$W/recipe.r21" --resume 2>"$W/recipe.r21.log"
check "recipe: 2 ranks -> 1 process resume is bit-identical, EMA included" \
    "same_ema $W/recipe.1x2 $W/recipe.r21" "$(tail -n 2 "$W/recipe.r21.log")"

# Repeated runs at the same N.
$MPI -np 2 $M train --out "$W/rep" $A --residual mhar --accum 2 2>/dev/null
check "a repeated 2-rank run is bit-identical" "same_run $W/mhar.2r $W/rep" "differs"
grep -q "optimizer state .* per rank" "$W/mhar.2r.log" &&
    pass "the start line reports the optimizer state per rank" || fail "optimizer memory line" "$(head -3 "$W/mhar.2r.log")"
check "metrics.jsonl is written once (by rank 0)" \
    "[ \$(grep -c '\"loss\"' $W/mhar.2r/metrics.jsonl) -eq 8 ]" "$(grep -c loss "$W/mhar.2r/metrics.jsonl") loss lines"

# 2 ranks → 1 process and 1 process → 2 ranks, against mhar.1x2 (4 micro-batches a step).
$MPI -np 2 $M train --out "$W/r21" $A --residual mhar --accum 2 --stop-at 3 2>/dev/null
$M train --out "$W/r21" --resume 2>"$W/r21.log"
check "2 ranks -> 1 process resume is bit-identical" "same_run $W/mhar.1x2 $W/r21" "$(tail -n 2 "$W/r21.log")"
$M train --out "$W/r12" $A --residual mhar --accum 4 --stop-at 5 2>/dev/null
$MPI -np 2 $M train --out "$W/r12" --resume 2>"$W/r12.log"
check "1 process -> 2 ranks resume is bit-identical" "same_run $W/mhar.1x2 $W/r12" "$(tail -n 2 "$W/r12.log")"
$MPI -np 2 $M train --out "$W/r24" $A --residual mhar --accum 2 --stop-at 3 2>/dev/null
$MPI -np 4 $M train --out "$W/r24" --resume 2>"$W/r24.log"
check "2 ranks -> 4 ranks resume is bit-identical" "same_run $W/mhar.1x2 $W/r24" "$(tail -n 2 "$W/r24.log")"
$M train --out "$W/r13" $A --residual mhar --accum 4 --stop-at 2 2>/dev/null
expect_error "4 micro-batches a step do not resume on 3 ranks" "cannot be split evenly over 3 ranks" \
    $MPI -np 3 $M train --out "$W/r13" --resume
expect_error "--accum given on resume counts per rank" "accum" \
    $MPI -np 2 $M train --out "$W/r13" --resume --accum 4

# SIGTERM in the middle of a long run; the resumed run and an uninterrupted
# one are compared 20 steps after the stop (--stop-at).
L="--config $W/tiny.json --train $W/train.bin --val $W/val.bin --batch 2 --seq 16 --steps 100000 --eval-every 1000 --eval-batches 1 --save-every 1000"
steps_logged() { local n; n=$(grep -c '{"step":[0-9]*,"loss"' "$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
wait_steps() { for _ in $(seq 1 3000); do [ "$(steps_logged "$1")" -ge 5 ] && return; sleep 0.01; done; }
# (a) SIGUSR1 to mpirun: forwarded to every rank as it is; a clean stop, exit 0.
$MPI -np 2 $M train --out "$W/long" $L --residual attnres >"$W/long.log" 2>&1 &
pid=$!
wait_steps "$W/long"
kill -USR1 "$(pgrep -P $pid | head -n 1)"   # $pid is timeout's; its child is mpirun
wait $pid
rc=$?
step=$(ckpt_step "$W/long")
check "SIGUSR1 to mpirun: every rank stops after the same step with one checkpoint, exit 0" \
    "[ $rc -eq 0 ] && [ -n '$step' ] && grep -q 'signal 10: checkpoint saved at step $step' $W/long.log" \
    "rc=$rc, checkpoint step '$step': $(grep -v '^step' "$W/long.log" | tail -n 5)"
check "SIGUSR1: the metrics end at the checkpoint's step" \
    "[ \$(steps_logged $W/long) -eq '$step' ]" "$(steps_logged "$W/long") steps logged, checkpoint at $step"
end=$((${step:-0} + 20))
$MPI -np 2 $M train --out "$W/long" --resume --stop-at $end 2>/dev/null
$M train --out "$W/long.ref" $L --residual attnres --accum 2 --stop-at $end 2>/dev/null
check "SIGUSR1: --resume on 2 ranks is bit-identical to an uninterrupted run" "same_run $W/long.ref $W/long" "differs"
# (b) SIGTERM to mpirun: Open MPI sends SIGTERM to every rank and SIGKILL
# odls_base_sigkill_timeout seconds later (README); given the time, the
# ranks checkpoint the step they stop after. mpirun then exits non-zero.
$MPI --mca odls_base_sigkill_timeout 20 -np 2 $M train --out "$W/term" $L --residual mhar >"$W/term.log" 2>&1 &
pid=$!
wait_steps "$W/term"
kill -TERM "$(pgrep -P $pid | head -n 1)"
wait $pid
rc=$?
step=$(ckpt_step "$W/term")
check "SIGTERM to mpirun: one checkpoint of the last step, no hang" \
    "[ $rc -ne 124 ] && [ -n '$step' ] && [ \$(steps_logged $W/term) -eq '$step' ] && [ '$step' -lt 100000 ]" \
    "rc=$rc, step '$step', $(steps_logged "$W/term") steps logged: $(grep -v '^step' "$W/term.log" | tail -n 5)"
end=$((${step:-0} + 20))
$MPI -np 2 $M train --out "$W/term" --resume --stop-at $end 2>/dev/null
$M train --out "$W/term.ref" $L --residual mhar --accum 2 --stop-at $end 2>/dev/null
check "SIGTERM: --resume on 2 ranks is bit-identical to an uninterrupted run" "same_run $W/term.ref $W/term" "differs"
# (c) SIGTERM to one rank only: the ranks agree to stop after the same step; exit 0.
$MPI -np 2 $M train --out "$W/one" $L --residual mhar >"$W/one.log" 2>&1 &
pid=$!
wait_steps "$W/one"
launcher=$(pgrep -P $pid | head -n 1)   # mpirun, whose children are the ranks
kill -TERM "$(pgrep -P "$launcher" -f 'mhar train' | tail -n 1)"
wait $pid
rc=$?
step=$(ckpt_step "$W/one")
check "SIGTERM to one rank: all stop after the same step, one checkpoint, exit 0" \
    "[ $rc -eq 0 ] && [ -n '$step' ] && [ \$(steps_logged $W/one) -eq '$step' ] && grep -q 'checkpoint saved at step $step' $W/one.log" \
    "rc=$rc, step '$step': $(grep -v '^step' "$W/one.log" | tail -n 5)"

# Non-finite steps: a NaN in the checkpoint's weights makes every loss NaN;
# all ranks skip the same steps and stop together after --max-bad-steps.
N="$W/nan"
$MPI -np 2 $M train --out "$N" --config $W/tiny.json --train $W/train.bin --val $W/val.bin --batch 2 --seq 16 \
    --steps 30 --eval-every 10 --save-every 1 --stop-at 4 2>/dev/null
python3 - "$N/checkpoint/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
t["model.norm.weight"][0] = float("nan")
save_file(t, sys.argv[1] + ".new", metadata={"format": "pt"})
PY
mv "$N/checkpoint/model.safetensors.new" "$N/checkpoint/model.safetensors"
err=$($MPI -np 2 $M train --out "$N" --resume --max-bad-steps 3 2>&1 >/dev/null)
rc=$?
check "non-finite steps on 2 ranks: skipped together, then every rank stops naming the step" \
    "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'step 7: loss -\?nan' <<<\"\$err\" && grep -q '3 non-finite steps in a row' <<<\"\$err\" && [ \$(grep -c 'update skipped' <<<\"\$err\") -eq 2 ] && [ \$(ckpt_step $N) -eq 4 ]" \
    "rc=$rc: $(grep -v '^step' <<<"$err" | tail -n 4)"

# One rank's token file is corrupt (MPMD: rank 1 gets other arguments).
head -c 100 "$W/train.bin" >"$W/bad.bin"
BAD="--config $W/tiny.json --train $W/bad.bin --val $W/val.bin --batch 2 --seq 16 --steps 8"
err=$($MPI -np 1 $M train --out "$W/bad" $A : -np 1 $M train --out "$W/bad" $BAD 2>&1 >/dev/null)
rc=$?
check "a corrupt token file on rank 1: the error names rank 1 and the file" \
    "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'rank 1 on .*bad.bin' <<<\"\$err\"" "rc=$rc: $err"
check "... and nothing is trained" "[ ! -e $W/bad/checkpoint ]" "a checkpoint was written"

# A rank that dies mid-run ends the job (no hang), the last checkpoint intact.
$MPI -np 2 $M train --out "$W/die" $L --residual baseline --save-every 5 2>/dev/null &
pid=$!
for _ in $(seq 1 3000); do [ -n "$(ckpt_step "$W/die")" ] && break; sleep 0.01; done
victim=$(pgrep -f "train --out $W/die" | tail -n 1)
kill -KILL "$victim"
wait $pid
rc=$?
check "a killed rank ends the job with a non-zero status (no hang)" "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "rc=$rc"
check "... and the last checkpoint loads" \
    "$M eval --run $W/die/checkpoint --data $W/val.bin --batch 2 --seq 16 --batches 1 >/dev/null 2>&1" "it does not"

echo "[${SECONDS}s] done"
