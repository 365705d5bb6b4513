"""Text in and text out: run directories carry their tokenizer, `mhar sample
--prompt` streams text, and `mhar score` computes lm-evaluation-harness's
log-likelihoods.

Setup (cheap, about 30 s): a corpus of Python standard library files, a BPE
of 600 tokens (`mhar tokenizer train`), token shards with the tokenizer
beside them (`mhar data tokenize`), then nano runs of 20 steps: baseline and
mhar (H = 2).
  - the run directory holds tokenizer.json + tokenizer_config.json;
    transformers' AutoTokenizer loads it and gives mhar's ids for the same
    texts (unicode, special token text, code), and decodes them back to the
    text; `mhar convert` and `mhar train --init-from` (on token files without
    a tokenizer) carry the files on byte for byte; token files without a
    tokenizer (mhar data synth) give a run without one, and --prompt on it is
    refused with the reason.
  - score, baseline: every loglik against an independent Python version of
    lm-eval's rules (_encode_pair with its trailing-space move, the empty
    context's prefix token, left truncation, rolling windows of
    get_rolling_token_windows + make_disjoint_window) on HF
    Qwen3ForCausalLM's float64 logits, with the HF tokenizer. Window 24
    tokens, so contexts are cut and documents take several windows.
  - score, mhar: the same against tests/ref/model.py in float64.
    Tolerance: |c - ref| <= 1e-4 · (1 + |ref|). The C side runs in fp32:
    each token's log-probability is off by ~1e-6 of the logits' scale, a
    loglik sums at most a few dozen of them; a wrong token, window or
    position is off by >= 1e-1.
  - the aggregates (acc, acc_norm with characters as the length, their
    mean_stderr, token/byte/word perplexity, bits per byte) from the
    reference logliks, to 1e-6 relative; predictions identical.
  - sample --prompt at temperature 0 prints the prompt then exactly the
    bytes of the greedy ids (as --prompt-tokens gives them, cut at the
    end-of-text token), and --prompt-tokens keeps its one-line format.
  - input errors name FILE:LINE and the reason.
"""
import json
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ref import common  # noqa: E402
from ref import model as ref_model  # noqa: E402
from ref.common import Report  # noqa: E402

VOCAB = 600
WINDOW = 24
TOL = 1e-4

# Texts for the tokenizer's agreement: code, unicode (2-, 3-, 4-byte
# characters, combining marks), special token text, whitespace runs.
TEXTS = [
    "def main(argv):\n    return 0\n",
    "naïve café — 中文字符 and emoji 😀 e\u0301 \u00a0nbsp",
    "first document<|endoftext|>second document",
    "  \n\n\tindented\r\n  x = [1, 22, 333, 4444]  ",
]

TASKS = [
    {"context": "import ", "choices": ["os", "sys", "zzqx"], "answer": 0},
    {"context": "def main(self", "choices": ["):", ", x):", ", *args, **kwargs):"], "answer": 0},
    # trailing spaces move to the choice; a unicode choice (characters != bytes)
    {"context": "for i in range(10):   ", "choices": ["print(i)", "pass", "é中😀"], "answer": 1},
    # the empty context: the prefix token
    {"context": "", "choices": ["import os", "qqq"], "answer": 0},
    # longer than the window: the context is cut on the left
    {"context": "class Foo(object):\n    def __init__(self, a, b):\n        self.a = a\n        self.b = b\n"
                "    def total(self):\n        return", "choices": [" self.a + self.b", " None"], "answer": 0},
    # special token text in the context
    {"context": "x = 1\n<|endoftext|>import", "choices": [" re", " json"], "answer": 1},
    {"text": "def foo(x):\n    return x + 1\n"},
    # several windows, the last one partial
    {"text": "import os\nimport sys\n\n\ndef main():\n    for name in sorted(os.listdir('.')):\n"
             "        print(name, os.path.getsize(name))\n    return 0\n\n\nif __name__ == '__main__':\n"
             "    sys.exit(main())\n"},
    {"text": "  leading spaces, naïve 中文 text\n"},
]


