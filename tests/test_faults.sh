#!/usr/bin/env bash
# Faults during training, on tiny models (2 layers, width 32 or 64) so that
# every step can checkpoint:
#   - SIGKILL at random points and at three points inside the checkpoint
#     write: DIR/checkpoint is always complete and loadable, and --resume
#     ends bit-identical to an uninterrupted run;
#   - a full disk (a small tmpfs when this machine can mount one, and always
#     a file-size limit) and an unwritable run directory while saving: a
#     clear error, the previous checkpoint intact, and a resume from it ends
#     bit-identical;
#   - non-finite losses (a NaN written into a checkpoint's weights): no step
#     is applied, --max-bad-steps N in a row stop the run with a message
#     naming the step, the last good checkpoint stays, metrics stay JSON;
#   - SIGINT and SIGTERM: checkpoint, exit 0, resume bit-identical.
set -u
SECONDS=0
cd "$(dirname "$0")/.."
M=${MHAR_BIN:-$PWD/mhar}
# OpenMP threads sleep instead of spinning between parallel regions, so the
# processes that watch and kill a run get the CPU (the same for every run
# here, so bit-identity across runs is unaffected).
export OMP_WAIT_POLICY=passive
W=$(mktemp -d)
chmod 755 "$W"  # the unwritable-directory check runs mhar as an unprivileged user
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
    chmod -R u+w "$W" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
check() { if eval "$2"; then pass "$1"; else fail "$1" "$3"; fi; }

$M data synth --out "$W/train.bin" --vocab 64 --count 20000 --seed 1 2>/dev/null
$M data synth --out "$W/val.bin" --vocab 64 --count 2000 --seed 2 2>/dev/null
cat >"$W/tiny.json" <<'J'
{"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 16, "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 64}
J
A="--config $W/tiny.json --train $W/train.bin --val $W/val.bin --batch 2 --seq 16 --eval-every 10 --eval-batches 2"

# same_run REF DIR: final weights, optimizer state and metrics (without the
# timing field) are byte-identical.
same_run() {
    cmp -s "$1/model.safetensors" "$2/model.safetensors" &&
        cmp -s "$1/checkpoint/optimizer.safetensors" "$2/checkpoint/optimizer.safetensors" &&
        diff <(sed 's/"tok_per_s":[^,]*,//' "$1/metrics.jsonl") <(sed 's/"tok_per_s":[^,]*,//' "$2/metrics.jsonl") >/dev/null
}
# complete DIR: DIR/checkpoint holds all four files, state.json is JSON, and
# the checkpoint's weights load and evaluate.
complete() {
    local c=$1/checkpoint
    [ -s "$c/config.json" ] && [ -s "$c/model.safetensors" ] && [ -s "$c/optimizer.safetensors" ] &&
        python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$c/state.json" 2>/dev/null &&
        $M eval --run "$c" --data "$W/val.bin" --batch 2 --seq 16 --batches 1 >/dev/null 2>&1
}
ckpt_step() { sed -n 's/^[[:space:]]*"step":[[:space:]]*\([0-9]*\).*/\1/p' "$1/checkpoint/state.json" 2>/dev/null | head -n 1; }
# wait_for CONDITION PID: poll (5 ms) until CONDITION holds or PID exits.
wait_for() {
    for _ in $(seq 1 6000); do
        eval "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.005
    done
    return 1
}
steps_logged() { local n; n=$(grep -c '"loss"' "$1/metrics.jsonl" 2>/dev/null); echo "${n:-0}"; }
# same_tensors A B: two safetensors files hold the same tensors, bit for bit
# (NaN included), whatever their headers' formatting.
same_tensors() {
    python3 - "$1" "$2" <<'PY' 2>/dev/null
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)
PY
}

# ---- SIGKILL ---------------------------------------------------------------
echo "[${SECONDS}s] SIGKILL"
# kill_run.py DIR MODE -- CMD...: start CMD (a training run in DIR), wait for
# DIR/checkpoint to exist (before it there is nothing to resume), then
# SIGKILL it. MODE "file:NAME": stop the process (SIGSTOP) at random moments
# until it is caught with its temporary file of NAME (a glob: * is any of
# the checkpoint's files) in DIR/.checkpoint.tmp, i.e. in the middle of
# writing NAME, and kill it there (else SIGCONT and again); this needs no
# luck in timing, whatever the disk speed or the load. MODE "random": once the checkpoint has advanced a random
# 1-3 steps, kill after a random 0-4 ms. Prints "mid_write" when one of the
# process's temporary files is left in .checkpoint.tmp. Exit 0: killed;
# 3: CMD ended first.
cat >"$W/kill_run.py" <<'PY'
import glob, os, random, re, signal, subprocess, sys, time
run, mode, cmd = sys.argv[1], sys.argv[2], sys.argv[4:]
state = os.path.join(run, "checkpoint", "state.json")
def step():
    try:
        return int(re.search(r'"step":\s*(\d+)', open(state).read()).group(1))
    except (OSError, AttributeError):
        return -1
