#!/usr/bin/env bash
# Tokenizer benchmark (not a test): training time for an 8192-token vocabulary
# and encoding throughput, mhar against HF tokenizers (its BPE trainer, and
# encode_batch over the documents on all cores) and tiktoken, on the same text
# with the same split pattern (Llama-3's, mhar's default).
#
# usage: tools/bench_tokenizer.sh [CORPUS_DIR] [MB]
#   CORPUS_DIR  text to use (e.g. `mhar data corpus --source full` output);
#               default: text files found on this machine (the Python library
#               with site-packages, /usr/include, /usr/share), valid UTF-8 only
#   MB          training text size (default 100); encoding uses 20 MB held out
# Prints one line per figure (medians of 3 runs for encoding) and a JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x ./mhar ] || make -j"$(nproc)" mhar >/dev/null
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W" "${1:-}" "${2:-100}" <<'PY'
import json, os, subprocess, sys, sysconfig, time, statistics
from pathlib import Path
W, src, mb = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
budget, held_budget = mb << 20, 20 << 20

def candidates():
    if src:
        for d, dirs, files in os.walk(src):
            dirs.sort()
            for f in sorted(files):
                yield Path(d) / f
        return
    roots = [sysconfig.get_paths()["stdlib"], "/usr/include", "/usr/share"]
    for r in roots:
        for d, dirs, files in os.walk(r):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".h", ".c", ".txt", ".rst", ".md", ".html", ".tex")):
                    yield Path(d) / f

# Documents (one per file, split on <|endoftext|> for a built corpus): every
# 6th goes to the held-out set until it is full.
train, held, n_train, n_held, i = [], [], 0, 0, 0
for p in candidates():
    if n_train >= budget and n_held >= held_budget:
        break
    try:
        if p.is_symlink() or not p.is_file() or p.stat().st_size > (32 << 20):
            continue
        b = p.read_bytes()
        t = b.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        continue
    if not b or b"\0" in b:
        continue
    for doc in (t.split("<|endoftext|>") if src else [t]):
        if not doc:
            continue
        i += 1
        if i % 6 == 0 and n_held < held_budget:
            held.append(doc); n_held += len(doc.encode())
        elif n_train < budget:
            train.append(doc); n_train += len(doc.encode())
print(f"text: {n_train / 1e6:.1f} MB training ({len(train)} documents), "
      f"{n_held / 1e6:.1f} MB held out ({len(held)} documents)", flush=True)
corpus = W / "corpus"
corpus.mkdir()
# ~1 MB files of whole documents, each followed by <|endoftext|> (the corpus
# builder's shard form; both trainers cut at the separator).
buf, k = [], 0
def flush():
    global buf, k
    if buf:
        (corpus / f"shard-{k:04d}.txt").write_text("".join(d + "<|endoftext|>" for d in buf), encoding="utf-8")
        buf, k = [], k + 1
size = 0
for d in train:
    buf.append(d); size += len(d)
    if size > (1 << 20):
        flush(); size = 0
flush()
held_text = "<|endoftext|>".join(held)
(W / "held.txt").write_text(held_text, encoding="utf-8")
MHAR = "./mhar"
res = {"train_MB": round(n_train / 1e6, 1), "held_MB": round(n_held / 1e6, 1), "cores": os.cpu_count()}

t0 = time.time()
r = subprocess.run([MHAR, "tokenizer", "train", "--corpus", str(corpus), "--vocab", "8192", "--out",
                    str(W / "m.bpe"), "--quiet"], capture_output=True, text=True, check=True)
res["mhar_train_s"] = round(time.time() - t0, 2)
print(f"mhar train (8192): {res['mhar_train_s']} s  {r.stdout.strip()}", flush=True)

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
       r"|\s*[\r\n]+|\s+(?!\S)|\s+")
hf = Tokenizer(models.BPE())
hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PAT), behavior="isolated"),
                                            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
hf.decoder = decoders.ByteLevel()
tr = trainers.BpeTrainer(vocab_size=8192, special_tokens=["<|endoftext|>"], show_progress=False,
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
t0 = time.time()
hf.train_from_iterator(train, tr)
res["hf_train_s"] = round(time.time() - t0, 2)
print(f"HF tokenizers BpeTrainer (8192): {res['hf_train_s']} s", flush=True)

def median3(f):
    ts = []
    for _ in range(3):
        t0 = time.time(); f(); ts.append(time.time() - t0)
    return statistics.median(ts)
mb_held = n_held / 1e6
t = median3(lambda: subprocess.run([MHAR, "tokenizer", "encode", "--tokenizer", str(W / "m.bpe"), "--in",
                                    str(W / "held.txt"), "--out", str(W / "h.tok")], capture_output=True, check=True))
res["mhar_encode_MBps"] = round(mb_held / t, 1)
print(f"mhar encode (whole command, file to token file): {res['mhar_encode_MBps']} MB/s", flush=True)
subprocess.run([MHAR, "tokenizer", "export", "--tokenizer", str(W / "m.bpe"), "--hf", str(W / "m.json"),
                "--tiktoken", str(W / "m.tiktoken")], capture_output=True, check=True)
hfm = Tokenizer.from_file(str(W / "m.json"))
t = median3(lambda: hfm.encode_batch(held, add_special_tokens=False))
res["hf_encode_batch_MBps"] = round(mb_held / t, 1)
print(f"HF tokenizers encode_batch (documents, all cores), same tokenizer: {res['hf_encode_batch_MBps']} MB/s", flush=True)
import base64, tiktoken
ranks = {base64.b64decode(l.split()[0]): int(l.split()[1]) for l in open(W / "m.tiktoken")}
side = json.load(open(str(W / "m.tiktoken") + ".json"))
enc = tiktoken.Encoding("m", pat_str=side["pat_str"], mergeable_ranks=ranks, special_tokens=side["special_tokens"])
t = median3(lambda: enc.encode_ordinary_batch(held, num_threads=os.cpu_count()))
res["tiktoken_encode_batch_MBps"] = round(mb_held / t, 1)
print(f"tiktoken encode_ordinary_batch (documents, all cores): {res['tiktoken_encode_batch_MBps']} MB/s", flush=True)
print(json.dumps(res))
PY