def mhar(*args, check=True, timeout=600):
    r = subprocess.run([str(common.mhar_binary()), *map(str, args)], capture_output=True, timeout=timeout)
    if check and r.returncode != 0:
        raise common.ToolError(f"mhar {' '.join(map(str, args[:2]))} exited {r.returncode}: "
                               f"{r.stderr.decode(errors='replace').strip()[-400:]}")
    return r


def make_data(d):
    corpus = d / "corpus"
    corpus.mkdir()
    src = Path(sysconfig.get_paths()["stdlib"])
    for i, f in enumerate(sorted(src.glob("*.py"))[:30]):
        (corpus / f"{i:03d}.txt").write_text(f.read_text(errors="replace"))
    mhar("tokenizer", "train", "--corpus", corpus, "--out", d / "tok.bpe", "--vocab", VOCAB, "--quiet")
    mhar("data", "tokenize", "--tokenizer", d / "tok.bpe", "--corpus", corpus, "--out", d / "data",
         "--val-fraction", 0.1)


def train(d, out, *extra, data="data", preset=True):
    mhar("train", *(["--preset", "nano"] if preset else []), "--train", d / data / "train.bin", "--val", d / data / "val.bin",
         "--steps", 20, "--batch", 4, "--seq", 64, "--eval-every", 20, "--eval-batches", 1, "--out", d / out,
         *extra)
    return d / out


def mhar_ids(d, tokenizer, text):
    (d / "t.txt").write_text(text)
    mhar("tokenizer", "encode", "--tokenizer", tokenizer, "--in", d / "t.txt", "--out", d / "t.bin")
    return [int(x) for x in common.read_tokens(d / "t.bin")[0]]


# ---- run directories and HF's tokenizer ----------------------------------------

def check_tokenizer_files(rep, d, run):
    from transformers import AutoTokenizer
    files = [f for f in ("tokenizer.json", "tokenizer_config.json") if not (run / f).exists()]
    if not rep.check("run_dir_has_tokenizer", not files, f"missing {files}" if files else "tokenizer files written"):
        return None
    tok = AutoTokenizer.from_pretrained(str(run))
    cfg = json.loads((run / "tokenizer_config.json").read_text())
    rep.check("tokenizer_config", cfg.get("eos_token") == "<|endoftext|>" and tok.eos_token_id == VOCAB - 1
              and tok.bos_token is None and cfg.get("model_max_length") == 2048,
              f"eos {tok.eos_token_id}, bos {tok.bos_token}, config {cfg}")
    for i, text in enumerate(TEXTS):
        with rep.guard(f"hf_tokenizer_ids_{i}"):
            want = tok(text, add_special_tokens=False)["input_ids"]
            got = mhar_ids(d, run / "tokenizer.json", text)
            got_bpe = mhar_ids(d, d / "tok.bpe", text)
            rep.check(f"hf_tokenizer_ids_{i}", got == want == got_bpe, f"{len(want)} ids" if got == want
                      else f"mhar {got[:12]}... vs HF {want[:12]}...")
            dec = tok.decode(want)
            rep.check(f"hf_tokenizer_decode_{i}", dec == text, f"{dec!r} vs {text!r}")
    return tok