def stopped(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][0] in "TtZ"
    except OSError:
        return True
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(run + ".log", "a"))
while step() < 0:
    if p.poll() is not None: sys.exit(3)
    time.sleep(0.001)
if mode.startswith("file:"):
    target = os.path.join(run, ".checkpoint.tmp", f"{mode[5:]}.tmp.{p.pid}")
    while True:
        time.sleep(random.uniform(0, 0.002))
        if p.poll() is not None: sys.exit(3)
        p.send_signal(signal.SIGSTOP)
        while not stopped(p.pid): pass
        if p.poll() is not None: sys.exit(3)
        if glob.glob(target): break
        p.send_signal(signal.SIGCONT)
else:
    goal = step() + random.randint(1, 3)
    while step() < goal:
        if p.poll() is not None: sys.exit(3)
        time.sleep(0.001)
    time.sleep(random.randint(0, 4) / 1000)
if p.poll() is not None: sys.exit(3)
p.send_signal(signal.SIGKILL)
p.wait()
if glob.glob(os.path.join(run, ".checkpoint.tmp", f"*.tmp.{p.pid}")): print("mid_write")
PY
# A wider model here (126k parameters, a 1.5 MB checkpoint): the files being
# written take a fair share of each step even on a tmpfs.
cat >"$W/small.json" <<'J'
{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
 "head_dim": 32, "intermediate_size": 256, "vocab_size": 64, "max_position_embeddings": 64}
J
AK="${A/tiny.json/small.json}"
$M train --out "$W/ref" $AK --steps 50 --save-every 1 2>/dev/null
K="$W/kill"
kills=0 mid_write=0 broken=0 notes="" started=""
for mode in file:optimizer.safetensors file:model.safetensors "file:*" random random random random random; do
    if [ -z "$started" ]; then cmd=($M train --out "$K" $AK --steps 50 --save-every 1); started=1
    else cmd=($M train --out "$K" --resume); fi
    out=$(python3 "$W/kill_run.py" "$K" "$mode" -- "${cmd[@]}") || break  # it finished first
    kills=$((kills + 1))
    [ "$out" = mid_write ] && mid_write=$((mid_write + 1))
    if complete "$K"; then notes+=" $(ckpt_step "$K")"; else broken=$((broken + 1)); notes+=" BROKEN"; fi
done
rc=0
if [ "$(ckpt_step "$K")" != 50 ]; then $M train --out "$K" --resume 2>>"$K.log"; rc=$?; fi
check kill.checkpoint_always_complete '[ $kills -ge 6 ] && [ $broken -eq 0 ]' \
    "$kills kills, $broken left an incomplete checkpoint (steps:$notes)"
check kill.some_inside_checkpoint_write '[ $mid_write -ge 3 ]' "$mid_write of $kills kills left a temporary file in .checkpoint.tmp"
check kill.resume_bit_identical '[ $rc -eq 0 ] && same_run "$W/ref" "$K"' \
    "exit $rc; final run differs from the uninterrupted one (kills at steps:$notes)"
check kill.stale_temp_removed '[ ! -e "$K/.checkpoint.tmp" ] && [ "$(ckpt_step "$K")" = 50 ]' \
    "$(ls -A "$K")"
echo "kill rounds: $kills kills, $mid_write inside a checkpoint write, checkpoint steps:$notes"

# ---- disk full, unwritable directory ----------------------------------------
echo "[${SECONDS}s] disk full, unwritable directory"
# The reference for these: 20 steps, checkpoints every 5.
$M train --out "$W/ref20" $A --steps 20 --save-every 5 2>/dev/null
$M train --out "$W/ref5" $A --steps 20 --save-every 5 --stop-at 5 2>/dev/null
same_ckpt() {  # same_ckpt A B: the two checkpoints' files are identical
    for f in model.safetensors optimizer.safetensors config.json; do
        cmp -s "$1/checkpoint/$f" "$2/checkpoint/$f" || return 1
    done
    [ "$(ckpt_step "$1")" = "$(ckpt_step "$2")" ]
}

