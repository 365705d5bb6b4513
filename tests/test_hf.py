"""External check: a run directory written by `./mhar train` is an ordinary
HF Qwen3 checkpoint, and transformers computes the same logits from it as
mhar does.

Steps: synthesise train/val token files with `./mhar data synth`, train the
nano preset (baseline residual) for 3 steps, then
  - model.safetensors loads with safetensors.torch.load_file, every tensor
    fp32, metadata {"format": "pt"};
  - config.json says model_type qwen3 / Qwen3ForCausalLM / attnres_mode
    baseline;
  - transformers.Qwen3ForCausalLM.from_pretrained(run, attn_implementation=
    "eager", dtype=float32) loads it unchanged: no missing, unexpected or
    mismatched tensor (a missing one would be silently random-initialised);
  - its logits on a fixed token batch equal tool_dump's logits on the same
    batch to 1e-4 relative (max|a-b| / max|b|), and its mean next-token loss
    equals tool_dump's loss to 1e-4 relative. Both sides compute in fp32, so
    they differ by accumulated roundoff (~1e-6); 1e-4 leaves room for
    different summation orders, while a layout or convention error (tied
    head, RoPE pairing, norm placement, GQA mapping) is off by >= 1e-2.
The same for the llama family: `mhar train --family llama` writes a directory
that transformers.LlamaForCausalLM loads unchanged, with the same logits.
And the other way: a random LlamaForCausalLM with llama3 RoPE scaling
(original context 16, T 32), its weights at unit gain so RoPE matters, saved
by transformers in F32 (save_pretrained) is read by mhar directly
(tool_dump) with the same logits to 1e-4 at every position, including those
beyond the original context; the same weights without the scaling give
logits off by more than 100x that (the check can fail).
"""
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ref import common  # noqa: E402
from ref.common import Report, rel_err  # noqa: E402

B, T = 2, 32
VOCAB = 512
TOKEN_SEED = 11
TOL = 1e-4


def mhar(*args, timeout=600):
    return common.run_command([common.mhar_binary(), *args], timeout=timeout)


def make_data(rep, d):
    """Synthesise train/val token files; True if they exist."""
    with rep.guard("hf.data_synth"):
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", d / f"{split}.bin", "--vocab", VOCAB,
                 "--count", 20000, "--seed", seed)
        rep.passed("hf.data_synth", "train.bin, val.bin")
    return (d / "val.bin").exists()


def make_run(rep, d, family):
    """Train the nano preset of `family` 3 steps; the run directory, or None."""
    name, run = f"hf.{family}.train", d / f"run_{family}"
    with rep.guard(name):
        mhar("train", "--preset", "nano", "--family", family, "--residual", "baseline", "--train", d / "train.bin",
             "--val", d / "val.bin", "--steps", 3, "--batch", B, "--seq", T, "--out", run)
        files = [f for f in ("config.json", "model.safetensors") if not (run / f).exists()]
        rep.check(name, not files, f"missing {files}" if files else "run directory written")
    ok = (run / "model.safetensors").exists() and (run / "config.json").exists()
    return run if ok else None


def check_files(rep, run, family):
    p = f"hf.{family}."
    with rep.guard(p + "safetensors_load"):
        tensors = common.load_safetensors(run / "model.safetensors")
        bad = [k for k, v in tensors.items() if v.dtype != torch.float32]
        qk = [k for k in tensors if k.endswith(("q_norm.weight", "k_norm.weight"))]
        want_qk = family == "qwen3"
        rep.check(p + "safetensors_load", not bad and len(tensors) > 0 and bool(qk) == want_qk,
                  f"{len(tensors)} tensors, non-fp32: {bad[:3]}, q/k norms: {len(qk)}")
    with rep.guard(p + "safetensors_metadata"):
        meta = common.safetensors_metadata(run / "model.safetensors")
        rep.check(p + "safetensors_metadata", meta == {"format": "pt"}, f"metadata {meta}")
    with rep.guard(p + "config"):
        cfg = json.loads((run / "config.json").read_text())
        want = {"model_type": family, "architectures": [common.FAMILY_CLASS[family]],
                "mhar_family": family, "attnres_mode": "baseline", "vocab_size": VOCAB}
        wrong = {k: cfg.get(k) for k, v in want.items() if cfg.get(k) != v}
        rep.check(p + "config", not wrong, f"unexpected values {wrong}" if wrong else f"HF {family} keys")


