"""PyTorch peers for `mhar bench --torch`: full training steps (forward,
backward, gradient clipping, AdamW) in fp32 on mhar's bench shape, timed
after untimed warm-up steps (two under torch.compile, where the first
compiles and the second may recompile; one otherwise). The peers:

  qwen3          HF transformers' Qwen3ForCausalLM, eager PyTorch, sdpa attention
  qwen3_compile  the same model under torch.compile (inductor)
  SCHEME         any other mhar scheme (attnres, mhar, block, hc, ...): mhar's
                 own transformers class, src/hf/modeling_mhar.py, with sdpa
                 attention and routing in the paper's eager form (each read
                 stacks its sources, softmaxes the logits over them and sums)

peer_model() builds them; tests/test_bench_torch.py loads mhar run
directories into it and checks mhar's logits, so a peer computes the same
function as the mhar scheme it is compared with. Benchmark helper only: the
product never runs Python. A line per peer on stderr; the last line on
stdout is {"torch": VERSION, "threads": N, "peers": [{"name", "what",
"tok_per_s"} or {"name", "what", "error"}, ...]}: a peer that fails (say
torch.compile without a working C++ toolchain) is reported, not fatal."""
import argparse
import importlib
import json
import os
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import Qwen3Config, Qwen3ForCausalLM

HF_DIR = Path(__file__).resolve().parents[1] / "src" / "hf"
# mhar's fixed conventions (SPEC §1) beyond the shape: the peers must match them.
CONVENTIONS = dict(rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False, attention_dropout=0.0,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "intermediate_size", "vocab_size", "max_position_embeddings")
WHAT = {"qwen3": "HF Qwen3, eager, sdpa", "qwen3_compile": "HF Qwen3, torch.compile"}


def mhar_classes():
    """MharConfig, MharForCausalLM from src/hf/ (a package there in name
    only: modeling_mhar imports its config relatively)."""
    if "mhar_remote" not in sys.modules:
        pkg = types.ModuleType("mhar_remote")
        pkg.__path__ = [str(HF_DIR)]
        sys.modules["mhar_remote"] = pkg
    modeling = importlib.import_module("mhar_remote.modeling_mhar")
    return modeling.MharConfig, modeling.MharForCausalLM


def peer_model(name, shape, heads=1, blocks=0):
    """The fp32 peer `name` (qwen3, qwen3_compile or an mhar scheme) of a
    model with `shape` (the SHAPE_KEYS of a config.json), head tied as in mhar.
    qwen3_compile is returned uncompiled: compiling is the timing's part."""
    cfg = dict(CONVENTIONS, **{k: shape[k] for k in SHAPE_KEYS})
    if name in ("qwen3", "qwen3_compile"):
        model = Qwen3ForCausalLM(Qwen3Config(**cfg, use_sliding_window=False))
    else:
        config_cls, model_cls = mhar_classes()
        model = model_cls(config_cls(**cfg, mhar_family="qwen3", attnres_mode=name, attnres_num_heads=heads,
                                     attnres_num_blocks=blocks))
    model.set_attn_implementation("sdpa")
    return model.float()


def time_peer(name, shape, heads, blocks, batch, seq, steps):
    """Median tokens/s of `steps` timed training steps."""
    torch.manual_seed(0)
    model = peer_model(name, shape, heads, blocks).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    run = torch.compile(model) if name == "qwen3_compile" else model
    vocab = shape["vocab_size"]
    ids = torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(7))
    warm = 2 if name == "qwen3_compile" else 1
    times = []
    for i in range(warm + steps):
        t0 = time.perf_counter()
        logits = run(input_ids=ids[:, :-1], use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss {loss.item()} at step {i}")
        if i >= warm:
            times.append(time.perf_counter() - t0)
    return batch * seq / statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", default="qwen3", help="comma list: qwen3, qwen3_compile, or mhar scheme names")
    for key in SHAPE_KEYS[:-1]:
        ap.add_argument("--" + key.replace("_", "-"), type=int, required=True)
    ap.add_argument("--route-heads", type=int, default=1)
    ap.add_argument("--route-blocks", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    threads = int(os.environ.get("OMP_NUM_THREADS") or len(os.sched_getaffinity(0)))
    torch.set_num_threads(threads)
    shape = {k: getattr(a, k) for k in SHAPE_KEYS[:-1]}
    shape["max_position_embeddings"] = max(2048, a.seq)
    peers = []
    for name in a.peers.split(","):
        what = WHAT.get(name, f"modeling_mhar {name}, eager, sdpa")
        heads = 1 if name == "attnres" else a.route_heads
        try:
            tok = time_peer(name, shape, heads, a.route_blocks, a.batch, a.seq, a.steps)
            peers.append({"name": name, "what": what, "tok_per_s": round(tok, 1)})
            print(f"  torch {name:14s} {tok:9.0f} tok/s  ({what})", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - a failed peer is reported, the others still run
            traceback.print_exc(file=sys.stderr)
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:200]
            peers.append({"name": name, "what": what, "error": msg})
            print(f"  torch {name:14s} failed: {msg}", file=sys.stderr)
    print(json.dumps({"torch": torch.__version__, "threads": threads, "peers": peers}))


if __name__ == "__main__":
    main()