# A tmpfs that holds one checkpoint but not two (the save at step 10 needs
# the old and the new one at once).
mkdir -p "$W/mnt"
if mount -t tmpfs -o size=400k tmpfs "$W/mnt" 2>/dev/null; then
    MNT="$W/mnt"
    err=$($M train --out "$MNT/run" $A --steps 20 --save-every 5 2>&1 >/dev/null)
    rc=$?
    check disk_full.clear_error '[ $rc -ne 0 ] && grep -q "No space left on device" <<<"$err" && grep -q "$MNT/run" <<<"$err"' \
        "exit $rc: $(tail -n 2 <<<"$err")"
    check disk_full.previous_checkpoint_intact 'same_ckpt "$W/ref5" "$MNT/run" && complete "$MNT/run"' \
        "checkpoint at step $(ckpt_step "$MNT/run"), expected the step-5 one unchanged"
    cp -a "$MNT/run" "$W/after_enospc"
    umount "$MNT"; MNT=""
    $M train --out "$W/after_enospc" --resume 2>/dev/null
    check disk_full.resume_bit_identical 'same_run "$W/ref20" "$W/after_enospc"' "resumed run differs"
else
    echo "note: cannot mount a tmpfs here (not root?): the ENOSPC check is skipped, the file-size limit one runs"
fi

# A file-size limit below the optimizer file (EFBIG): the save at step 10
# fails while writing. SIGXFSZ is ignored so write() reports the error.
cp -a "$W/ref5" "$W/fsize"
cp -a "$W/ref5" "$W/fsize_before"
err=$( (ulimit -f 120; trap '' XFSZ; exec $M train --out "$W/fsize" --resume) 2>&1 >/dev/null)
rc=$?
check file_too_large.clear_error '[ $rc -ne 0 ] && grep -q "File too large" <<<"$err" && grep -q "safetensors" <<<"$err"' \
    "exit $rc: $(tail -n 2 <<<"$err")"
check file_too_large.previous_checkpoint_intact 'same_ckpt "$W/fsize_before" "$W/fsize" && complete "$W/fsize"' \
    "checkpoint changed or incomplete"
$M train --out "$W/fsize" --resume 2>/dev/null
check file_too_large.resume_bit_identical 'same_run "$W/ref20" "$W/fsize"' "resumed run differs"

# The run directory made read-only while training: the next save fails.
# Root ignores permissions, so as root the run goes as user nobody. The run
# checkpoints at step 200 and 400: the permission goes at step 206.
$M train --out "$W/ref400" $A --steps 400 --save-every 200 2>/dev/null
$M train --out "$W/ref200" $A --steps 400 --save-every 200 --stop-at 200 2>/dev/null
as_user=()
if [ "$(id -u)" = 0 ]; then
    if setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
        as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    else
        as_user=(none)
    fi
fi
if [ "${as_user[0]:-}" != none ]; then
    R="$W/ro"
    cp -a "$W/ref200" "$R"
    [ "$(id -u)" = 0 ] && chown -R 65534:65534 "$R"
    "${as_user[@]}" $M train --out "$R" --resume 2>"$W/ro.log" &
    pid=$!
    # Once it trains past the checkpoint (metrics trimmed and reopened),
    # take away the write permission.
    wait_for '[ "$(steps_logged "$R")" -ge 206 ]' $pid
    chmod 555 "$R"
    wait $pid
    rc=$?
    err=$(cat "$W/ro.log")
    check unwritable.clear_error '[ $rc -ne 0 ] && grep -q "Permission denied" <<<"$err" && grep -q "$R" <<<"$err"' \
        "exit $rc: $(tail -n 2 <<<"$err")"
    check unwritable.previous_checkpoint_intact 'same_ckpt "$W/ref200" "$R" && complete "$R"' \
        "checkpoint at step $(ckpt_step "$R") changed or incomplete"
    chmod 755 "$R"
    "${as_user[@]}" $M train --out "$R" --resume 2>/dev/null
    check unwritable.resume_bit_identical 'same_run "$W/ref400" "$R"' "resumed run differs"
else
    echo "note: running as root without setpriv: the unwritable-directory check is skipped"
fi

