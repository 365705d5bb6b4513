#!/usr/bin/env bash
# Limits at the command line: absurd flags and files are refused with the
# reason before anything is allocated for them (and nothing is written);
# numbers are parsed strictly. tests/test_limits.c checks the library side.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
$M data synth --out "$W/train.bin" --vocab 64 --count 5000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 1000 --seed 2 2>/dev/null
D="--train $W/train.bin --val $W/val.bin"

# Strict numbers: strtoull would take " -1" as 2^64 - 1, strtol skips spaces and '+'.
expect_error seed_minus_one "expects a non-negative integer" $M train --out "$W/x" $D --seed " -1"
expect_error steps_leading_space "expects an integer" $M train --out "$W/x" $D --steps " 5"
expect_error steps_plus_sign "expects an integer" $M train --out "$W/x" $D --steps +5
expect_error lr_leading_space "expects a number" $M train --out "$W/x" $D --lr " 0.1"
expect_error steps_over_range "out of range \[1, 1000000000000\]" $M train --out "$W/x" $D --steps 10000000000000
expect_error batch_over_int "out of range" $M train --out "$W/x" $D --batch 4294967297

# Sizes from flags, refused before the model or the activations are allocated.
expect_error seq_over_max_positions "sequence length 4096 exceeds max_position_embeddings 2048" \
    $M train --out "$W/x" $D --seq 4096
expect_error batch_times_seq "1048576 x sequence 2048 = 2147483648 tokens per micro-batch" \
    $M train --out "$W/x" $D --batch 1048576 --seq 2048
cat >"$W/huge.json" <<'J'
{"hidden_size": 4064, "num_hidden_layers": 1, "num_attention_heads": 16, "intermediate_size": 64,
 "vocab_size": 16777216}
J
expect_error config_needs_too_much_memory "needs [0-9.]+ GiB, more than" $M train --out "$W/x" --config "$W/huge.json" $D
cat >"$W/absurd.json" <<'J'
{"hidden_size": 1e15, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 1, "vocab_size": 64}
J
expect_error config_absurd_key "absurd.json: key 'hidden_size' is 1000000000000000, out of range" \
    $M train --out "$W/x" --config "$W/absurd.json" $D
if [ ! -e "$W/x/checkpoint" ] && [ ! -e "$W/x/model.safetensors" ]; then pass nothing_written_on_refusal
else fail nothing_written_on_refusal "files in $W/x: $(ls -A "$W/x")"; fi

# A token file claiming 2^60 tokens.
python3 - "$W/claims.bin" <<'PY'
import struct, sys
open(sys.argv[1], "wb").write(b"MHARTOK\0" + struct.pack("<IIQII", 1, 2, 1 << 60, 64, 0) + b"\0" * 64)
PY
expect_error token_count_2_60 "claims.bin: truncated: header says 1152921504606846976 tokens" \
    $M train --out "$W/x" --train "$W/claims.bin" --val "$W/val.bin"

# --eval-every 0 (end only) with more steps than an int holds: the saved
# option stays in range, so --resume takes the checkpoint.
$M train --out "$W/long" $D --batch 2 --seq 16 --steps 5000000000 --eval-every 0 --stop-at 1 2>/dev/null
if $M train --out "$W/long" --resume --stop-at 2 2>/dev/null; then pass eval_every_end_only_long_run
else fail eval_every_end_only_long_run "resume refused: $($M train --out "$W/long" --resume --stop-at 2 2>&1 | tail -n 1)"; fi

# Generation longer than the model's positions.
$M train --out "$W/r" --preset nano $D --batch 2 --seq 16 --steps 1 2>/dev/null
expect_error eval_batch_times_seq "tokens per micro-batch" \
    $M eval --run "$W/r" --data "$W/val.bin" --batch 1048576 --seq 2048
expect_error sample_over_max_positions "outside 1..max_position_embeddings 2048" \
    $M sample --run "$W/r" --prompt-tokens 1,2 --steps 2048