def check_carry(rep, d, base):
    with rep.guard("convert_carries_tokenizer"):
        mhar("convert", "--run", base, "--out", d / "conv", "--route-heads", 2)
        same = all((d / "conv" / f).read_bytes() == (base / f).read_bytes()
                   for f in ("tokenizer.json", "tokenizer_config.json"))
        rep.check("convert_carries_tokenizer", same, "tokenizer files identical")
    with rep.guard("init_from_carries_tokenizer"):
        (d / "bare").mkdir()  # the same token files, without the tokenizer beside them
        for f in ("train.bin", "val.bin"):
            shutil.copy(d / "data" / f, d / "bare" / f)
        run = train(d, "cont", "--init-from", d / "conv", data="bare", preset=False)
        same = all((run / f).read_bytes() == (base / f).read_bytes()
                   for f in ("tokenizer.json", "tokenizer_config.json"))
        rep.check("init_from_carries_tokenizer", same, "tokenizer files identical")
    with rep.guard("synth_run_has_no_tokenizer"):
        (d / "synth").mkdir()
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", d / "synth" / f"{split}.bin", "--vocab", 64, "--count", 5000,
                 "--seed", seed)
        run = train(d, "synth_run", data="synth")
        r = mhar("sample", "--run", run, "--prompt", "hi", check=False)
        err = r.stderr.decode()
        rep.check("synth_run_has_no_tokenizer", not (run / "tokenizer.json").exists() and r.returncode != 0
                  and "has no tokenizer" in err, f"rc {r.returncode}: {err.strip()}")


# ---- lm-eval's rules, written again in Python ------------------------------------

def rolling_windows(tokens, prefix, max_len):
    """get_rolling_token_windows(context_len=1), each window made disjoint
    (make_disjoint_window: the context keeps what the scored tokens do not
    cover)."""
    first = min(max_len, len(tokens))
    windows = [([prefix] + tokens[:first - 1], tokens[:first])]
    done = first
    while done < len(tokens):
        w = min(len(tokens) - done, max_len)
        end = done + w
        windows.append((tokens[end - max_len - 1:end - 1], tokens[end - w:end]))
        done += w
    return [(ctx[:len(ctx) - (len(cont) - 1)], cont) for ctx, cont in windows]


def requests(tok, task, prefix):
    """(context ids, continuation ids) per choice, or the windows of a text."""
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    if "text" in task:
        return rolling_windows(enc(task["text"]), prefix, WINDOW)
    out = []
    for choice in task["choices"]:
        context = task["context"]
        if context.rstrip() == "":
            out.append(([prefix], enc(context + choice)))
            continue
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            choice, context = context[-n_spaces:] + choice, context[:-n_spaces]
        whole, ctx = enc(context + choice), enc(context)
        out.append((ctx, whole[len(ctx):]))
    return out


def loglik(logits_fn, ctx, cont):
    seq = (ctx + cont)[-(WINDOW + 1):]
    inp = torch.tensor([seq[:-1]])
    logp = torch.log_softmax(logits_fn(inp)[0].double(), dim=-1)
    n = len(seq) - 1
    return sum(logp[n - len(cont) + i, t].item() for i, t in enumerate(cont))


def reference(tok, logits_fn, prefix):
    items = []
    for task in TASKS:
        lls = [loglik(logits_fn, c, x) for c, x in requests(tok, task, prefix)]
        items.append(sum(lls) if "text" in task else lls)
    return items


def mean_stderr(x):
    mu = sum(x) / len(x)
    return mu, math.sqrt(sum((v - mu) ** 2 for v in x) / (len(x) - 1)) / math.sqrt(len(x))


