#!/usr/bin/env bash
# mhar convert (SPEC §2.7): a tiny baseline run (nano, 3 steps) is converted
# to delta_mh and must compute exactly what it computed before:
#   - the converted directory holds the base tensors byte for byte plus four
#     delta tensors per sublayer at their identity init;
#   - tool_dump's logits (and loss) are bit-identical for base and converted;
#   - mhar eval prints the identical val_loss string, mhar sample the
#     identical tokens (greedy, and sampled with a fixed seed);
#   - the converted model trains (tool_dump AdamW steps: its first loss is
#     the base's, res_alpha gets a gradient);
#   - clear errors, with nothing written, for a non-baseline run, H not
#     dividing the width, too many blocks and an existing output directory.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
DUMP=${MHAR_BUILD:-build}/tests/tool_dump

$M data synth --out "$W/train.bin" --vocab 64 --count 20000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 5000 --seed 2 2>/dev/null
if ! $M train --out "$W/base" --preset nano --train "$W/train.bin" --val "$W/val.bin" --batch 4 --seq 32 \
        --steps 3 --lr 3e-3 --warmup 0 --eval-every 3 --eval-batches 2 2>/dev/null; then
    fail base_run "mhar train failed"; exit 1
fi

if out=$($M convert --run "$W/base" --out "$W/conv" --route-heads 4 --route-blocks 3 2>/dev/null) && \
   python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d['logits_identical'] and d['attnres_num_heads']==4" "$out" && \
   grep -q '"attnres_mode": "delta_mh"' "$W/conv/config.json" && grep -q '"attnres_num_heads": 4' "$W/conv/config.json" && \
   grep -q '"attnres_num_blocks": 3' "$W/conv/config.json" && [ -z "$(ls -d "$W"/conv.tmp.* 2>/dev/null)" ]; then
    pass convert_writes_run_dir
else fail convert_writes_run_dir "output '$out'"; fi

# The tensors: base ones byte-identical, the delta ones at identity init.
if msg=$(python3 - "$W/base/model.safetensors" "$W/conv/model.safetensors" <<'PY'
import array, json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
base, conv = load(sys.argv[1]), load(sys.argv[2])
for k, v in base.items():
    assert conv.get(k) == v, f"base tensor {k} changed"
want = {"_res_proj.weight": ([1, 128], 0.0), "_res_norm.weight": ([128], 1.0),
        "_null_source": ([128], 0.0), "_res_alpha": ([], 0.0)}
extra = sorted(set(conv) - set(base))
assert len(extra) == 6 * 2 * 4, f"{len(extra)} new tensors"
for k in extra:
    suffix = next(s for s in want if k.endswith(s))
    shape, value = want[suffix]
    assert conv[k][0] == shape, f"{k} shape {conv[k][0]}"
    assert set(array.array("f", conv[k][1])) == {value}, f"{k} not {value}"
print(f"{len(base)} base tensors identical, {len(extra)} delta tensors at init")
PY
); then pass "convert_tensors ($msg)"; else fail convert_tensors "$msg"; fi