# ---- non-finite loss ---------------------------------------------------------
echo "[${SECONDS}s] non-finite loss"
N="$W/nan"
$M train --out "$N" $A --steps 30 --save-every 1 --stop-at 8 2>/dev/null
python3 - "$N/checkpoint/model.safetensors" <<'PY'
import sys
from safetensors.numpy import load_file, save_file
t = load_file(sys.argv[1])
t["model.norm.weight"][0] = float("nan")   # every logit, so every loss, becomes NaN
save_file(t, sys.argv[1] + ".new", metadata={"format": "pt"})
PY
mv "$N/checkpoint/model.safetensors.new" "$N/checkpoint/model.safetensors"
cp -a "$N/checkpoint" "$W/nan_before"
cp -a "$N" "$W/nan_stop"
err=$($M train --out "$N" --resume --max-bad-steps 3 2>&1 >/dev/null)
rc=$?
check nonfinite.stops_naming_step '[ $rc -ne 0 ] && grep -q "step 11: loss -\?nan" <<<"$err" && grep -q "3 non-finite steps in a row" <<<"$err" && grep -q "the checkpoint of step 8" <<<"$err"' \
    "exit $rc: $(tail -n 1 <<<"$err")"
check nonfinite.skipped_steps_reported '[ "$(grep -c "update skipped" <<<"$err")" = 2 ]' "$err"
check nonfinite.no_update_applied 'cmp -s "$W/nan_before/model.safetensors" "$N/checkpoint/model.safetensors" && cmp -s "$W/nan_before/optimizer.safetensors" "$N/checkpoint/optimizer.safetensors" && [ "$(ckpt_step "$N")" = 8 ]' \
    "the checkpoint moved to step $(ckpt_step "$N") or its weights/optimizer changed"
check nonfinite.metrics_stay_json 'python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = [r for r in rows if \"loss\" in r and r[\"loss\"] is None]
assert [r[\"step\"] for r in bad] == [9, 10], bad
" "$N/metrics.jsonl" 2>/dev/null' "metrics.jsonl: $(tail -n 3 "$N/metrics.jsonl")"
err=$($M train --out "$N" --resume 2>&1 >/dev/null)
rc=$?
check nonfinite.default_limit_5 '[ $rc -ne 0 ] && grep -q "step 13: .*5 non-finite steps in a row" <<<"$err"' \
    "exit $rc: $(tail -n 1 <<<"$err")"
# Skipped steps change nothing: 4 of them, then a checkpoint (--stop-at)
# holds the same weights and AdamW moments, the step count and the streak.
$M train --out "$W/nan_stop" --resume --max-bad-steps 100 --stop-at 12 2>/dev/null
rc=$?
check nonfinite.skipped_steps_change_nothing '[ $rc -eq 0 ] && same_tensors "$W/nan_before/model.safetensors" "$W/nan_stop/checkpoint/model.safetensors" && cmp -s "$W/nan_before/optimizer.safetensors" "$W/nan_stop/checkpoint/optimizer.safetensors" && python3 -c "
import json, sys
s = json.load(open(sys.argv[1]))
assert (s[\"step\"], s[\"bad_steps\"], s[\"optimizer_step\"]) == (12, 4, 8), s
" "$W/nan_stop/checkpoint/state.json"' "exit $rc; $(cat "$W/nan_stop/checkpoint/state.json" 2>&1 | tr -d '\n\t')"
err=$($M train --out "$W/x" $A --max-bad-steps 0 2>&1 >/dev/null)
check nonfinite.flag_range '[ $? -eq 2 ] && grep -q "max-bad-steps 0 is out of range" <<<"$err"' "$err"

# ---- SIGINT, SIGTERM ---------------------------------------------------------
echo "[${SECONDS}s] SIGINT, SIGTERM"
S_ARGS="$A --steps 1500 --save-every 0 --eval-every 500"
$M train --out "$W/ref_sig" $S_ARGS 2>/dev/null
for sig in INT TERM; do
    D="$W/sig_$sig"
    $M train --out "$D" $S_ARGS 2>"$W/sig_$sig.log" &
    pid=$!
    wait_for '[ "$(steps_logged "$D")" -ge 50 ]' $pid
    kill -$sig $pid
    wait $pid
    rc=$?
    n=$(kill -l $sig)
    check "signal_$sig.saves_and_exits_0" '[ $rc -eq 0 ] && grep -q "signal $n: checkpoint saved at step" "$W/sig_$sig.log" && complete "$D" && [ "$(ckpt_step "$D")" -ge 50 ] && [ "$(ckpt_step "$D")" -lt 1500 ]' \
        "exit $rc, checkpoint step $(ckpt_step "$D"): $(tail -n 1 "$W/sig_$sig.log")"
    $M train --out "$D" --resume 2>/dev/null
    check "signal_$sig.resume_bit_identical" 'same_run "$W/ref_sig" "$D"' "resumed run differs"
done
echo "[${SECONDS}s] done"
