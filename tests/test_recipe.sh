#!/usr/bin/env bash
# The continued-training recipe end to end, on a tiny model: a baseline run,
# `mhar convert`, then `mhar train --init-from` with --wd-exclude, --z-loss
# and --ema (the numbers themselves are checked against the float64
# reference in test_exact.py):
#   - re-warm-up: the continued run starts at step 1 with lr = peak/warmup;
#   - metrics: "loss" is the cross-entropy, "z_loss" the term beside it,
#     evaluations add "val_loss_ema";
#   - DIR/ema is a model directory: `mhar eval --run DIR/ema` gives the
#     val_loss_ema of the last evaluation; the EMA is not the model;
#   - --stop-at + --resume ends bit-identical (model, optimizer, EMA,
#     metrics), and a SIGKILL'd run resumes to the same;
#   - the recipe is kept on --resume, a bad class list is refused before
#     anything is written, and without the flags nothing changes (no z_loss,
#     no ema directory).
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
export OMP_WAIT_POLICY=passive
check() { if eval "$2"; then pass "$1"; else fail "$1" "$3"; fi; }

$M data synth --out "$W/train.bin" --vocab 64 --count 20000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 2000 --seed 2 2>/dev/null
cat >"$W/tiny.json" <<'J'
{"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 16, "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 64}
J
D="--train $W/train.bin --val $W/val.bin --batch 2 --seq 16 --eval-every 4 --eval-batches 3"
$M train --out "$W/base" --config "$W/tiny.json" $D --steps 8 2>/dev/null
$M convert --run "$W/base" --out "$W/conv" --route-heads 2 --route-blocks 1 >/dev/null 2>&1
R="--init-from $W/conv $D --steps 12 --lr 1e-3 --warmup 4 --wd-exclude all --z-loss 1e-4 --ema 0.9"

$M train --out "$W/a" $R 2>"$W/a.log"
first=$(head -n 1 "$W/a/metrics.jsonl")
check "re-warm-up: the continued run starts at step 1 with lr = peak / warmup" \
    "python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d[\"step\"]==1 and abs(d[\"lr\"]-2.5e-4)<1e-12' '$first'" \
    "first line: $first"
check "metrics: CE as loss, the z-loss term beside it, val_loss_ema at evaluations" \
    "python3 - $W/a/metrics.jsonl <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if 'loss' in r]
evals = [r for r in rows if 'val_loss' in r]
assert len(steps) == 12 and len(evals) == 3
assert all(0 < r['z_loss'] < 1e-4 * 2 * math.log(64) ** 2 for r in steps)   # lse near log V: term ~ C log(V)^2
assert all(0 < r['val_loss_ema'] < 10 and r['val_loss_ema'] != r['val_loss'] for r in evals)
PY" "$(head -n 3 "$W/a/metrics.jsonl")"
check "the start line names the recipe" "grep -q 'recipe: no weight decay on all, z-loss 0.0001, EMA 0.9' $W/a.log" \
    "$(head -n 3 "$W/a.log")"

ema=$(tail -n 1 "$W/a/metrics.jsonl" | python3 -c 'import json,sys; print("%.6f" % json.load(sys.stdin)["val_loss_ema"])')
out=$($M eval --run "$W/a/ema" --data "$W/val.bin" --batch 2 --seq 16 --batches 3 2>/dev/null | tail -n 1)
check "DIR/ema is a model directory: mhar eval on it gives the last val_loss_ema" \
    "[ -n '$ema' ] && python3 -c 'import json,sys; assert \"%.6f\" % json.loads(sys.argv[1])[\"val_loss\"] == sys.argv[2]' '$out' '$ema'" \
    "eval '$out', metrics '$ema'"
check "the EMA is not the model, and is saved in the checkpoint" \
    "! cmp -s $W/a/ema/model.safetensors $W/a/model.safetensors && cmp -s $W/a/ema/model.safetensors $W/a/checkpoint/ema.safetensors && cmp -s $W/a/ema/config.json $W/a/config.json" \
    "ema/ missing or equal to the model"

# same_run REF DIR: weights, optimizer state, EMA and metrics (no timing) identical.
same_run() {
    cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
        cmp -s "$1/checkpoint/optimizer.safetensors" "$2/checkpoint/optimizer.safetensors" &&
        cmp -s "$1/ema/model.safetensors" "$2/ema/model.safetensors" &&
        diff <(sed 's/"tok_per_s":[^,]*,//' "$1/metrics.jsonl") <(sed 's/"tok_per_s":[^,]*,//' "$2/metrics.jsonl") >/dev/null
}
$M train --out "$W/b" $R --stop-at 5 2>/dev/null
$M train --out "$W/b" --resume 2>/dev/null
check "--stop-at 5 and --resume: model, optimizer, EMA and metrics bit-identical" "same_run $W/a $W/b" "differs"

# SIGKILL mid-run (every step checkpointed), then --resume to 5 steps past the
# checkpoint: the same as a run stopped there without interruption.
L="--init-from $W/conv $D --steps 100000 --lr 1e-3 --warmup 4 --wd-exclude all --z-loss 1e-4 --ema 0.9 --save-every 1"
ckpt_step() { sed -n 's/^[[:space:]]*"step":[[:space:]]*\([0-9]*\).*/\1/p' "$1/checkpoint/state.json" 2>/dev/null | head -n 1; }
$M train --out "$W/k" $L 2>/dev/null &
pid=$!
for _ in $(seq 1 3000); do
    s=$(ckpt_step "$W/k")
    [ -n "$s" ] && [ "$s" -ge 3 ] && break
    sleep 0.01
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
s=$(ckpt_step "$W/k")
end=$((${s:-0} + 5))
$M train --out "$W/k" --resume --stop-at $end 2>/dev/null
$M train --out "$W/k.ref" $L --stop-at $end 2>/dev/null
check "SIGKILL mid-run and --resume: bit-identical, the EMA included" \
    "[ -n '$s' ] && [ '$s' -lt 100000 ] && same_run $W/k.ref $W/k" "differs (checkpoint of step ${s:-none})"

$M train --out "$W/c" $R --stop-at 3 2>/dev/null
expect_error "--ema given again on --resume must agree" "--ema 0.99 differs from the run's saved value 0.9" \
    $M train --out "$W/c" --resume --ema 0.99
expect_error "--wd-exclude given again on --resume must agree" "--wd-exclude norm differs" \
    $M train --out "$W/c" --resume --wd-exclude norm
expect_error "an unknown class is refused" "--wd-exclude: 'bias' is not a parameter class" \
    $M train --out "$W/x" $D --config "$W/tiny.json" --steps 2 --wd-exclude norm,bias
check "... before anything is written" "[ ! -e $W/x ]" "$(ls "$W/x" 2>&1)"

# Without the flags: the same metrics keys as ever, no ema directory.
$M train --out "$W/plain" --init-from "$W/conv" $D --steps 4 2>/dev/null
check "without the recipe flags: no z_loss, no val_loss_ema, no ema directory" \
    "! grep -q 'z_loss\|val_loss_ema' $W/plain/metrics.jsonl && [ ! -e $W/plain/ema ] && [ ! -e $W/plain/checkpoint/ema.safetensors ]" \
    "$(head -n 2 "$W/plain/metrics.jsonl")"
