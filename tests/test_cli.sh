#!/usr/bin/env bash
# The command line as a user meets it: every command's --help, a short run,
# eval, sample, bit-identical resume, and a clear error (exit != 0, the file
# and the reason named, nothing written) for each kind of bad input.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh

for c in train eval sample bench data; do
    if $M $c --help | grep -q usage; then pass "help_$c"; else fail "help_$c" "no usage text"; fi
done

$M data synth --out "$W/train.bin" --vocab 64 --count 50000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 5000 --seed 2 2>/dev/null
T="--train $W/train.bin --val $W/val.bin --batch 4 --seq 32 --eval-every 4 --eval-batches 2"

# a short run writes the run directory
if $M train --out "$W/a" $T --steps 8 2>/dev/null && [ -f "$W/a/config.json" ] && [ -f "$W/a/model.safetensors" ] \
   && [ -f "$W/a/checkpoint/optimizer.safetensors" ] && [ "$(grep -c '"loss"' "$W/a/metrics.jsonl")" = 8 ]; then
    pass train_writes_run_dir
else fail train_writes_run_dir "missing files or metrics lines"; fi

# N steps + resume + N steps == 2N steps, bit for bit
$M train --out "$W/b" $T --steps 8 --stop-at 4 2>/dev/null
(cd "$W" && $M train --out b --resume 2>/dev/null)
if cmp -s "$W/a/model.safetensors" "$W/b/model.safetensors" && \
   cmp -s "$W/a/checkpoint/optimizer.safetensors" "$W/b/checkpoint/optimizer.safetensors"; then
    pass resume_bit_identical
else fail resume_bit_identical "parameters or optimizer state differ"; fi
if diff <(grep -v tok_per_s "$W/a/metrics.jsonl") <(grep -v tok_per_s "$W/b/metrics.jsonl") >/dev/null; then
    pass resume_metrics_identical
else fail resume_metrics_identical "metrics.jsonl differ"; fi
expect_error resume_option_mismatch "differs from the run's saved" $M train --out "$W/b" --resume --batch 8
expect_error run_dir_exists "already holds a run" $M train --out "$W/a" $T --steps 8

# eval and sample
out=$($M eval --run "$W/a" --data "$W/val.bin" --batch 4 --seq 32 --batches 3 2>/dev/null | tail -n 1)
if python3 -c "import json,sys,math; d=json.loads(sys.argv[1]); assert d['tokens']==384 and 0<d['val_loss']<10" "$out"; then
    pass eval_json
else fail eval_json "last line: $out"; fi
s1=$($M sample --run "$W/a" --prompt-tokens 1,2,3 --steps 10 --seed 5 2>/dev/null)
s2=$($M sample --run "$W/a" --prompt-tokens 1,2,3 --steps 10 --seed 5 2>/dev/null)
if [ "$(wc -w <<<"$s1")" = 13 ] && [ "$s1" = "$s2" ] && [[ $s1 == "1 2 3 "* ]]; then pass sample_reproducible
else fail sample_reproducible "'$s1' vs '$s2'"; fi
expect_error sample_prompt_out_of_vocab "not a token id" $M sample --run "$W/a" --prompt-tokens 1,999

# every residual scheme: train, resume bit-identically, eval, sample
for spec in "hc" "denseformer" "attnres" "mhar --route-heads 4" "block --route-heads 2 --route-blocks 2" \
            "delta_mh --route-heads 2 --route-blocks 3"; do
    name=${spec%% *}
    $M train --out "$W/s_$name" $T --residual $spec --steps 6 2>/dev/null
    $M train --out "$W/r_$name" $T --residual $spec --steps 6 --stop-at 3 2>/dev/null
    $M train --out "$W/r_$name" --resume 2>/dev/null
    if cmp -s "$W/s_$name/model.safetensors" "$W/r_$name/model.safetensors" && \
       grep -q "\"attnres_mode\": \"$name\"" "$W/s_$name/config.json"; then
        pass "scheme_${name}_train_resume"
    else fail "scheme_${name}_train_resume" "run missing, mode not recorded, or resume differs"; fi
    out=$($M eval --run "$W/s_$name" --data "$W/val.bin" --batch 4 --seq 32 --batches 2 2>/dev/null | tail -n 1)
    smp=$($M sample --run "$W/s_$name" --prompt-tokens 5 --steps 4 2>/dev/null)
    if [[ $out == *val_loss* ]] && [ "$(wc -w <<<"$smp")" = 5 ]; then pass "scheme_${name}_eval_sample"
    else fail "scheme_${name}_eval_sample" "eval '$out' sample '$smp'"; fi
done
table=$($M inspect --run "$W/s_mhar" 2>&1)
if grep -q "layers.5.mlp" <<<"$table" && grep -q "head3" <<<"$table" && grep -q "^final" <<<"$table"; then
    pass inspect_table
else fail inspect_table "$table"; fi
expect_error inspect_baseline "only attnres, mhar, block" $M inspect --run "$W/a"

