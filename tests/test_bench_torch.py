"""The PyTorch peers of `mhar bench --torch` are faithful: tools/bench_torch.py's
peer_model(), built for a run's shape the way the bench builds it and loaded
with the run's weights, gives mhar's logits.

Runs (nano, vocab 512, 3 training steps on synthetic tokens), each with the
peer the bench times it against: baseline (qwen3: HF Qwen3ForCausalLM, sdpa),
attnres, mhar H = 4 and block H = 2, N = 3 (modeling_mhar in the paper's eager
form). Three steps leave the routing queries near their init 0 (uniform
routing), so first every scheme tensor in model.safetensors is replaced by a
perturbed value (tests/ref/model.py's test init), as test_hf_remote.py does.

Per run:
  - tensors: the peer's parameters are the run's, name for name and shape
    for shape (the tied LM head aside), nothing left over on either side;
  - logits: the peer's logits on a fixed batch equal tool_dump's to 1e-4
    relative (max|a-b| / max|b|): both compute in fp32 and differ by
    summation order (~1e-6); a wrong convention is off by >= 1e-2;
  - routing_matters (routed runs): the check can fail: with the scheme
    tensors at the SPEC init the logits move by more than 100x the tolerance.
And the helper as bench runs it: bench_torch.py on the nano shape (one timed
step) prints a JSON last line with a positive tok_per_s for every eager peer,
and a peer that fails (an unknown name) is reported with its error while the
others still run.
"""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import bench_torch  # noqa: E402
from ref import common  # noqa: E402
from ref import model as ref_model  # noqa: E402
from ref.common import Report, rel_err  # noqa: E402
from ref.perturb import perturb_scheme, scheme_names  # noqa: E402

B, T = 2, 32
VOCAB = 512
TOKEN_SEED = 11
PERTURB_SEED = 5
TOL = 1e-4
SENSITIVITY = 100 * TOL
# run name = scheme, peer, routing heads, blocks
RUNS = [("baseline", "qwen3", 1, 0), ("attnres", "attnres", 1, 0), ("mhar", "mhar", 4, 0),
        ("block", "block", 2, 3)]


def mhar(*args):
    return common.run_command([common.mhar_binary(), *args], timeout=600)


def make_run(d, name, heads, blocks):
    run = d / name
    (d / "shape.json").write_text(json.dumps(dict(common.NANO, vocab_size=VOCAB)))
    mhar("train", "--config", d / "shape.json", "--residual", name, "--route-heads", heads,
         *(["--route-blocks", blocks] if blocks else []), "--train", d / "train.bin", "--val", d / "val.bin",
         "--steps", 3, "--batch", B, "--seq", T, "--eval-batches", 2, "--out", run)
    return run


def logits_of(model, inputs):
    with torch.no_grad():
        return model(input_ids=inputs, use_cache=False).logits


def check_run(rep, d, name, peer, heads, blocks, inputs):
    run = make_run(d, name, heads, blocks)
    cfg = json.loads((run / "config.json").read_text())
    if name != "baseline":
        perturb_scheme(run, cfg, PERTURB_SEED)
    want = common.tool_dump(run, d / "batch.bin", B, T, d / f"{name}.dump.safetensors")["logits"]
    model = bench_torch.peer_model(peer, cfg, heads, blocks).eval()
    weights = common.load_safetensors(run / "model.safetensors")
    state = model.state_dict()
    tied = {"lm_head.weight"} if cfg["tie_word_embeddings"] else set()
    missing = sorted(set(state) - set(weights) - tied)
    unexpected = sorted(set(weights) - set(state))
    shapes = sorted(k for k in set(state) & set(weights) if tuple(state[k].shape) != tuple(weights[k].shape))
    if not rep.check(f"bench_torch.{name}.tensors", not missing and not unexpected and not shapes,
                     f"peer {peer}: missing {missing[:3]}, unexpected {unexpected[:3]}, shapes differ {shapes[:3]}"
                     if missing or unexpected or shapes else f"peer {peer}: {len(weights)} tensors, all matched"):
        return
    model.load_state_dict(weights, strict=False)
    if tied:
        rep.check(f"bench_torch.{name}.tied", model.lm_head.weight.data_ptr()
                  == model.model.embed_tokens.weight.data_ptr(), "the LM head is the embedding")
    rep.within(f"bench_torch.{name}.logits", rel_err(logits_of(model, inputs), want), TOL, f"peer {peer}")
    if name == "baseline":
        return
    spec = ref_model.init_params(cfg, PERTURB_SEED, random_routing=False)
    with torch.no_grad():
        for k in scheme_names(cfg):
            state[k].copy_(spec[k])
    err = rel_err(logits_of(model, inputs), want)
    rep.check(f"bench_torch.{name}.routing_matters", err > SENSITIVITY,
              f"scheme tensors at SPEC init: rel err {err:.2e} vs mhar (must exceed {SENSITIVITY:.0e})")


def check_helper(rep):
    """bench_torch.py as `mhar bench --torch` runs it (without the compiled
    peer, which takes a minute to compile)."""
    with rep.guard("bench_torch.helper"):
        n = common.NANO
        args = [sys.executable, common.REPO / "tools" / "bench_torch.py",
                "--peers", "qwen3,attnres,mhar,block,no_such_peer", "--route-heads", 2, "--route-blocks", 3,
                "--batch", 2, "--seq", 16, "--steps", 1, "--vocab-size", VOCAB,
                *[a for k in bench_torch.SHAPE_KEYS[:-2] for a in ("--" + k.replace("_", "-"), n[k])]]
        last = common.run_command(args, timeout=600).stdout.strip().splitlines()[-1]
        out = json.loads(last)
        peers = {p["name"]: p for p in out["peers"]}
        timed = [k for k in ("qwen3", "attnres", "mhar", "block") if peers.get(k, {}).get("tok_per_s", 0) > 0]
        rep.check("bench_torch.helper.json", len(timed) == 4 and out["threads"] >= 1 and "torch" in out,
                  f"timed {timed} of qwen3, attnres, mhar, block; torch {out.get('torch')}")
        bad = peers.get("no_such_peer", {})
        rep.check("bench_torch.helper.failed_peer", "error" in bad and "tok_per_s" not in bad and bad["error"],
                  f"an unknown peer: {bad}")


def main():
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    import transformers
    transformers.utils.logging.set_verbosity_error()
    rep = Report()
    d = Path(tempfile.mkdtemp(prefix="mhar_bench_torch_"))
    try:
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", d / f"{split}.bin", "--vocab", VOCAB, "--count", 20000, "--seed", seed)
        tokens = common.random_tokens(B * (T + 1), VOCAB, TOKEN_SEED)
        common.write_tokens(d / "batch.bin", tokens.numpy(), VOCAB)
        inputs, _ = common.batch_rows(tokens, B, T)
        for name, peer, heads, blocks in RUNS:
            with rep.guard(f"bench_torch.{name}"):
                check_run(rep, d, name, peer, heads, blocks, inputs)
        check_helper(rep)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
