#!/usr/bin/env bash
# mhar bench at tiny shapes: structure and consistency, never speed. A comma
# list of schemes prints the machine line (sgemm, read and read-modify-write
# bandwidth), one row per scheme, the floor table of the routed ones and a
# JSON last line whose figures agree with each other and with the printed
# ones: floor = extra bytes / bandwidths, extra = step − baseline's step,
# the traffic equals the formulas of the README; --repeat probes the machine
# before every round and pairs the ratios (and the extra step time) by round. --torch with a stand-in
# helper (MHAR_BENCH_TORCH): each peer's ratio, a failed torch.compile named,
# a missing helper a warning. Bad input is refused with a clear error.
# --scaling on a reduced grid writes its table, JSON and PNGs; --max-memory
# skips shapes with a line saying so.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
# One thread: the shapes are tiny, and on a busy machine a team of spinning
# threads only waits for its descheduled members at every op.
export OMP_NUM_THREADS=1

TINY="--preset nano --batch 2 --seq 32 --steps 1 --vocab 512"

# ---- a list of schemes ----------------------------------------------------------------
$M bench $TINY --residual baseline,mhar,attnres,block >"$W/list.out" 2>"$W/list.err"
rc=$?
if [ $rc -eq 0 ] && grep -Eq '^machine: sgemm [0-9.]+ GFLOP/s .*memory read [0-9.]+ GB/s, read-modify-write [0-9.]+ GB/s' \
     "$W/list.out"; then pass bench_list_machine_line
else fail bench_list_machine_line "rc=$rc: $(head -c 600 "$W/list.out" "$W/list.err")"; fi
# The math library's line: which OpenBLAS kernels ran. On a processor with
# AVX2 and FMA they are never a pre-AVX2 set when the user left
# OPENBLAS_CORETYPE unset: mhar starts again with one the processor runs
# (OpenBLAS 0.3.21 takes an Emerald Rapids for a Prescott).
blas=$(grep -m1 '^blas: ' "$W/list.out")
if [[ "$blas" =~ ^blas:\ OpenBLAS\ [0-9.]+,\ [A-Za-z0-9]+\ kernels ]]; then pass bench_blas_line
else fail bench_blas_line "got '$blas'"; fi
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    # A user's choice is never overridden (Haswell's kernels run on any AVX2+FMA processor).
    blas=$(env -u MHAR_BLAS_FALLBACK OPENBLAS_CORETYPE=Haswell $M bench $TINY --residual baseline 2>&1 | grep -m1 '^blas: ')
    # On an AVX-512 processor the line also says that choice leaves AVX-512 unused.
    want=" Haswell kernels (OPENBLAS_CORETYPE=Haswell)"
    if grep -qw avx512f /proc/cpuinfo; then
        want=" Haswell kernels (OPENBLAS_CORETYPE=Haswell: this processor's AVX-512 unused; unset it for AVX-512 kernels)"
    fi
    if [[ "$blas" == *"$want" ]]; then pass bench_blas_user_choice_kept
    else fail bench_blas_user_choice_kept "OPENBLAS_CORETYPE=Haswell: want '...$want', got '$blas'"; fi
    # Left unset, the kernels are an FMA set. Where the environment sets OPENBLAS_CORETYPE
    # (processors on which this OpenBLAS errs by itself) it is not unset here.
    if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
        blas=$(env -u MHAR_BLAS_FALLBACK $M bench $TINY --residual baseline 2>&1 | grep -m1 '^blas: ')
        if [[ "$blas" =~ \ (Haswell|Zen|SkylakeX|Cooperlake|SapphireRapids)\ kernels ]]; then pass bench_blas_fma_kernels
        else fail bench_blas_fma_kernels "AVX2+FMA processor, OPENBLAS_CORETYPE unset: got '$blas'"; fi
    fi
fi
# JSON consistency, and the printed floor table against the JSON, in one place.
python3 - "$W/list.out" <<'EOF'
import json, math, sys
lines = open(sys.argv[1]).read().splitlines()
def check(name, ok, detail):
    print(f"PASS {name}" if ok else f"FAIL {name}: {detail}")
try:
    j = json.loads(lines[-1])
except Exception as e:
    print(f"FAIL bench_list_json: last line is not JSON ({e}): {lines[-1][:200] if lines else ''}")
    sys.exit(0)
S = j.get("schemes", {})
check("bench_list_json", list(S) == ["baseline", "mhar", "attnres", "block"] and j["read_gbs"] > 0
      and j["rmw_gbs"] > 0 and j["bandwidth_array_mib"] >= 256 and j["sgemm_gflops"] > 0,
      f"schemes {list(S)}, keys {sorted(j)}")