# Logits bit for bit, through the test tool (forward + backward on one batch).
# Bytes of a tensor from a tool_dump file.
tensor_bytes() {
    python3 - "$1" "$2" <<'PY'
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
o = json.loads(b[8:8 + n])[sys.argv[2]]["data_offsets"]
print(hashlib.sha256(b[8 + n + o[0]:8 + n + o[1]]).hexdigest(), o[1] - o[0])
PY
}
if [ -x "$DUMP" ]; then
    "$DUMP" --run "$W/base" --tokens "$W/val.bin" --batch 2 --seq 32 --out "$W/base.st" 2>/dev/null
    "$DUMP" --run "$W/conv" --tokens "$W/val.bin" --batch 2 --seq 32 --out "$W/conv.st" 2>/dev/null
    lb=$(tensor_bytes "$W/base.st" logits); lc=$(tensor_bytes "$W/conv.st" logits)
    sb=$(tensor_bytes "$W/base.st" loss); sc=$(tensor_bytes "$W/conv.st" loss)
    if [ -n "$lb" ] && [ "$lb" = "$lc" ] && [ "${lb##* }" = $((2 * 32 * 64 * 4)) ] && [ "$sb" = "$sc" ]; then
        pass logits_bit_identical
    else fail logits_bit_identical "base '$lb' converted '$lc'"; fi
    # Trainable: the first loss of an AdamW run is the base's, res_alpha has a gradient.
    "$DUMP" --run "$W/base" --tokens "$W/val.bin" --batch 2 --seq 32 --out "$W/base.tr" --steps 3 --lr 1e-3 --warmup 0 2>/dev/null
    "$DUMP" --run "$W/conv" --tokens "$W/val.bin" --batch 2 --seq 32 --out "$W/conv.tr" --steps 3 --lr 1e-3 --warmup 0 2>/dev/null
    if msg=$(python3 - "$W/base.tr" "$W/conv.tr" "$W/conv.st" <<'PY'
import array, json, math, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: array.array("f", b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
base, conv, fwd = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert base["losses"][0] == conv["losses"][0], f"first loss {base['losses'][0]} vs {conv['losses'][0]}"
assert all(math.isfinite(x) for x in conv["losses"]), "non-finite loss"
ga = [fwd[k][0] for k in fwd if k.startswith("grad.") and k.endswith("_res_alpha")]
assert len(ga) == 12 and all(g != 0 for g in ga), f"res_alpha grads {ga}"
moved = [conv[k][0] for k in conv if k.startswith("param.") and k.endswith("_res_alpha")]
assert all(a != 0 for a in moved), "res_alpha did not move"
print(f"losses {[round(x, 5) for x in conv['losses']]}")
PY
    ); then pass "converted_trains ($msg)"; else fail converted_trains "$msg"; fi
else
    fail logits_bit_identical "$DUMP not built (make $DUMP)"
fi

# eval and sample see the same model
e1=$($M eval --run "$W/base" --data "$W/val.bin" --batch 4 --seq 32 --batches 3 2>/dev/null | tail -n 1)
e2=$($M eval --run "$W/conv" --data "$W/val.bin" --batch 4 --seq 32 --batches 3 2>/dev/null | tail -n 1)
if [[ $e1 == *val_loss* ]] && [ "$e1" = "$e2" ]; then pass "eval_identical ($e1)"
else fail eval_identical "'$e1' vs '$e2'"; fi
s1=$($M sample --run "$W/base" --prompt-tokens 1,2,3 --steps 24 --temperature 0 2>/dev/null)
s2=$($M sample --run "$W/conv" --prompt-tokens 1,2,3 --steps 24 --temperature 0 2>/dev/null)
if [ "$(wc -w <<<"$s1")" = 27 ] && [ "$s1" = "$s2" ]; then pass sample_greedy_identical
else fail sample_greedy_identical "'$s1' vs '$s2'"; fi
s1=$($M sample --run "$W/base" --prompt-tokens 7 --steps 24 --temperature 1 --seed 5 2>/dev/null)
s2=$($M sample --run "$W/conv" --prompt-tokens 7 --steps 24 --temperature 1 --seed 5 2>/dev/null)
if [ "$(wc -w <<<"$s1")" = 25 ] && [ "$s1" = "$s2" ]; then pass "sample_seeded_identical ($s1)"
else fail sample_seeded_identical "'$s1' vs '$s2'"; fi

# Defaults: 8 heads, min(8, L) = 6 blocks for nano.
if $M convert --run "$W/base" --out "$W/conv_default" >/dev/null 2>&1 && \
   grep -q '"attnres_num_heads": 8' "$W/conv_default/config.json" && \
   grep -q '"attnres_num_blocks": 6' "$W/conv_default/config.json"; then pass convert_defaults
else fail convert_defaults "no run or wrong heads/blocks"; fi

# Errors: nothing may be written.
expect_error convert_non_baseline "attnres_mode is 'delta_mh'.*baseline" $M convert --run "$W/conv" --out "$W/x1"
$M train --out "$W/mhar" --preset nano --train "$W/train.bin" --val "$W/val.bin" --batch 2 --seq 16 --steps 1 \
    --residual mhar --route-heads 2 --eval-batches 1 2>/dev/null
expect_error convert_mhar_run "attnres_mode is 'mhar'" $M convert --run "$W/mhar" --out "$W/x2"
expect_error convert_heads_divide "route-heads 3 does not divide hidden_size 128" \
    $M convert --run "$W/base" --out "$W/x3" --route-heads 3
expect_error convert_too_many_blocks "route-blocks 7 is more than the 6 layers" \
    $M convert --run "$W/base" --out "$W/x4" --route-blocks 7
expect_error convert_out_exists "already exists" $M convert --run "$W/base" --out "$W/conv"
expect_error convert_missing_run "nope/config.json" $M convert --run "$W/nope" --out "$W/x5"
expect_error convert_needs_flags "required" $M convert --run "$W/base"
if [ -z "$(ls -d "$W"/x* 2>/dev/null)" ] && [ -z "$(ls -d "$W"/*.tmp.* 2>/dev/null)" ]; then
    pass convert_nothing_written_on_error
else fail convert_nothing_written_on_error "$(ls -d "$W"/x* "$W"/*.tmp.* 2>/dev/null)"; fi

# Training continues from the converted model: with a fresh optimizer and the
# same data order, its first loss equals the base model's first loss exactly.
common="--train $W/train.bin --val $W/val.bin --batch 2 --seq 16 --steps 2 --eval-batches 1"
$M train --out "$W/cont_base" --init-from "$W/base" $common 2>/dev/null
$M train --out "$W/cont_conv" --init-from "$W/conv" $common 2>/dev/null
l1=$(head -n 1 "$W/cont_base/metrics.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["loss"])')
l2=$(head -n 1 "$W/cont_conv/metrics.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["loss"])')
if [ -n "$l1" ] && [ "$l1" = "$l2" ] && grep -q '"attnres_mode": "delta_mh"' "$W/cont_conv/config.json"; then
    pass "train_init_from_converted (first loss $l1)"
else fail train_init_from_converted "first losses '$l1' vs '$l2'"; fi
expect_error init_from_with_preset "cannot be combined with --init-from" \
    $M train --out "$W/x6" --init-from "$W/conv" --preset micro $common

# The converted model's routing statistics (routing.jsonl, mhar inspect): 12
# sites (no final read), sources 2, 3, 4 by block (3 blocks of 2 layers),
# w_null for source 0 and each site's gate res_alpha. At a learning rate
# of 1e-12 nothing moves from the identity init (queries 0, gates 0), so
# every read is uniform: entropy ln n and w_null 1/n, exactly as printed;
# trained at 3e-3, the gates leave 0 and routing.jsonl's res_alpha are the
# saved model's.
$M train --out "$W/stats0" --init-from "$W/conv" $common --steps 1 --eval-every 1 --lr 1e-12 --warmup 0 2>/dev/null
$M train --out "$W/stats1" --init-from "$W/conv" $common --steps 6 --eval-every 3 --lr 3e-3 --warmup 0 2>/dev/null
if msg=$(python3 - "$W/stats0/routing.jsonl" "$W/stats1/routing.jsonl" "$W/stats1/model.safetensors" <<'PY'
import array, json, math, struct, sys
rec0 = [json.loads(l) for l in open(sys.argv[1])]
rec1 = [json.loads(l) for l in open(sys.argv[2])]
assert [r["step"] for r in rec0] == [1] and [r["step"] for r in rec1] == [3, 6], "steps"
names = [f"layers.{i // 2}.{'mlp' if i % 2 else 'attn'}" for i in range(12)]
for r in rec0 + rec1:
    assert r["heads"] == 4 and [s["site"] for s in r["sites"]] == names, "sites"
    assert [s["n_sources"] for s in r["sites"]] == [2] * 4 + [3] * 4 + [4] * 4, "sources"
    for s in r["sites"]:
        assert "w_emb" not in s and len(s["w_null"]) == 4 and len(s["entropy"]) == 4, s
for s in rec0[0]["sites"]:
    n = s["n_sources"]
    assert all(abs(e - math.log(n)) <= 6e-6 for e in s["entropy"]), ("entropy", s)
    assert all(abs(w - 1 / n) <= 6e-6 for w in s["w_null"] + s["w_last"]), ("weights", s)
    assert abs(s["res_alpha"]) < 1e-9, ("gate", s)
b = open(sys.argv[3], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
saved = {k: array.array("f", b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])[0]
         for k, v in h.items() if k.endswith("_res_alpha")}
last = rec1[-1]["sites"]
for i, s in enumerate(last):
    a = saved[f"model.{s['site']}_res_alpha"]
    assert a != 0 and abs(s["res_alpha"] - a) <= 1e-5 * abs(a), (s["site"], s["res_alpha"], a)
print(f"gates at step 6 {[round(s['res_alpha'], 5) for s in last[:3]]}...")
PY
); then pass "delta_mh_routing_stats ($msg)"; else fail delta_mh_routing_stats "$msg"; fi
table=$($M inspect --run "$W/stats1" 2>&1)
if grep -q "mean weight on the null source" <<<"$table" && grep -q "gate res_alpha" <<<"$table" && \
   grep -Eq "^layers.5.mlp +-?[0-9]+\.[0-9]{5}$" <<<"$table" && ! grep -q "^final" <<<"$table"; then
    pass inspect_delta_mh
else fail inspect_delta_mh "$table"; fi
