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


def make_run(rep, d):
    """Synthesise data and train 3 steps; True if the run directory exists."""
    with rep.guard("hf.data_synth"):
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", d / f"{split}.bin", "--vocab", VOCAB,
                 "--count", 20000, "--seed", seed)
        rep.passed("hf.data_synth", "train.bin, val.bin")
    if not (d / "val.bin").exists():
        return False
    with rep.guard("hf.train"):
        mhar("train", "--preset", "nano", "--residual", "baseline", "--train", d / "train.bin",
             "--val", d / "val.bin", "--steps", 3, "--batch", B, "--seq", T, "--out", d / "run")
        files = [f for f in ("config.json", "model.safetensors") if not (d / "run" / f).exists()]
        rep.check("hf.train", not files, f"missing {files}" if files else "run directory written")
    return (d / "run" / "model.safetensors").exists() and (d / "run" / "config.json").exists()


def check_files(rep, run):
    with rep.guard("hf.safetensors_load"):
        tensors = common.load_safetensors(run / "model.safetensors")
        bad = [k for k, v in tensors.items() if v.dtype != torch.float32]
        rep.check("hf.safetensors_load", not bad and len(tensors) > 0,
                  f"{len(tensors)} tensors, non-fp32: {bad[:3]}")
    with rep.guard("hf.safetensors_metadata"):
        meta = common.safetensors_metadata(run / "model.safetensors")
        rep.check("hf.safetensors_metadata", meta == {"format": "pt"}, f"metadata {meta}")
    with rep.guard("hf.config"):
        cfg = json.loads((run / "config.json").read_text())
        want = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"],
                "attnres_mode": "baseline", "vocab_size": VOCAB}
        wrong = {k: cfg.get(k) for k, v in want.items() if cfg.get(k) != v}
        rep.check("hf.config", not wrong, f"unexpected values {wrong}" if wrong else "HF Qwen3 keys")


def hf_logits(rep, run, inputs):
    """Logits from transformers, or None if it does not load cleanly."""
    from transformers import Qwen3ForCausalLM
    with rep.guard("hf.from_pretrained"):
        model, info = Qwen3ForCausalLM.from_pretrained(
            run, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
        bad = {k: v for k, v in info.items() if v}
        if not rep.check("hf.from_pretrained", not bad, f"loading info {bad}" if bad else "loaded unchanged"):
            return None
        with torch.no_grad():
            return model.eval()(input_ids=inputs).logits
    return None


def compare_logits(rep, d, run):
    tokens = common.random_tokens(B * (T + 1), VOCAB, TOKEN_SEED)
    common.write_tokens(d / "batch.bin", tokens.numpy(), VOCAB)
    inputs, targets = common.batch_rows(tokens, B, T)
    want = hf_logits(rep, run, inputs)
    if want is None:
        return
    with rep.guard("hf.logits"):
        dump = common.tool_dump(run, d / "batch.bin", B, T, d / "dump.safetensors")
        rep.within("hf.logits", rel_err(dump["logits"], want), TOL)
        hf_loss = torch.nn.functional.cross_entropy(want.reshape(-1, want.shape[-1]).double(),
                                                    targets.reshape(-1))
        rep.within("hf.loss", rel_err(dump["loss"].reshape(()), hf_loss), TOL)


def main():
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    transformers.utils.logging.disable_progress_bar()
    rep = Report()
    d = Path(tempfile.mkdtemp(prefix="mhar_hf_"))
    try:
        if make_run(rep, d):
            check_files(rep, d / "run")
            compare_logits(rep, d, d / "run")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