def check_score(rep, d, run, tok, logits_fn, what):
    tasks = d / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in TASKS))
    mhar("score", "--run", run, "--tasks", tasks, "--max-length", WINDOW, "--json", d / f"{what}.json")
    got = json.loads((d / f"{what}.json").read_text())
    with torch.no_grad():
        want = reference(tok, logits_fn, tok.eos_token_id)
    worst, where = 0.0, ""
    for i, (g, w) in enumerate(zip(got["items"], want)):
        for a, b in zip(g["loglik"] if isinstance(w, list) else [g["loglik"]], w if isinstance(w, list) else [w]):
            err = abs(a - b) / (1 + abs(b))
            if err > worst:
                worst, where = err, f"item {i}: {a} vs {b}"
    rep.check(f"score_{what}_logliks", len(got["items"]) == len(want) and worst <= TOL,
              f"worst {worst:.1e} ({where}), tol {TOL:.0e}")
    # the aggregates from the reference logliks
    mc = [(t, w) for t, w in zip(TASKS, want) if "choices" in t]
    acc = [float(max(range(len(w)), key=lambda k: (w[k], -k)) == t["answer"]) for t, w in mc]
    norm = [float(max(range(len(w)), key=lambda k: (w[k] / len(t["choices"][k]), -k)) == t["answer"]) for t, w in mc]
    texts = [(t["text"], w) for t, w in zip(TASKS, want) if "text" in t]
    ll = sum(w for _, w in texts)
    n_tok = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t, _ in texts)
    n_bytes = sum(len(t.encode()) for t, _ in texts)
    n_words = sum(len(__import__("re").split(r"\s+", t)) for t, _ in texts)
    expect = {"acc": mean_stderr(acc)[0], "acc_stderr": mean_stderr(acc)[1], "acc_norm": mean_stderr(norm)[0],
              "acc_norm_stderr": mean_stderr(norm)[1], "token_perplexity": math.exp(-ll / n_tok),
              "byte_perplexity": math.exp(-ll / n_bytes), "word_perplexity": math.exp(-ll / n_words),
              "bits_per_byte": -ll / n_bytes / math.log(2)}
    have = {**got["multiple_choice"], **got["perplexity"]}
    bad = {k: (have.get(k), v) for k, v in expect.items()
           if have.get(k) is None or abs(have[k] - v) > 1e-6 * max(1, abs(v))}
    counts = (have["tokens"], have["bytes"], have["words"]) == (n_tok, n_bytes, n_words)
    rep.check(f"score_{what}_aggregates", not bad and counts,
              f"differ: {bad}, counts {(have['tokens'], have['bytes'], have['words'])} vs "
              f"{(n_tok, n_bytes, n_words)}" if bad or not counts else f"acc {expect['acc']:.3f}, "
              f"acc_norm {expect['acc_norm']:.3f}, token ppl {expect['token_perplexity']:.1f}")
    windows = [g.get("windows") for g in got["items"] if "windows" in g]
    truncated = max(max(g["truncated"]) for g in got["items"] if "truncated" in g)
    rep.check(f"score_{what}_windows_and_truncation", max(windows) >= 3 and truncated > 0,
              f"windows per document {windows}, most context tokens cut {truncated}")


# ---- sampling --------------------------------------------------------------------

def token_bytes(tok):
    """Each id's bytes, from tokenizer.json's byte-level strings."""
    table = {}
    n = 256
    for b in range(256):  # GPT-2's byte-to-character map
        printable = 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255
        table[chr(b) if printable else chr(n)] = b
        n += not printable
    out = {}
    for s, i in tok.backend_tokenizer.get_vocab(with_added_tokens=False).items():
        out[i] = bytes(table[c] for c in s)
    for i, t in tok.added_tokens_decoder.items():
        out[i] = t.content.encode()
    return out


def check_sample(rep, d, run, tok):
    tb = token_bytes(tok)
    eot = tok.eos_token_id
    for i, prompt in enumerate(["def ", "import os\nclass é中😀"]):
        with rep.guard(f"sample_text_greedy_{i}"):
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            out = mhar("sample", "--run", run, "--prompt-tokens", ",".join(map(str, ids)), "--steps", 40,
                       "--temperature", 0).stdout.decode().split()
            gen = [int(x) for x in out[len(ids):]]
            if eot in gen:
                gen = gen[:gen.index(eot)]
            text = mhar("sample", "--run", run, "--prompt", prompt, "--steps", 40, "--temperature", 0).stdout
            want = prompt.encode() + b"".join(tb[t] for t in gen) + b"\n"
            rep.check(f"sample_text_greedy_{i}", text == want and len(out) == len(ids) + 40,
                      f"{len(gen)} tokens, {len(text)} bytes" if text == want else f"{text!r} vs {want!r}")
    r = mhar("sample", "--run", run, "--prompt", "x", "--prompt-tokens", "1", check=False)
    rep.check("sample_prompt_and_ids_refused", r.returncode == 2 and b"not both" in r.stderr,
              r.stderr.decode().strip())


