"""mhar import and mhar export against transformers.

Import: small random Qwen3ForCausalLM models (GQA, tied and untied, every
weight perturbed so no norm is 1 and no tie is accidental), saved by
transformers' save_pretrained in F32 (one file), BF16 sharded into >= 3
files and F16, are imported with `mhar import`; then
  - the run's fp32 weights equal the checkpoint's upcast to fp32, bit for
    bit (the conversions are exact);
  - tool_dump's logits and loss equal transformers' (run on the same
    checkpoint upcast to fp32) to 1e-4 relative: both compute in fp32 and
    differ by roundoff (~1e-6), while a layout or convention error is off by
    >= 1e-2 (the tolerance of tests/test_hf.py, for the same reason);
  - `mhar convert` of the imported run to delta_mh gives bit-identical
    logits, and `mhar train --init-from` runs a few steps from it.
The same for random LlamaForCausalLM models (no q/k norm, rope_scaling
llama3): these need the Llama family in mhar's config parser and model.
Tokenizer: a tokenizer.json mhar reproduces is copied with its companions
byte for byte; one it cannot (a normalizer) is refused naming
--no-tokenizer, which imports the weights only; one with more ids than the
embedding is refused.
Refusals (non-zero exit, a message naming the file/tensor/reason, no output
directory and no staging directory left): an unknown architecture (GPT-2),
a missing shard, a shard with an F64 tensor, a transposed tensor, a layer
missing from the weights, an extra layer, an untied config without
lm_head.weight, a tied config with a different lm_head.weight, an index
naming a tensor its shard lacks, a truncated file, an output directory
that is not empty. Tolerated: a rotary_emb.inv_freq buffer, and a tied model's saved
lm_head.weight that equals the embedding bit for bit.
Export: f32 round-trips bit-exactly through import; a bf16 export (sharded
into >= 3 files) loads in transformers with dtype bfloat16 and equals the
run's weights rounded to bf16 (torch's round to nearest even), and its
import gives those rounded weights back exactly; the same for f16; a
weight beyond f16's range is refused naming the tensor; the HF-facing files
are copied and the training state is not.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ref import common  # noqa: E402
from ref.common import Report, rel_err  # noqa: E402

B, T = 2, 16
VOCAB = 512
TOL = 1e-4
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, intermediate_size=128, max_position_embeddings=128,
             rms_norm_eps=1e-6)
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 32, "rope_theta": 10000.0}

# name, family, tied, dtype, sharded
CASES = [
    ("qwen3_tied_f32", "qwen3", True, torch.float32, False),
    ("qwen3_untied_f32", "qwen3", False, torch.float32, False),
    ("qwen3_untied_bf16_sharded", "qwen3", False, torch.bfloat16, True),
    ("qwen3_tied_bf16_sharded", "qwen3", True, torch.bfloat16, True),
    ("qwen3_untied_f16", "qwen3", False, torch.float16, False),
    ("llama_tied_f32", "llama", True, torch.float32, False),
    ("llama_untied_bf16_sharded", "llama", False, torch.bfloat16, True),
]


def mhar(*args, timeout=300):
    return common.run_command([common.mhar_binary(), *args], timeout=timeout)


def mhar_rc(*args, timeout=300):
    res = subprocess.run([str(common.mhar_binary()), *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    return res.returncode, res.stdout, res.stderr


def hf_model(family, tied, seed):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(seed)
    if family == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(tie_word_embeddings=tied, **SHAPE))
    else:
        cfg = LlamaConfig(tie_word_embeddings=tied, rope_scaling=dict(LLAMA3_ROPE), **SHAPE)
        model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def save_hf(model, d, dtype, sharded):
    """save_pretrained; sharded: at most a quarter of the bytes per file."""
    kw = {}
    if sharded:
        total = sum(p.numel() for p in model.parameters()) * torch.finfo(dtype).bits // 8
        kw["max_shard_size"] = total // 4
    model.to(dtype).save_pretrained(d, **kw)
    model.to(torch.float32)


def checkpoint_tensors(d):
    """Every tensor of an HF directory (one file or shards), as saved."""
    out = {}
    for f in sorted(Path(d).glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def bits_equal(a, b):
    a, b = a.contiguous(), b.contiguous()
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.int32), b.view(torch.int32))


def transformers_logits(d, inputs):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    with torch.no_grad():
        return model.eval()(input_ids=inputs).logits


class Ctx:
    def __init__(self, rep, w):
        self.rep, self.w = rep, w
        tokens = common.random_tokens(B * (T + 1), VOCAB, 5)
        self.batch = w / "batch.bin"
        common.write_tokens(self.batch, tokens.numpy(), VOCAB)
        self.inputs, self.targets = common.batch_rows(tokens, B, T)
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", w / f"{split}.bin", "--vocab", VOCAB, "--count", 4000, "--seed", seed)

    def dump(self, run, tag):
        return common.tool_dump(run, self.batch, B, T, self.w / f"dump_{tag}.safetensors")


# ---------------------------------------------------------------- import


def check_import(ctx, name, family, tied, dtype, sharded, train):
    rep, w = ctx.rep, ctx.w
    hf, run = w / f"hf_{name}", w / f"run_{name}"
    save_hf(hf_model(family, tied, sum(map(ord, name))), hf, dtype, sharded)
    with rep.guard(f"{name}.import"):
        res = mhar("import", "--hf", hf, "--out", run)
        info = json.loads(res.stdout.strip().splitlines()[-1])
        st = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}[dtype]
        ok = info["dtypes"] == st and (info["files"] >= 3 if sharded else info["files"] == 1)
        rep.check(f"{name}.import", ok, f"{info['files']} file(s) of {info['dtypes']}")
    if not (run / "model.safetensors").exists():
        return None
    with rep.guard(f"{name}.weights_exact"):
        want = {k: v.float() for k, v in checkpoint_tensors(hf).items()}
        got = load_file(str(run / "model.safetensors"))
        bad = sorted(k for k in want if k not in got or not bits_equal(got[k], want[k]))
        extra = sorted(set(got) - set(want))
        rep.check(f"{name}.weights_exact", not bad and not extra,
                  f"{len(got)} tensors equal the checkpoint's upcast" if not bad and not extra
                  else f"differ {bad[:3]} extra {extra[:3]}")
    with rep.guard(f"{name}.logits"):
        want = transformers_logits(hf, ctx.inputs)
        dump = ctx.dump(run, name)
        rep.within(f"{name}.logits", rel_err(dump["logits"], want), TOL)
        hf_loss = torch.nn.functional.cross_entropy(want.reshape(-1, VOCAB).double(), ctx.targets.reshape(-1))
        rep.within(f"{name}.loss", rel_err(dump["loss"].reshape(()), hf_loss), TOL)
    with rep.guard(f"{name}.convert_bit_identical"):
        conv = w / f"conv_{name}"
        mhar("convert", "--run", run, "--out", conv, "--route-heads", 4, "--route-blocks", 2)
        a, b = ctx.dump(run, name + "_base"), ctx.dump(conv, name + "_conv")
        rep.check(f"{name}.convert_bit_identical", bits_equal(a["logits"], b["logits"]) and
                  bits_equal(a["loss"], b["loss"]), "delta_mh logits identical to the imported run's")
    if train:
        with rep.guard(f"{name}.train_init_from"):
            out = w / f"train_{name}"
            mhar("train", "--out", out, "--init-from", run, "--train", w / "train.bin", "--val", w / "val.bin",
                 "--batch", 2, "--seq", 16, "--steps", 3, "--eval-every", 3, "--eval-batches", 1)
            lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
            losses = [x["loss"] for x in lines if "loss" in x]
            rep.check(f"{name}.train_init_from", losses and all(l == l and l < 100 for l in losses),
                      f"losses {losses}")
    return run


# ---------------------------------------------------------------- tokenizer


def make_tokenizer(w, vocab):
    corpus = w / f"corpus_{vocab}"
    corpus.mkdir()
    g = torch.Generator().manual_seed(vocab)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(letters[i] for i in torch.randint(0, 26, (int(n),), generator=g))
             for n in torch.randint(2, 9, (3000,), generator=g)]
    (corpus / "a.txt").write_text(" ".join(words) + "\n")
    mhar("tokenizer", "train", "--corpus", corpus, "--out", w / f"tok_{vocab}.bpe", "--vocab", vocab, "--quiet")
    mhar("tokenizer", "export", "--tokenizer", w / f"tok_{vocab}.bpe", "--hf", w / f"tokenizer_{vocab}.json")
    return w / f"tokenizer_{vocab}.json"


def check_tokenizer(ctx, base):
    rep, w = ctx.rep, ctx.w
    hf = w / "hf_tok"
    shutil.copytree(base, hf)
    shutil.copy(make_tokenizer(w, 300), hf / "tokenizer.json")
    (hf / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}\n')
    (hf / "special_tokens_map.json").write_text('{"eos_token": "<|endoftext|>"}\n')
    with rep.guard("tokenizer.copied"):
        res = mhar("import", "--hf", hf, "--out", w / "run_tok")
        info = json.loads(res.stdout.strip().splitlines()[-1])
        names = ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"]
        same = [n for n in names if (w / "run_tok" / n).exists() and
                (w / "run_tok" / n).read_bytes() == (hf / n).read_bytes()]
        rep.check("tokenizer.copied", same == names and info["tokenizer_vocab"] == 300,
                  f"byte-identical {same}, tokenizer_vocab {info['tokenizer_vocab']}")
    tj = json.loads((hf / "tokenizer.json").read_text())
    tj["normalizer"] = {"type": "Lowercase"}
    (hf / "tokenizer.json").write_text(json.dumps(tj))
    refuse(ctx, "tokenizer.unreproducible", ["import", "--hf", hf], w / "run_tok2", ["--no-tokenizer", "tokenizer.json"])
    with rep.guard("tokenizer.weights_only"):
        mhar("import", "--hf", hf, "--out", w / "run_tok3", "--no-tokenizer")
        present = sorted(p.name for p in (w / "run_tok3").iterdir())
        rep.check("tokenizer.weights_only", present == ["config.json", "generation_config.json", "model.safetensors"],
                  f"files {present}")
    shutil.copy(make_tokenizer(w, 600), hf / "tokenizer.json")
    refuse(ctx, "tokenizer.more_ids_than_embedding", ["import", "--hf", hf], w / "run_tok4", ["600", "vocab_size"])


# ---------------------------------------------------------------- refusals


def refuse(ctx, name, args, out, patterns):
    """The command fails, says every pattern (case-insensitive), leaves out as
    it was (absent, or with its old contents) and no staging directory."""
    with ctx.rep.guard(name):
        before = sorted(p.name for p in out.iterdir()) if out.is_dir() else None
        rc, _, err = mhar_rc(*args, "--out", out)
        missing = [p for p in patterns if p.lower() not in err.lower()]
        after = sorted(p.name for p in out.iterdir()) if out.is_dir() else None
        staging = [p.name for p in out.parent.glob(out.name + ".tmp.*")]
        ok = rc != 0 and not missing and after == before and not staging
        last = err.strip().splitlines()[-1] if err.strip() else ""
        ctx.rep.check(name, ok, last if ok else
                      f"rc {rc}, missing {missing}, out {before} -> {after}, staging {staging}, stderr: {last[:300]}")


def edit_shard(path, fn):
    """Rewrite a safetensors file through fn(dict) -> dict."""
    tensors = fn(load_file(str(path)))
    save_file(tensors, str(path), metadata={"format": "pt"})


def check_refusals(ctx):
    rep, w = ctx.rep, ctx.w
    from transformers import GPT2Config, GPT2LMHeadModel
    gpt2 = w / "hf_gpt2"
    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64, n_positions=32)).save_pretrained(gpt2)
    refuse(ctx, "refuse.unknown_architecture", ["import", "--hf", gpt2], w / "o_gpt2", ["gpt2", "config.json"])

    # Config features mhar does not implement: refused naming them, never ignored.
    single = w / "hf_qwen3_untied_f32"
    for tag, edit, want in (("rope_yarn", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, ["yarn"]),
                            ("rope_dynamic", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0,
                                                                  "rope_theta": 10000.0}}, ["dynamic"]),
                            ("attention_bias", {"attention_bias": True}, ["attention_bias"]),
                            ("sliding_window", {"use_sliding_window": True}, ["use_sliding_window"])):
        d = w / f"hf_{tag}"
        shutil.copytree(single, d)
        cfg = json.loads((d / "config.json").read_text())
        cfg.pop("rope_parameters", None) if "rope_scaling" in edit else None
        cfg.update(edit)
        (d / "config.json").write_text(json.dumps(cfg))
        refuse(ctx, f"refuse.{tag}", ["import", "--hf", d], w / f"o_{tag}", want + ["config.json"])

    sharded = w / "hf_qwen3_untied_bf16_sharded"
    shards = sorted(sharded.glob("model-*.safetensors"))
    index = json.loads((sharded / "model.safetensors.index.json").read_text())

    d = w / "hf_missing_shard"
    shutil.copytree(sharded, d)
    (d / shards[1].name).unlink()
    refuse(ctx, "refuse.missing_shard", ["import", "--hf", d], w / "o1", [shards[1].name, "missing"])

    d = w / "hf_f64"
    shutil.copytree(sharded, d)
    victim = next(k for k, v in index["weight_map"].items() if v == shards[1].name)
    edit_shard(d / shards[1].name, lambda t: {k: (v.double() if k == victim else v) for k, v in t.items()})
    refuse(ctx, "refuse.wrong_dtype", ["import", "--hf", d], w / "o2", [victim, "F64", shards[1].name])

    d = w / "hf_transposed"
    shutil.copytree(sharded, d)
    mat = "model.layers.1.mlp.down_proj.weight"
    edit_shard(d / index["weight_map"][mat], lambda t: {k: (v.t().contiguous() if k == mat else v) for k, v in t.items()})
    refuse(ctx, "refuse.wrong_shape", ["import", "--hf", d], w / "o3", [mat, "shape", "[128, 64]", "expected [64, 128]"])

    single = w / "hf_qwen3_untied_f32"
    for tag, layers, want in (("layer_missing", 3, ["model.layers.2.", "missing"]),
                              ("layer_extra", 1, ["model.layers.1.", "unexpected"])):
        d = w / f"hf_{tag}"
        shutil.copytree(single, d)
        cfg = json.loads((d / "config.json").read_text())
        cfg["num_hidden_layers"] = layers
        cfg.pop("layer_types", None)
        (d / "config.json").write_text(json.dumps(cfg))
        refuse(ctx, f"refuse.{tag}", ["import", "--hf", d], w / f"o_{tag}", want)

    d = w / "hf_untied_no_head"
    shutil.copytree(w / "hf_qwen3_tied_f32", d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["tie_word_embeddings"] = False
    (d / "config.json").write_text(json.dumps(cfg))
    refuse(ctx, "refuse.untied_without_lm_head", ["import", "--hf", d], w / "o4", ["lm_head.weight", "missing"])

    d = w / "hf_tied_other_head"
    shutil.copytree(single, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["tie_word_embeddings"] = True
    (d / "config.json").write_text(json.dumps(cfg))
    refuse(ctx, "refuse.tied_with_different_head", ["import", "--hf", d], w / "o5",
           ["lm_head.weight", "differs", "tie_word_embeddings"])

    d = w / "hf_index_lacks"
    shutil.copytree(sharded, d)
    idx = dict(index)
    idx["weight_map"] = dict(index["weight_map"], **{"model.layers.0.mlp.extra.weight": shards[0].name})
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    refuse(ctx, "refuse.index_names_absent_tensor", ["import", "--hf", d], w / "o6",
           ["model.layers.0.mlp.extra.weight", shards[0].name, "lacks it"])

    d = w / "hf_truncated"
    shutil.copytree(single, d)
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) - 100])
    refuse(ctx, "refuse.truncated_file", ["import", "--hf", d], w / "o7", ["model.safetensors", "truncated"])

    busy = w / "o_busy"
    busy.mkdir()
    (busy / "keep").write_text("x")
    refuse(ctx, "refuse.out_not_empty", ["import", "--hf", single], busy, ["not empty"])

    d = w / "hf_inv_freq"
    shutil.copytree(single, d)
    edit_shard(d / "model.safetensors",
               lambda t: dict(t, **{"model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(8)}))
    with rep.guard("tolerate.rotary_inv_freq"):
        mhar("import", "--hf", d, "--out", w / "run_inv_freq")
        same = (w / "run_inv_freq" / "model.safetensors").read_bytes() == \
            (w / "run_qwen3_untied_f32" / "model.safetensors").read_bytes()
        rep.check("tolerate.rotary_inv_freq", same, "buffer skipped, weights identical")

    d = w / "hf_tied_equal_head"
    shutil.copytree(w / "hf_qwen3_tied_f32", d)
    edit_shard(d / "model.safetensors", lambda t: dict(t, **{"lm_head.weight": t["model.embed_tokens.weight"].clone()}))
    with rep.guard("tolerate.tied_head_equal_to_embedding"):
        mhar("import", "--hf", d, "--out", w / "run_tied_equal")
        same = (w / "run_tied_equal" / "model.safetensors").read_bytes() == \
            (w / "run_qwen3_tied_f32" / "model.safetensors").read_bytes()
        rep.check("tolerate.tied_head_equal_to_embedding", same, "saved tied copy dropped, weights identical")


# ---------------------------------------------------------------- export


def rounded(tensors, dtype):
    return {k: v.to(dtype) for k, v in tensors.items()}


def check_export(ctx, run, tied_run):
    rep, w = ctx.rep, ctx.w
    weights = load_file(str(run / "model.safetensors"))
    with rep.guard("export.f32_roundtrip"):
        mhar("export", "--run", run, "--out", w / "e32", "--dtype", "f32")
        mhar("import", "--hf", w / "e32", "--out", w / "r32")
        rep.check("export.f32_roundtrip", (w / "r32" / "model.safetensors").read_bytes() ==
                  (run / "model.safetensors").read_bytes(), "model.safetensors byte-identical after export + import")

    from transformers import Qwen3ForCausalLM
    for dt, flag in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        exp, back = w / f"e_{flag}", w / f"r_{flag}"
        with rep.guard(f"export.{flag}_files"):
            res = mhar("export", "--run", run, "--out", exp, "--dtype", flag, "--shard-size", "60KB")
            info = json.loads(res.stdout.strip().splitlines()[-1])
            cfg = json.loads((exp / "config.json").read_text())
            shards = sorted(exp.glob("model-*-of-*.safetensors"))
            ok = info["shards"] >= 3 and len(shards) == info["shards"] and \
                (exp / "model.safetensors.index.json").exists() and cfg.get("torch_dtype") == str(dt)[6:]
            rep.check(f"export.{flag}_files", ok, f"{len(shards)} shards, torch_dtype {cfg.get('torch_dtype')}")
        with rep.guard(f"export.{flag}_loads_in_transformers"):
            model, li = Qwen3ForCausalLM.from_pretrained(exp, dtype=dt, output_loading_info=True)
            bad = {k: v for k, v in li.items() if v}
            sd = model.state_dict()
            want = rounded(weights, dt)
            diff = [k for k, v in want.items() if not torch.equal(sd[k].view(torch.int16), v.view(torch.int16))]
            rep.check(f"export.{flag}_loads_in_transformers", not bad and not diff,
                      f"loading info {bad}, differing {diff[:3]}" if bad or diff else
                      f"{len(want)} tensors equal the run's weights rounded to {flag}")
        with rep.guard(f"export.{flag}_import_gives_rounded"):
            mhar("import", "--hf", exp, "--out", back)
            got = load_file(str(back / "model.safetensors"))
            diff = [k for k, v in rounded(weights, dt).items() if not bits_equal(got[k], v.float())]
            rep.check(f"export.{flag}_import_gives_rounded", not diff, f"differing {diff[:3]}" if diff else
                      "imported export equals the rounded weights bit for bit")

    with rep.guard("export.tied_bf16_loads"):
        mhar("export", "--run", tied_run, "--out", w / "e_tied")
        model, li = Qwen3ForCausalLM.from_pretrained(w / "e_tied", dtype=torch.bfloat16, output_loading_info=True)
        bad = {k: v for k, v in li.items() if v}
        rep.check("export.tied_bf16_loads", not bad and
                  model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
                  f"loading info {bad}" if bad else "no lm_head saved, head tied to the embedding")

    # A weight f16 cannot hold: refused, naming the tensor; bf16 takes it.
    big = w / "run_big"
    shutil.copytree(run, big)
    t = dict(weights)
    t["model.layers.1.mlp.up_proj.weight"] = t["model.layers.1.mlp.up_proj.weight"].clone()
    t["model.layers.1.mlp.up_proj.weight"][3, 5] = 70000.0
    save_file(t, str(big / "model.safetensors"), metadata={"format": "pt"})
    refuse(ctx, "export.f16_overflow_refused", ["export", "--run", big, "--dtype", "f16"], w / "e_big",
           ["model.layers.1.mlp.up_proj.weight", "70000", "float16"])
    with rep.guard("export.bf16_takes_large_values"):
        mhar("export", "--run", big, "--out", w / "e_big_bf16")
        rep.passed("export.bf16_takes_large_values")

    # Which files travel: the HF-facing ones, byte for byte; not the training state.
    full = w / "run_files"
    shutil.copytree(run, full)
    hf_files = {"tokenizer.json": "{}", "tokenizer_config.json": "{\"a\": 1}", "special_tokens_map.json": "{}",
                "generation_config.json": "{\"do_sample\": false}", "modeling_mhar.py": "# model\n",
                "configuration_mhar.py": "# config\n"}
    for n, text in hf_files.items():
        (full / n).write_text(text)
    (full / "state.json").write_text("{}")
    (full / "metrics.jsonl").write_text("{}\n")
    (full / "checkpoint").mkdir(exist_ok=True)
    with rep.guard("export.copies_hf_files_only"):
        mhar("export", "--run", full, "--out", w / "e_files")
        present = sorted(p.name for p in (w / "e_files").iterdir())
        want = sorted(list(hf_files) + ["config.json", "model.safetensors"])
        same = all((w / "e_files" / n).read_text() == t for n, t in hf_files.items() if (w / "e_files" / n).exists())
        rep.check("export.copies_hf_files_only", present == want and same, f"files {present}")
    busy = w / "e_busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    refuse(ctx, "export.out_not_empty", ["export", "--run", run], busy, ["not empty"])

    with rep.guard("export.routed_roundtrip"):
        conv = w / "conv_qwen3_untied_f32"
        mhar("export", "--run", conv, "--out", w / "e_conv", "--shard-size", "100KB")
        mhar("import", "--hf", w / "e_conv", "--out", w / "r_conv")
        got, src = load_file(str(w / "r_conv" / "model.safetensors")), load_file(str(conv / "model.safetensors"))
        cfg = json.loads((w / "r_conv" / "config.json").read_text())
        diff = [k for k, v in src.items() if not bits_equal(got[k], v.to(torch.bfloat16).float())]
        rep.check("export.routed_roundtrip", not diff and cfg["attnres_mode"] == "delta_mh" and len(got) == len(src),
                  f"{len(src)} tensors of a delta_mh run back as bf16-rounded, mode kept" if not diff else diff[:3])


def check_cli(ctx):
    """--help of both commands; flags refused with the reason (exit 2)."""
    rep, w = ctx.rep, ctx.w
    for cmd in ("import", "export"):
        rc, out, _ = mhar_rc(cmd, "--help")
        rep.check(f"cli.{cmd}_help", rc == 0 and out.startswith(f"usage: mhar {cmd}"), f"rc {rc}")
    cases = [("cli.export_bad_dtype", ["export", "--run", w, "--out", w / "x1", "--dtype", "f8"], "bf16, f16 or f32"),
             ("cli.export_bad_shard_size", ["export", "--run", w, "--out", w / "x2", "--shard-size", "2XB"],
              "size '2XB' is not a number of bytes"),
             ("cli.export_zero_shard_size", ["export", "--run", w, "--out", w / "x3", "--shard-size", "0"],
              "at least 1 byte"),
             ("cli.import_needs_hf", ["import", "--out", w / "x4"], "--hf and --out are required")]
    for name, args, want in cases:
        rc, _, err = mhar_rc(*args)
        rep.check(name, rc == 2 and want in err and not any(w.glob("x[0-9]*")), f"rc {rc}: {err.strip()[:200]}")


def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    rep = Report()
    w = Path(tempfile.mkdtemp(prefix="mhar_hf_import_"))
    try:
        ctx = Ctx(rep, w)
        check_cli(ctx)
        runs = {}
        for name, family, tied, dtype, sharded in CASES:
            runs[name] = check_import(ctx, name, family, tied, dtype, sharded,
                                      train=name in ("qwen3_tied_f32", "qwen3_untied_bf16_sharded",
                                                     "llama_untied_bf16_sharded"))
        if runs.get("qwen3_tied_f32"):
            check_tokenizer(ctx, w / "hf_qwen3_tied_f32")
        check_refusals(ctx)
        if runs.get("qwen3_untied_f32") and runs.get("qwen3_tied_f32"):
            check_export(ctx, runs["qwen3_untied_f32"], runs["qwen3_tied_f32"])
        else:
            rep.fail("export", "no imported run to export")
    finally:
        shutil.rmtree(w, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