# the llama family: train (mhar routing on it), resume, sample, inspect names it; --config reads it back
$M train --out "$W/llama" $T --family llama --residual mhar --route-heads 4 --steps 6 2>/dev/null
$M train --out "$W/llama_r" $T --family llama --residual mhar --route-heads 4 --steps 6 --stop-at 3 2>/dev/null
$M train --out "$W/llama_r" --resume 2>/dev/null
smp=$($M sample --run "$W/llama" --prompt-tokens 5 --steps 4 2>/dev/null)
if grep -q '"mhar_family": "llama"' "$W/llama/config.json" && ! grep -q "q_norm" "$W/llama/model.safetensors" && \
   cmp -s "$W/llama/model.safetensors" "$W/llama_r/model.safetensors" && [ "$(wc -w <<<"$smp")" = 5 ] && \
   $M inspect --run "$W/llama" | grep -q "^model: family llama, residual mhar H 4"; then
    pass family_llama_train_resume_sample_inspect
else fail family_llama_train_resume_sample_inspect "config, tensors, resume, sample '$smp' or inspect wrong"; fi
if $M train --out "$W/llama_cfg" $T --config "$W/llama/config.json" --steps 1 2>&1 | grep -q "llama family, mhar residual"; then
    pass family_from_config
else fail family_from_config "--config of a llama run did not train a llama model"; fi
expect_error family_unknown "--family 'gpt2' is unknown" $M train --out "$W/x" $T --family gpt2 --steps 1
expect_error route_heads_divide "not divisible by attnres_num_heads 3" $M train --out "$W/x" $T --residual mhar --route-heads 3 --steps 1

# bad input
expect_error unknown_flag "unknown flag '--bogus'" $M train --out "$W/x" --bogus 1
expect_error bad_number "expects an integer" $M train --out "$W/x" --steps 12x
expect_error unknown_command "unknown command" $M frobnicate
head -c 1000 "$W/train.bin" > "$W/trunc.bin"
expect_error truncated_tokens "trunc.bin.*truncated" $M train --out "$W/x" --train "$W/trunc.bin" --val "$W/val.bin"
python3 - "$W/badid.bin" <<'PY'
import struct, sys
toks = [1, 2, 3, 50, 4]
open(sys.argv[1], "wb").write(b"MHARTOK\0" + struct.pack("<IIQII", 1, 2, len(toks), 10, 0) + struct.pack("<5H", *toks))
PY
expect_error token_id_over_vocab "badid.bin.*50" $M eval --run "$W/a" --data "$W/badid.bin"
$M data synth --out "$W/big.bin" --vocab 1000 --count 5000 2>/dev/null
expect_error data_vocab_over_model "vocabulary 1000 is larger" $M eval --run "$W/a" --data "$W/big.bin"
cat > "$W/bad.json" <<'J'
{"hidden_size": 130, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
 "head_dim": 32, "intermediate_size": 64, "vocab_size": 64}
J
expect_error config_width_heads "bad.json.*(divisible|divide)" $M train --out "$W/x" --config "$W/bad.json" $T --steps 1
mkdir -p "$W/c"; cp "$W/a/config.json" "$W/c/"
head -c 5000 "$W/a/model.safetensors" > "$W/c/model.safetensors"
expect_error truncated_safetensors "c/model.safetensors.*truncated" $M eval --run "$W/c" --data "$W/val.bin"
if [ ! -e "$W/x/checkpoint" ] && [ ! -e "$W/x/model.safetensors" ]; then pass nothing_written_on_error
else fail nothing_written_on_error "files left in $W/x"; fi
# a fresh run whose token file fails to load: the error, exit status 1 (not a
# crash freeing a model that was never built), no checkpoint
err=$($M train --out "$W/y" --train "$W/train.bin" --val "$W/no-such.bin" --steps 2 2>&1 >/dev/null); rc=$?
if [ $rc -eq 1 ] && grep -q "no-such.bin" <<<"$err" && [ ! -e "$W/y/checkpoint" ]; then pass fresh_run_bad_token_file_exit_1
else fail fresh_run_bad_token_file_exit_1 "rc=$rc: $err"; fi
# the run options' flags come from one table: every one is in --help
help=$($M train --help)
missing=""
for f in preset config residual route-heads route-blocks train val steps batch seq accum lr warmup seed \
         eval-every eval-batches save-every max-bad-steps wd-exclude z-loss ema out init-from resume stop-at; do
    grep -q -- "--$f " <<<"$help" || missing="$missing $f"
done
if [ -z "$missing" ]; then pass train_help_every_option; else fail train_help_every_option "missing:$missing"; fi
# a flag given again on --resume that cannot apply: a note, the run goes on
err=$($M train --out "$W/b" --resume --residual mhar --train "$W/val.bin" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 0 ] && grep -q "note: --residual ignored on --resume" <<<"$err" && grep -q "note: --train ignored on --resume" <<<"$err"; then
    pass resume_notes_ignored_flags
else fail resume_notes_ignored_flags "rc=$rc: $err"; fi