def check_pipeline(rep, run, tok):
    """Standard tools run on a routed mhar model: config.json names the
    tokenizer's end-of-text, and transformers' text-generation pipeline
    (remote code + AutoTokenizer) continues a prompt with mhar's text."""
    import transformers
    with rep.guard("pipeline_routed"):
        cfg = json.loads((run / "config.json").read_text())
        eos_ok = cfg["eos_token_id"] == tok.eos_token_id and tok.eos_token_id is not None
        pipe = transformers.pipeline("text-generation", model=str(run), trust_remote_code=True,
                                     dtype=torch.float32)
        prompt = "def "
        got = pipe(prompt, max_new_tokens=24, do_sample=False, return_full_text=True)[0]["generated_text"]
        want = mhar("sample", "--run", run, "--prompt", prompt, "--steps", 24, "--temperature", 0).stdout
        rep.check("pipeline_routed", eos_ok and got.encode() + b"\n" == want,
                  f"eos {cfg['eos_token_id']} vs tokenizer {tok.eos_token_id}; pipeline {got!r}, mhar {want!r}")


# ---- input errors ------------------------------------------------------------------

BAD = [
    ('{"context": "a", "choices": ["b"], "answer": 0}\n{"context": "a", "choices": ["b"]', ":2:", "invalid JSON"),
    ('{"context": "a", "choices": ["b", "c"], "answer": 2}', ":1:", "out of range"),
    ('\n\n{"context": "a", "choices": [], "answer": 0}', ":3:", "\"choices\" is empty"),
    ('{"context": "a", "choices": ["b", ""], "answer": 0}', ":1:", "choice 1 is empty"),
    ('{"text": ""}', ":1:", "\"text\" is empty"),
    ('{"context": "a", "answer": 0}', ":1:", "\"choices\" is missing"),
    ('[1, 2]', ":1:", "expected a JSON object"),
    ('{"context": "a", "choices": ["' + "word " * 40 + '"], "answer": 0}', ":1:", "more than the window of 24"),
    ('{"context": "def main(", "choices": [")"], "answer": 0}', ":1:", "merges into the context"),
]


def check_errors(rep, d, run):
    for i, (text, line, reason) in enumerate(BAD):
        f = d / f"bad{i}.jsonl"
        f.write_text(text)
        r = mhar("score", "--run", run, "--tasks", f, "--max-length", WINDOW, check=False)
        err = r.stderr.decode()
        rep.check(f"score_error_{i}", r.returncode == 1 and f"bad{i}.jsonl{line}" in err and reason in err,
                  f"rc {r.returncode}: {err.strip()}")


def main():
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    import transformers
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    rep = Report()
    d = Path(tempfile.mkdtemp(prefix="mhar_text_"))
    try:
        with rep.guard("setup"):
            make_data(d)
            base = train(d, "base")
            routed = train(d, "routed", "--residual", "mhar", "--route-heads", 2)
            rep.passed("setup", "corpus, tokenizer, shards, baseline and mhar runs")
        tok = check_tokenizer_files(rep, d, base)
        if tok is None:
            rep.finish()
        check_carry(rep, d, base)
        with rep.guard("score_baseline_logliks"):
            hf = transformers.Qwen3ForCausalLM.from_pretrained(str(base), attn_implementation="eager",
                                                               dtype=torch.float64).eval()
            check_score(rep, d, base, tok, lambda x: hf(input_ids=x).logits, "baseline")
        with rep.guard("score_mhar_logliks"):
            cfg = json.loads((routed / "config.json").read_text())
            params = {k: v.double() for k, v in common.load_safetensors(routed / "model.safetensors").items()}
            check_score(rep, d, routed, tok, lambda x: ref_model.forward(cfg, params, x), "mhar")
        check_sample(rep, d, base, tok)
        check_pipeline(rep, routed, tok)
        check_errors(rep, d, base)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