def hf_model(rep, name, directory, family):
    """The transformers model of `directory`, or None unless it loads cleanly."""
    cls = getattr(transformers, common.FAMILY_CLASS[family])
    with rep.guard(name):
        model, info = cls.from_pretrained(
            directory, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v}
        if rep.check(name, not bad, f"loading info {bad}" if bad else "loaded unchanged"):
            return model.eval()
    return None


def batch(d):
    tokens = common.random_tokens(B * (T + 1), VOCAB, TOKEN_SEED)
    common.write_tokens(d / "batch.bin", tokens.numpy(), VOCAB)
    return common.batch_rows(tokens, B, T)


def compare_logits(rep, d, run, family):
    p = f"hf.{family}."
    inputs, targets = batch(d)
    model = hf_model(rep, p + "from_pretrained", run, family)
    if model is None:
        return
    with rep.guard(p + "logits"), torch.no_grad():
        want = model(input_ids=inputs).logits
        dump = common.tool_dump(run, d / "batch.bin", B, T, d / f"dump_{family}.safetensors")
        rep.within(p + "logits", rel_err(dump["logits"], want), TOL)
        hf_loss = torch.nn.functional.cross_entropy(want.reshape(-1, want.shape[-1]).double(),
                                                    targets.reshape(-1))
        rep.within(p + "loss", rel_err(dump["loss"].reshape(()), hf_loss), TOL)


# --------------------------------------------------------------------------
# A transformers-made Llama with llama3 RoPE scaling, read by mhar
# --------------------------------------------------------------------------

LLAMA3 = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
          "original_max_position_embeddings": 16}


def unit_gain(model, seed):
    """Matrices N(0, 1/fan_in), norms 1 + 0.1 randn: transformers' 0.02 init
    leaves attention scores near 0, where RoPE hardly changes the logits."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            p.copy_(noise / p.shape[1] ** 0.5 if p.dim() == 2 else 1 + 0.1 * noise)


def llama3_from_transformers(rep, d):
    from transformers import LlamaConfig, LlamaForCausalLM
    s = common.NANO
    name, out = "hf.llama3_rope.save_pretrained", d / "hf_llama3"
    with rep.guard(name):
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=s["hidden_size"], num_hidden_layers=2,
                          num_attention_heads=s["num_attention_heads"],
                          num_key_value_heads=s["num_key_value_heads"], head_dim=s["head_dim"],
                          intermediate_size=s["intermediate_size"], max_position_embeddings=64,
                          rope_theta=10000.0, rope_scaling=dict(LLAMA3), tie_word_embeddings=False)
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg).to(torch.float32).eval()
        unit_gain(model, 5)
        model.save_pretrained(out, safe_serialization=True)
        rep.passed(name, ", ".join(sorted(json.loads((out / "config.json").read_text()))))
    if not (out / "model.safetensors").exists():
        return
    inputs, _ = batch(d)
    with rep.guard("hf.llama3_rope.logits"), torch.no_grad():
        want = model(input_ids=inputs).logits
        dump = common.tool_dump(out, d / "batch.bin", B, T, d / "dump_llama3.safetensors")
        rep.within("hf.llama3_rope.logits", rel_err(dump["logits"], want), TOL, "all 32 positions")
        late = slice(LLAMA3["original_max_position_embeddings"], T)
        rep.within("hf.llama3_rope.logits_beyond_original_context",
                   rel_err(dump["logits"][:, late], want[:, late]), TOL, "positions 16..31")
        plain = LlamaForCausalLM(LlamaConfig(**{**cfg.to_dict(), "rope_scaling": None,
                                                "rope_parameters": None})).to(torch.float32).eval()
        plain.load_state_dict(model.state_dict())
        off = rel_err(dump["logits"], plain(input_ids=inputs).logits)
        rep.check("hf.llama3_rope.scaling_matters", off > 100 * TOL,
                  f"unscaled RoPE is off by {off:.2e} (must exceed {100 * TOL:.0e})")


def main():
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    transformers.utils.logging.disable_progress_bar()
    rep = Report()
    d = Path(tempfile.mkdtemp(prefix="mhar_hf_"))
    try:
        if make_data(rep, d):
            for family in ("qwen3", "llama"):
                run = make_run(rep, d, family)
                if run:
                    check_files(rep, run, family)
                    compare_logits(rep, d, run, family)
        llama3_from_transformers(rep, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