# One round: each scheme has its own sgemm probe (between its steps), and the
# machine's figure is their median and range.
import statistics
sg = [x for s in S.values() for x in s.get("round_sgemm_gflops", [])]
check("bench_list_probe_rounds", j.get("probe_rounds") == 1 and len(sg) == len(S) and min(sg) > 0
      and abs(j["sgemm_gflops"] - statistics.median(sg)) <= 0.006
      and abs(j["sgemm_gflops_min"] - min(sg)) <= 0.006 and abs(j["sgemm_gflops_max"] - max(sg)) <= 0.006,
      f'{j.get("probe_rounds")} rounds, per scheme {sg}, sgemm {j.get("sgemm_gflops_min")} / {j.get("sgemm_gflops")} / '
      f'{j.get("sgemm_gflops_max")}')
# The probe's three 2048² matrices (48 MiB) are left out of a scheme's peak
# memory: this tiny shape's process is ~35 MB without them (~55 under ASan),
# 85 MB and more with them.
check("bench_peak_without_probe", 0 < S["baseline"]["peak_rss_mb"] < 70, f'baseline peak {S["baseline"]["peak_rss_mb"]} MB')
B, T, d, L, H = j["batch"], j["seq"], 128, 6, 8          # nano, --route-heads 8 (attnres: 1)
n, P = B * T, 2 * L + 1
row, Sig = n * d, P * (P + 1) // 2
# README's formulas: full routing, baseline, block N = 4 (each writes its source gradients: no zeroing)
full = lambda h: (4 * (2 * Sig * row + 4 * P * row + 4 * Sig * n * h + P * n),
                  8 * (2 * P * row + 2 * Sig * n * h + P * n * h + P * n))
want = {"mhar": full(H), "attnres": full(1),
        "baseline": (4 * 2 * (1 + 4 * L) * row, 8 * 2 * (2 * L + 1) * row)}
bl = -(-L // 4); nb = -(-L // bl); rd = wr = 0
rd += row; wr += row            # b_0 = emb
for s in range(2 * L + 1):
    first = s == 2 * ((s // 2) // bl) * bl
    N = nb + 1 if s == 2 * L else (s // 2) // bl + 1 + (not first)
    rd += N * row + N * row + N * n * H + row; wr += row + N * n * H + N * row
    if s < 2 * L:
        rd += (1 if first else 2) * row; wr += row   # write
want["block"] = (4 * rd, 8 * wr)
bad = {k: ((S[k]["route_read_bytes"], S[k]["route_write_bytes"]), v) for k, v in want.items()
       if (S[k].get("route_read_bytes"), S[k].get("route_write_bytes")) != v}
check("bench_list_route_bytes", not bad, f"got vs formula {bad}")
b = S["baseline"]
errs = []
for k, s in S.items():
    # tok_per_s has one decimal: 0.05 of it, relatively
    if abs(s["step_ms"] - 1e3 * n / s["tok_per_s"]) > (1e-4 + 0.051 / s["tok_per_s"]) * s["step_ms"]:
        errs.append(f"{k} step_ms {s['step_ms']} vs tokens/tok_per_s")
    if k == "baseline":
        if "floor_ms" in s: errs.append("baseline has a floor")
        continue
    floor = 1e3 * ((s["route_read_bytes"] - b["route_read_bytes"]) / (j["read_gbs"] * 1e9)
                   + (s["route_write_bytes"] - b["route_write_bytes"]) / (j["rmw_gbs"] * 1e9))
    extra = s["step_ms"] - b["step_ms"]
    if not (abs(s["floor_ms"] - floor) <= 2e-3 * floor and abs(s["extra_ms"] - extra) <= 2e-3 + 1e-4 * abs(extra)
            # extra_ms has 3 decimals: its rounding, over the floor, bounds the ratio's
            and abs(s["extra_over_floor"] - s["extra_ms"] / s["floor_ms"])
                <= 1e-3 * abs(s["extra_over_floor"]) + 1e-4 + 6e-4 / s["floor_ms"]):
        errs.append(f"{k}: floor {s['floor_ms']} vs {floor:.4f}, extra {s['extra_ms']} vs {extra:.3f}, "
                    f"ratio {s['extra_over_floor']}")
check("bench_list_floor_consistent", not errs, "; ".join(errs))
# The printed floor table: a header, then one row per routed scheme agreeing with the JSON.
try:
    h = next(i for i, l in enumerate(lines) if l.startswith("routing over baseline"))
    rows = {l.split()[0]: l.split() for l in lines[h + 2:h + 5]}
    ok = sorted(rows) == ["attnres", "block", "mhar"] and lines[h + 1].split()[-1] == "extra/floor"
    for k, r in rows.items():
        s = S[k]
        mb_r = (s["route_read_bytes"] - b["route_read_bytes"]) / 1e6
        mb_w = (s["route_write_bytes"] - b["route_write_bytes"]) / 1e6
        ok &= abs(float(r[2]) - s["extra_ms"]) <= 0.051 and abs(float(r[3]) - mb_r) <= 0.051 \
            and abs(float(r[4]) - mb_w) <= 0.051 and abs(float(r[5]) - s["floor_ms"]) <= 0.051 \
            and abs(float(r[6]) - s["extra_over_floor"]) <= 0.0051
    check("bench_list_floor_lines", ok, "\n".join(lines[h:h + 5]))
except StopIteration:
    check("bench_list_floor_lines", False, "no 'routing over baseline' header")
# The op profile: every scheme's ops sum to no more than its step and to most
# of it; the GEMMs and AdamW are there, the routing kernels only in routed
# schemes; the scheme's own work (the "residual" region) against the floor
# of its whole traffic at the measured bandwidths.
errs = []
for k, s in S.items():
    prof, step = s.get("profile_ms", {}), s.get("profile_step_ms", 0)
    tot = sum(prof.values())
    if not (0.5 * step <= tot <= step * (1 + 1e-6) + 1e-3):
        errs.append(f"{k}: ops {tot:.3f} ms of a {step} ms step")
    if not all(o in prof for o in ("matmul_forward", "matmul_backward", "attention_forward", "adamw_update")):
        errs.append(f"{k}: ops {sorted(prof)}")
    # full routing runs source by source; block routing through route_forward/backward
    kern = {"mhar": ("route_keys", "route_mix", "route_dx_keep", "route_gather"),
            "attnres": ("route_keys", "route_mix", "route_dx_keep", "route_gather"),
            "block": ("route_forward", "route_backward")}.get(k, ())
    every = ("route_forward", "route_backward", "route_keys", "route_mix", "route_dx_keep", "route_gather")
    if any((o in prof) != (o in kern) for o in every):
        errs.append(f"{k}: route kernels {sorted(o for o in every if o in prof)}")
    floor = 1e3 * (s["route_read_bytes"] / (j["read_gbs"] * 1e9) + s["route_write_bytes"] / (j["rmw_gbs"] * 1e9))
    if not (s.get("residual_work_ms", 0) > 0 and abs(s["residual_floor_ms"] - floor) <= 2e-3 * floor + 1e-4
            and s["residual_work_ms"] <= step):
        errs.append(f"{k}: work {s.get('residual_work_ms')} floor {s.get('residual_floor_ms')} vs {floor:.4f}")
    if k != "baseline":
        want = (s["residual_work_ms"] - b["residual_work_ms"]) / s["floor_ms"]
        if abs(s["extra_work_over_floor"] - want) > 1e-3 * abs(want) + 1e-3:
            errs.append(f"{k}: extra work/floor {s['extra_work_over_floor']} vs {want:.4f}")
check("bench_list_profile_json", not errs, "; ".join(errs))
# The products' FLOPs the ops count, against nano's shapes (d 128, 6 layers,
# 4 heads of 32, 2 kv heads, SwiGLU 384, vocabulary 512; B 2 x T 32): the
# forward's matmuls 2·n·(weights they multiply by, the head's included),
# the backward's twice that; attention 2·2·hd·T(T+1)/2 a head and sequence
# in the forward (its causal pairs), 5 products' worth in the backward. The
# same in every scheme (routing runs no matmul). And the printed products'
# mfu is the model's FLOPs over the products' time at the round's sgemm.
d, L, nh, nkv, hd, f, V, B, T = 128, 6, 4, 2, 32, 384, 512, 2, 32
n = B * T
weights = L * (nh * hd * d + 2 * nkv * hd * d + d * nh * hd + 2 * f * d + d * f) + V * d
att = 2 * 2 * hd * T * (T + 1) / 2 * B * nh * L
want = {"matmul_forward": 2 * n * weights, "attention_forward": att, "attention_backward": 2.5 * att}
errs = []
for k, s in S.items():
    g = {o: v * 1e9 for o, v in s.get("profile_gflop", {}).items()}
    for o, v in want.items():
        if abs(g.get(o, 0) - v) > 1e-6 * v:
            errs.append(f"{k} {o}: {g.get(o)} FLOPs, want {v:.0f}")
    back = g.get("matmul_backward", 0) + g.get("matmul_backward_add", 0)
    if abs(back - 4 * n * weights) > 1e-6 * back:
        errs.append(f"{k}: backward matmuls {back} FLOPs, want {4 * n * weights}")
    if set(g) - {"matmul_forward", "matmul_backward", "matmul_backward_add", "attention_forward", "attention_backward"}:
        errs.append(f"{k}: counted ops {sorted(g)}")
    ms = sum(s["profile_ms"][o] for o in g)
    mfu = s["model_gflops"] / s["tok_per_s"] * n / (ms / 1e3) / s["profile_sgemm_gflops"]
    if not (abs(s["mfu_products_only"] - mfu) <= 1e-3 * mfu and s["profile_sgemm_gflops"] in s["round_sgemm_gflops"]):
        errs.append(f"{k}: products-only mfu {s['mfu_products_only']} vs {mfu:.4f}")
check("bench_list_products_json", not errs, "; ".join(errs))
try:
    h = next(i for i, l in enumerate(lines) if l.startswith("the matrix products' rate"))
    cols = lines[h + 1].split()[1:]
    last = next(l for l in lines[h:] if l.startswith("mfu, products alone")).split()[3:]
    ok = cols == list(S) and any(l.startswith("all products") for l in lines[h:]) and \
        all(abs(float(v.rstrip("%")) - 100 * S[k]["mfu_products_only"]) <= 0.051 for k, v in zip(cols, last))
    check("bench_list_products_lines", ok, "\n".join(lines[h:h + 10]))
except StopIteration:
    check("bench_list_products_lines", False, "no products table")
try:
    h = next(i for i, l in enumerate(lines) if l.startswith("the scheme's own work in the step"))
    rows = {l.split()[0]: l.split() for l in lines[h + 2:h + 6]}
    ok = sorted(rows) == ["attnres", "baseline", "block", "mhar"]
    for k, r in rows.items():
        ok &= abs(float(r[1]) - S[k]["residual_work_ms"]) <= 0.0051 and abs(float(r[2]) - S[k]["residual_floor_ms"]) <= 0.0051
    p = next(i for i, l in enumerate(lines) if l.startswith("where the step goes"))
    cols = lines[p + 1].split()[1:]
    last = next(l for l in lines[p:] if l.startswith("step (mean)")).split()[2:]
    ok &= cols == list(S) and all(abs(float(v) - S[k]["profile_step_ms"]) <= 0.0051 for k, v in zip(cols, last))
    check("bench_list_profile_lines", ok, "\n".join(lines[h:h + 6] + lines[p:p + 2]))
except StopIteration:
    check("bench_list_profile_lines", False, "no work or profile table")
EOF
if [ "$(grep -Ec '^(baseline|mhar|attnres|block) +[0-9]+ +[0-9.]+ +[0-9.]+%' "$W/list.out")" = 4 ]; then pass bench_list_rows
else fail bench_list_rows "$(cat "$W/list.out")"; fi

# one scheme: flat JSON; a routed scheme without baseline says what the floor needs
out=$($M bench $TINY --residual mhar 2>/dev/null)
if python3 -c "
import json,sys; j=json.loads(sys.argv[1].splitlines()[-1])
assert j['residual']=='mhar' and j['route_read_bytes']>0 and j['route_write_bytes']>0 and 'floor_ms' not in j
assert j['read_gbs']>0 and j['rmw_gbs']>0" "$out" && grep -q "add baseline to --residual" <<<"$out"; then
    pass bench_one_scheme
else fail bench_one_scheme "$out"; fi

# ---- --repeat: every round probes the memory first, every scheme the sgemm rate between its steps;
# ratios are paired by round --------
$M bench $TINY --residual baseline,mhar --repeat 3 >"$W/rep.out" 2>"$W/rep.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^  round [123]  machine: read [0-9.]* GB/s' "$W/rep.err")" = 3 ] \
     && [ "$(grep -c '^  round [123]  [a-z]* .*(sgemm [0-9.]* GFLOP/s between its steps)' "$W/rep.err")" = 6 ] \
     && grep -q 'median of 2 schemes x 3 rounds, range' "$W/rep.out" && python3 -c "
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert j['probe_rounds'] == 3 and j['sgemm_gflops_min'] <= j['sgemm_gflops'] <= j['sgemm_gflops_max']" "$W/rep.out"
then pass bench_repeat_probes_each_round
else fail bench_repeat_probes_each_round "rc=$rc: $(head -c 800 "$W/rep.err" "$W/rep.out")"; fi
python3 - "$W/rep.out" <<'EOF'
import json, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
try:
    j = json.loads(lines[-1]); b, m = j["schemes"]["baseline"], j["schemes"]["mhar"]
    tb, tm, n = b["round_tok_per_s"], m["round_tok_per_s"], j["batch"] * j["seq"]
    r = [x / y for x, y in zip(tm, tb)]
    extra = statistics.median(1e3 * n * (1 / x - 1 / y) for x, y in zip(tm, tb))
    rel = 1e-3   # the rounds' tokens/s are printed with one decimal
    def printed_range(text, m):  # "lo-hi", 3 decimals, against the JSON's 4
        try:
            lo, hi = (float(x) for x in text.split("-"))
        except ValueError:
            return False
        return abs(lo - m["tok_ratio_min"]) <= 6e-4 and abs(hi - m["tok_ratio_max"]) <= 6e-4
    ok = (len(tb) == len(tm) == 3 and abs(m["tok_per_s"] - statistics.median(tm)) <= 0.051
          and abs(m["tok_ratio"] - statistics.median(r)) <= rel * m["tok_ratio"]
          and abs(m["tok_ratio_min"] - min(r)) <= rel * min(r) and abs(m["tok_ratio_max"] - max(r)) <= rel * max(r)
          and abs(m["extra_ms"] - extra) <= rel * abs(extra) + 0.01
          and any(l.split()[0] == "mhar" and printed_range(l.split()[-2], m) for l in lines if l.split()))
    print("PASS bench_repeat_paired_ratios" if ok else f"FAIL bench_repeat_paired_ratios: {m} vs {r}, {extra}")
    # mfu pairs each round's tokens/s with the sgemm probe between that round's steps
    every = [x for s in j["schemes"].values() for x in s["round_sgemm_gflops"]]
    ok = len(every) == 6 and all(abs(x - y) <= 0.006 for x, y in zip((min(every), statistics.median(every), max(every)),
                                                                      (j["sgemm_gflops_min"], j["sgemm_gflops"], j["sgemm_gflops_max"])))
    for name, s in j["schemes"].items():
        sg = s["round_sgemm_gflops"]
        flops = s["model_gflops"] * 1e9 / s["tok_per_s"]
        mfu = [flops * t / 1e9 / g for t, g in zip(s["round_tok_per_s"], sg)]
        row = next(l.split() for l in lines if l.split() and l.split()[0] == name)
        lo, hi = (float(x) for x in row[-1].rstrip("%").split("-"))
        ok = ok and abs(s["mfu"] - statistics.median(mfu)) <= 2e-3 * s["mfu"] \
            and abs(s["mfu_min"] - min(mfu)) <= 2e-3 * min(mfu) and abs(s["mfu_max"] - max(mfu)) <= 2e-3 * max(mfu) \
            and abs(lo - 100 * s["mfu_min"]) <= 0.051 and abs(hi - 100 * s["mfu_max"]) <= 0.051 \
            and abs(float(row[3].rstrip("%")) - 100 * s["mfu"]) <= 0.051
    print("PASS bench_repeat_mfu_paired_by_round" if ok else f"FAIL bench_repeat_mfu_paired_by_round: {every} {j['schemes']}")
except Exception as e:
    print(f"FAIL bench_repeat_paired_ratios: {e!r}")
EOF

# ---- --torch, with a stand-in helper ------------------------------------------------------
cat >"$W/fake_torch.py" <<'EOF'
import json, sys
open(sys.argv[0] + ".args", "w").write(" ".join(sys.argv[1:]))
print("progress noise")
print(json.dumps({"torch": "9.9-fake", "threads": 2, "peers": [
    {"name": "qwen3", "what": "HF Qwen3, eager, sdpa", "tok_per_s": 1000.0},
    {"name": "mhar", "what": "modeling_mhar mhar, eager, sdpa", "tok_per_s": 250.0},
    {"name": "qwen3_compile", "what": "HF Qwen3, torch.compile", "error": "RuntimeError: \"no\" C++ compiler"}]}))
EOF
out=$(MHAR_BENCH_TORCH="$W/fake_torch.py" $M bench $TINY --residual baseline,mhar --torch 2>"$W/torch.err")
args=$(cat "$W/fake_torch.py.args" 2>/dev/null)
if [[ "$args" == *"--peers qwen3,mhar,qwen3_compile"* && "$args" == *"--hidden-size 128 "* &&
      "$args" == *"--num-hidden-layers 6 "* && "$args" == *"--vocab-size 512 "* && "$args" == *"--route-heads 8 "* &&
      "$args" == *"--batch 2 --seq 32 --steps 1"* ]]; then pass bench_torch_args
else fail bench_torch_args "helper called with: $args"; fi
if python3 - "$out" <<'EOF'
import json, re, sys
text = sys.argv[1]; j = json.loads(text.splitlines()[-1]); S = j["schemes"]; t = j["torch"]
assert t["version"] == "9.9-fake" and t["peers"]["qwen3"]["tok_per_s"] == 1000.0
assert "no" in t["peers"]["qwen3_compile"]["error"] and "baseline_over_compile" not in j
for k, peer, tok in (("baseline", "qwen3", 1000.0), ("mhar", "mhar", 250.0)):
    assert S[k]["torch_peer"] == peer and S[k]["torch_peer_tok_per_s"] == tok
    assert abs(S[k]["over_torch_peer"] - S[k]["tok_per_s"] / tok) < 1e-3 * S[k]["over_torch_peer"]
    m = re.search(rf"^{peer} +1?[0-9]+ .* {k} ([0-9.]+)x", text, re.M)
    assert m and abs(float(m.group(1)) - S[k]["over_torch_peer"]) < 0.006, (k, m)
assert re.search(r"^qwen3_compile +failed: RuntimeError: \"no\" C\+\+ compiler", text, re.M)
EOF
then pass bench_torch_report
else fail bench_torch_report "$out"; fi
# With --repeat the helper runs after every round and each ratio is paired by round: a
# helper whose peers run twice as fast on its second call, and whose torch.compile fails there.
cat >"$W/fake_torch2.py" <<'EOF'
import json, os, sys
n = sys.argv[0] + ".calls"
calls = (int(open(n).read()) if os.path.exists(n) else 0) + 1
open(n, "w").write(str(calls))
c = {"name": "qwen3_compile", "what": "HF Qwen3, torch.compile"}
c.update({"tok_per_s": 500.0} if calls == 1 else {"error": "RecompileError: second call"})
print(json.dumps({"torch": "9.9-fake", "threads": 2, "peers": [
    {"name": "qwen3", "what": "HF Qwen3, eager, sdpa", "tok_per_s": 1000.0 * calls},
    {"name": "mhar", "what": "modeling_mhar mhar, eager, sdpa", "tok_per_s": 250.0 * calls}, c]}))
EOF
out=$(MHAR_BENCH_TORCH="$W/fake_torch2.py" $M bench $TINY --residual baseline,mhar --repeat 2 --torch 2>"$W/torch2.err")
if [ "$(cat "$W/fake_torch2.py.calls" 2>/dev/null)" = 2 ] && python3 - "$out" <<'EOF'
import json, re, statistics, sys
text = sys.argv[1]; j = json.loads(text.splitlines()[-1]); S = j["schemes"]; t = j["torch"]
for k, peer, tok in (("baseline", "qwen3", 1000.0), ("mhar", "mhar", 250.0)):
    p = t["peers"][peer]
    assert p["round_tok_per_s"] == [tok, 2 * tok] and p["tok_per_s"] == 1.5 * tok, p
    r = [x / y for x, y in zip(S[k]["round_tok_per_s"], p["round_tok_per_s"])]
    assert abs(S[k]["over_torch_peer"] - statistics.median(r)) < 1e-3 * statistics.median(r), (k, S[k], r)
    assert abs(S[k]["over_torch_peer_min"] - min(r)) < 1e-3 * min(r) and abs(S[k]["over_torch_peer_max"] - max(r)) < 1e-3 * max(r)
    m = re.search(rf"^{peer} +[0-9]+ .* {k} ([0-9.]+)x \(([0-9.]+)-([0-9.]+)\)", text, re.M)
    assert m and abs(float(m.group(1)) - S[k]["over_torch_peer"]) < 0.006, (k, m)
assert "round 2: RecompileError" in t["peers"]["qwen3_compile"]["error"] and "baseline_over_compile" not in j
assert re.search(r"^qwen3_compile +failed: round 2: RecompileError", text, re.M)
EOF
then pass bench_torch_paired_rounds
else fail bench_torch_paired_rounds "calls $(cat "$W/fake_torch2.py.calls" 2>/dev/null): $out $(cat "$W/torch2.err")"; fi
out=$(MHAR_BENCH_TORCH="$W/none.py" $M bench $TINY --residual baseline --torch 2>"$W/torch.err"); rc=$?
if [ $rc -eq 0 ] && grep -q "PyTorch comparison failed: .*none.py not found" "$W/torch.err" &&
   python3 -c "import json,sys; j=json.loads(sys.argv[1].splitlines()[-1]); assert 'not found' in j['torch']['error']" "$out"; then
    pass bench_torch_missing_helper
else fail bench_torch_missing_helper "rc=$rc: $(cat "$W/torch.err") $out"; fi

# ---- --kernel route: the route kernels alone ------------------------------------------------------
# Structure and arithmetic only: the traffic equals route_bytes_site's (README's
# per-site formula) and full routing's per call, floor = bytes at the run's bandwidths, the ratio = ms/floor,
# each median inside its range, the table's rows the JSON's.
$M bench --kernel route --preset nano --batch 2 --seq 32 --steps 3 >"$W/kern.out" 2>"$W/kern.err"; rc=$?
if [ $rc -eq 0 ] && python3 - "$W/kern.out" <<'EOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
j = json.loads(lines[-1])
assert lines[0].startswith("blas: OpenBLAS "), lines[0]   # which kernels ran, as in the other benches
n, d, H, P = 2 * 32, 128, 8, 2 * 6 + 1          # nano: L 6, d 128; --route-heads default 8
assert (j["kernel"], j["tokens"], j["d"], j["heads"], j["sources"]) == ("route", n, d, H, P), j
assert j["cache_tile"] % 8 == 0 and 8 <= j["cache_tile"] <= n, j["cache_tile"]
row, w = n * d, P * n * H
# route_forward/backward: route_bytes_site's halves; full routing's largest calls (mhar.c's
# formula for one source read by P sites, or one site over P sources)
want = {"forward": (4 * P * row, 8 * (row + w)), "backward": (4 * (P * row + w + row), 8 * P * row),
        "keys": (4 * row, 8 * (w + n)), "mix": (4 * (P * row + w), 8 * (row + w)),
        "gather": (4 * (row + n + P * row + 3 * w), 8 * row)}
table = {tuple(l.split()[:2]): l.split() for l in lines if l.split()[:1] in [[k] for k in want]}
assert len(table) == 10, table
for pas in want:
    for where in ("memory", "cache"):
        r = j[f"{pas}_{where}"]
        assert (r["read_bytes"], r["write_bytes"]) == want[pas], (pas, r, want[pas])
        floor = 1e3 * (r["read_bytes"] / (j["read_gbs"] * 1e9) + r["write_bytes"] / (j["rmw_gbs"] * 1e9))
        assert abs(r["floor_ms"] - floor) <= 1e-3 * floor + 1e-4, (pas, where, r["floor_ms"], floor)
        assert abs(r["over_floor"] - r["ms"] / r["floor_ms"]) <= 1e-3 * r["over_floor"], r
        assert 0 < r["ms_min"] <= r["ms"] <= r["ms_max"], r
        t = table[(pas, where)]
        assert abs(float(t[2]) - r["ms"]) <= 0.006 and abs(float(t[-1]) - r["over_floor"]) <= 0.006, (t, r)
EOF
then pass bench_kernel_route
else fail bench_kernel_route "rc=$rc: $(head -c 1500 "$W/kern.out" "$W/kern.err")"; fi
expect_error bench_kernel_unknown "--kernel 'gemm': unknown kernel \(route\)" $M bench --kernel gemm
expect_error bench_kernel_residual "--residual does not apply to --kernel" $M bench --kernel route --residual mhar
expect_error bench_kernel_heads "--route-heads 3 does not divide the preset's width 128" $M bench --kernel route --preset nano --route-heads 3

# ---- refusals ----------------------------------------------------------------------------------
expect_error bench_unknown_in_list "unknown residual scheme 'nope'.*baseline, hc" $M bench $TINY --residual baseline,nope
expect_error bench_empty_in_list "empty name" $M bench $TINY --residual baseline,,mhar
expect_error bench_twice_in_list "'mhar' is listed twice" $M bench $TINY --residual mhar,baseline,mhar
expect_error bench_all_in_list "'all' stands alone" $M bench $TINY --residual all,mhar
expect_error bench_bad_heads "not divisible by attnres_num_heads 3" $M bench $TINY --residual baseline,mhar --route-heads 3
expect_error bench_scaling_no_out "--scaling needs --out" $M bench --scaling
expect_error bench_out_without_scaling "--out applies only with --scaling" $M bench $TINY --out "$W/x"
expect_error bench_scaling_residual "--residual does not apply to --scaling" $M bench --scaling --out "$W/x" --residual mhar
expect_error bench_scaling_bad_preset "--max-preset 'huge' is not a preset" $M bench --scaling --out "$W/x" --max-preset huge
expect_error bench_scaling_long_seq "--max-seq 4096: the sweep needs 256 .. 2048" $M bench --scaling --out "$W/x" --max-seq 4096
if [ ! -e "$W/x" ]; then pass bench_refusals_write_nothing; else fail bench_refusals_write_nothing "$W/x exists"; fi

# ---- --scaling on a reduced grid ------------------------------------------------------------------
G="--scaling --preset nano --max-preset micro --max-seq 512 --steps 1 --vocab 512"
$M bench $G --out "$W/scale" >"$W/scale.out" 2>"$W/scale.err"; rc=$?
pngs=0
for s in preset seq; do for k in tok_s mfu peak_mb ratio; do
    f="$W/scale/scaling_${s}_$k.png"
    [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = "211PNG" ] && pngs=$((pngs + 1))
done; done
if [ $rc -eq 0 ] && [ $pngs = 8 ]; then pass bench_scaling_pngs
else fail bench_scaling_pngs "rc=$rc, $pngs of 8 PNGs: $(tail -n 5 "$W/scale.err")"; fi
if python3 - "$W/scale" <<'EOF'
import json, sys
d = sys.argv[1]
j = json.load(open(f"{d}/scaling.json")); md = open(f"{d}/scaling.md").read()
shapes = [(s["sweep"], s["preset"], s["batch"], s["seq"]) for s in j["shapes"]]
assert shapes == [("preset", "nano", 8, 256), ("preset", "micro", 8, 256), ("seq", "nano", 16, 256),
                  ("seq", "nano", 8, 512)], shapes
mfus = []
for s in j["shapes"]:
    assert s["state"] == "run", s
    b, m = s["baseline"], s["mhar"]
    assert abs(s["tok_ratio"] - m["tok_per_s"] / b["tok_per_s"]) < 1e-9 and s["estimated_gb"] > 0
    assert b["steps"] == m["steps"] == 1 and 0 < b["mfu"] and m["params"] > b["params"]
    # each run's mfu is against the sgemm probed between its own steps, which the grid's range holds
    for r in (b, m):
        assert j["sgemm_gflops_min"] <= r["sgemm_gflops"] <= j["sgemm_gflops_max"], (r["sgemm_gflops"], j)
    assert j["sgemm_gflops_min"] <= j["sgemm_gflops"] <= j["sgemm_gflops_max"]
    mfus.append(f"| {100 * b['mfu']:.1f}% | {100 * m['mfu']:.1f}% |")
    # the Markdown row of the shape carries the same figures
    row = f"| {s['sweep']} | {s['preset']} | {m['params'] / 1e6:.1f} | {s['batch']} | {s['seq']} | 1/1 | " \
          f"{b['tok_per_s']:.0f} | {m['tok_per_s']:.0f} | {s['tok_ratio']:.3f} |"
    assert row in md, row
assert md.count("\n| preset |") + md.count("\n| seq |") == 4
assert all(x in md for x in mfus), (mfus, md)
assert f"(median {j['sgemm_gflops']:.1f} GFLOP/s, range {j['sgemm_gflops_min']:.1f}-{j['sgemm_gflops_max']:.1f})" in md
EOF
then pass bench_scaling_table
else fail bench_scaling_table "$(head -c 1500 "$W/scale/scaling.md" 2>/dev/null)"; fi
if grep -q "^| seq | nano | .* | 8 | 512 |" "$W/scale.out"; then pass bench_scaling_prints_table
else fail bench_scaling_prints_table "$(cat "$W/scale.out")"; fi

# --max-memory: shapes above it are skipped, said so, and still listed
$M bench $G --max-preset nano --max-seq 256 --max-memory 0.3 --out "$W/skip" >"$W/skip.out" 2>"$W/skip.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "seq  nano   B 16 x T  256  skipped: needs about .* GB, more than --max-memory 0.30 GB" "$W/skip.err" &&
   python3 -c "
import json,sys; j=json.load(open(sys.argv[1]))
st=[s['state'] for s in j['shapes']]; assert st==['run','skipped'], st
assert 'more than --max-memory' in j['shapes'][1]['reason'] and j['max_memory_gb']==0.3" "$W/skip/scaling.json" &&
   grep -q "| seq | nano | | 16 | 256 | | skipped: needs about" "$W/skip/scaling.md"; then
    pass bench_scaling_skips
else fail bench_scaling_skips "rc=$rc: $(cat "$W/skip.err")"; fi

# tools/route_ab.sh: HEAD's route kernels against the working tree's, in one
# program; it builds and prints both passes with a positive ratio, and bad
# arguments are refused.
tools/route_ab.sh -- 8 2 64 >"$W/ab.out" 2>"$W/ab.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "^route kernels, 17 sources x 64 tokens x d 256, H 8, from cache, 2 rounds" "$W/ab.out" &&
   grep -Eq "^forward +A +[0-9.]+ ms +B +[0-9.]+ ms +B/A [0-9]+\.[0-9]{3}$" "$W/ab.out" &&
   grep -Eq "^backward +A +[0-9.]+ ms +B +[0-9.]+ ms +B/A [0-9]+\.[0-9]{3}$" "$W/ab.out" &&
   ! grep -q "B/A 0.000" "$W/ab.out"; then pass route_ab_builds_and_runs
else fail route_ab_builds_and_runs "rc=$rc: $(cat "$W/ab.out" "$W/ab.err" | head -c 1500)"; fi
tools/route_ab.sh -- 7 2 64 >"$W/ab_bad.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "usage: route_ab" "$W/ab_bad.out"; then pass route_ab_refuses_bad_heads
else fail route_ab_refuses_bad_heads "rc=$rc: $(cat "$W/ab_bad.out")"; fi

# tools/source_ab.sh: the same for route_keys and route_gather; the two
# builds' outputs must agree to rounding (their sums may run in other orders).
for k in gather keys; do
    tools/source_ab.sh -- $k 8 2 5 64 256 cache >"$W/sab_$k.out" 2>"$W/sab_$k.err"; rc=$?
    if [ $rc -eq 0 ] && grep -q "^route_$k, 5 readers x 64 tokens x d 256, H 8, in cache, 2 rounds" "$W/sab_$k.out" &&
       grep -Eq "^A +[0-9.]+ ms +B +[0-9.]+ ms +B/A [0-9]+\.[0-9]{3} +\(B - A: [0-9.e+-]+ of the largest output\)$" "$W/sab_$k.out" &&
       ! grep -q "B/A 0.000" "$W/sab_$k.out" &&
       awk '/B - A:/ { e = $(NF - 4); ok = (e + 0 < 1e-3) } END { exit !ok }' "$W/sab_$k.out"; then
        pass source_ab_${k}_builds_and_agrees
    else fail source_ab_${k}_builds_and_agrees "rc=$rc: $(cat "$W/sab_$k.out" "$W/sab_$k.err" | head -c 1500)"; fi
done
tools/source_ab.sh -- gather 7 2 5 64 256 >"$W/sab_bad.out" 2>&1; rc=$?
if [ $rc -eq 2 ] && grep -q "usage: source_ab" "$W/sab_bad.out"; then pass source_ab_refuses_bad_heads
else fail source_ab_refuses_bad_heads "rc=$rc: $(cat "$W/sab_bad.out")"; fi
