"""External check: every run directory loads in Hugging Face transformers
with mhar's logits and mhar's greedy generations.

One run per residual scheme (nano preset, vocab 512, 3 training steps on
synthetic tokens): baseline, hc, denseformer, attnres, mhar (H = 4, untied
LM head), block (H = 2, N = 3) and delta_mh (converted from the baseline,
H = 4, N = 3, then trained). Three steps move the scheme parameters (routing
queries start at 0, delta_mh's gates at 0) too little for routing to matter,
so before the checks every scheme tensor in model.safetensors is replaced by
a perturbed value (tests/ref/model.py's test init: queries ~ N(0, 1/d),
gates +-U(0.25, 0.75), ...); both sides then read the same file.

Per run:
  - files: a non-baseline directory holds configuration_mhar.py and
    modeling_mhar.py, byte-identical to src/hf/ (embedded in the binary), and
    a config.json naming MharForCausalLM (model_type "mhar", auto_map, one
    "mhar_<scheme>" layer type per layer); a baseline directory is a plain
    Qwen3 one, without them;
  - AutoModelForCausalLM.from_pretrained(run, trust_remote_code=True) loads
    MharForCausalLM (Qwen3ForCausalLM for baseline) with no missing,
    unexpected or mismatched tensor;
  - its logits on a fixed batch equal tool_dump's to 1e-4 relative
    (max|a-b| / max|b|): both compute in fp32, so they differ by summation
    order (~1e-6); a convention error is off by >= 1e-2;
  - the check can fail: the same model with its scheme tensors at the SPEC
    init (queries 0, i.e. uniform routing; gates 0; hc/dwa at identity)
    differs from mhar's logits by more than 100x the tolerance;
  - generate() (greedy, use_cache=True) gives the token ids of
    `mhar sample --temperature 0`, and use_cache=False the same ids; and
    decoding the batch one token at a time through the KV cache gives the
    full forward's logits to 1e-4;
  - Qwen3ForCausalLM.from_pretrained(run) and LlamaForCausalLM.from_pretrained
    (run) raise for every non-baseline run instead of dropping its tensors.
Plus, in Python only: the llama family of MharForCausalLM (no q/k norm, RoPE
scaling linear and llama3) equals transformers' LlamaForCausalLM on the same
weights; a saved MharConfig keeps its "mhar_" layer types; MharConfig
refuses another scheme's layer types, an unsupported RoPE type, a block
scheme without blocks and an unknown family.
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
from ref import model as ref_model  # noqa: E402
from ref.common import Report, rel_err  # noqa: E402
from ref.perturb import perturb_scheme, scheme_names  # noqa: E402

B, T = 2, 32
VOCAB = 512
TOKEN_SEED = 11
PERTURB_SEED = 5
TOL = 1e-4
SENSITIVITY = 100 * TOL
PROMPT = [3, 141, 59, 26, 5]
NEW_TOKENS = 12
HF_DIR = common.REPO / "src" / "hf"
REMOTE_FILES = ("configuration_mhar.py", "modeling_mhar.py")

# name, residual, routing heads, blocks, tied head
RUNS = [("baseline", "baseline", 1, 0, True), ("hc", "hc", 1, 0, True),
        ("denseformer", "denseformer", 1, 0, True), ("attnres", "attnres", 1, 0, True),
        ("mhar", "mhar", 4, 0, False), ("block", "block", 2, 3, True),
        ("delta_mh", "delta_mh", 4, 3, True),
        # The Llama family (no q/k norm) with llama3 RoPE scaling, native and routed.
        ("llama_baseline", "baseline", 1, 0, False, "llama"), ("llama_mhar", "mhar", 4, 0, True, "llama")]
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
               "original_max_position_embeddings": 16}
FAMILY_CLASS = {"qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}


def mhar(*args, timeout=600):
    return common.run_command([common.mhar_binary(), *args], timeout=timeout)


def train_args(d, out, steps=3):
    return ["--train", d / "train.bin", "--val", d / "val.bin", "--steps", steps, "--batch", B,
            "--seq", T, "--eval-batches", 2, "--out", out]


def make_run(d, name, residual, heads, blocks, tied, family="qwen3"):
    """Train (or convert then train) the run of one scheme; its directory."""
    run = d / name
    if residual == "delta_mh":
        mhar("convert", "--run", d / "baseline", "--out", d / "converted",
             "--route-heads", heads, "--route-blocks", blocks)
        mhar("train", "--init-from", d / "converted", *train_args(d, run))
        return run
    if family == "qwen3":
        shape = dict(common.NANO, vocab_size=VOCAB, tie_word_embeddings=tied)
    else:
        shape = common.make_config(tied=tied, family=family, rope_scaling=LLAMA3_ROPE, vocab_size=VOCAB)
    (d / f"{name}.json").write_text(json.dumps(shape))
    mhar("train", "--config", d / f"{name}.json", "--residual", residual, "--route-heads", heads,
         *(["--route-blocks", blocks] if blocks else []), *train_args(d, run))
    return run


def check_files(rep, name, run, cfg):
    with rep.guard(f"hf_remote.{name}.files"):
        native = cfg["attnres_mode"] == "baseline"
        present = [f for f in REMOTE_FILES if (run / f).exists()]
        if native:
            family = cfg["mhar_family"]
            ok = not present and cfg["model_type"] == family and cfg["architectures"] == [FAMILY_CLASS[family]]
            rep.check(f"hf_remote.{name}.files", ok, f"plain {family} directory (remote files {present})")
            return
        same = [f for f in present if (run / f).read_bytes() == (HF_DIR / f).read_bytes()]
        L = cfg["num_hidden_layers"]
        want = {"model_type": "mhar", "architectures": ["MharForCausalLM"],
                "auto_map": {"AutoConfig": "configuration_mhar.MharConfig",
                             "AutoModelForCausalLM": "modeling_mhar.MharForCausalLM"},
                "layer_types": [f"mhar_{cfg['attnres_mode']}"] * L}
        wrong = {k: cfg.get(k) for k, v in want.items() if cfg.get(k) != v}
        rep.check(f"hf_remote.{name}.files", len(same) == len(REMOTE_FILES) and not wrong,
                  f"remote files identical to src/hf: {same}; wrong keys {wrong}")


def load_auto(rep, name, run, cfg):
    with rep.guard(f"hf_remote.{name}.from_pretrained"):
        model, info = transformers.AutoModelForCausalLM.from_pretrained(
            run, trust_remote_code=True, dtype=torch.float32, output_loading_info=True)
        want = FAMILY_CLASS[cfg["mhar_family"]] if cfg["attnres_mode"] == "baseline" else "MharForCausalLM"
        bad = {k: v for k, v in info.items() if v}
        got = type(model).__name__
        if rep.check(f"hf_remote.{name}.from_pretrained", not bad and got == want,
                     f"{got}, loading info {bad}" if bad or got != want else f"{got}, every tensor loaded"):
            return model.eval()
    return None


def logits_of(model, inputs):
    with torch.no_grad():
        return model(input_ids=inputs).logits


def check_logits(rep, name, model, cfg, inputs, want):
    rep.within(f"hf_remote.{name}.logits", rel_err(logits_of(model, inputs), want), TOL)
    if cfg["attnres_mode"] == "baseline":
        return
    with rep.guard(f"hf_remote.{name}.routing_matters"):
        spec = ref_model.init_params(cfg, PERTURB_SEED, random_routing=False)
        state = model.state_dict()
        saved = {k: state[k].clone() for k in scheme_names(cfg)}
        with torch.no_grad():
            for k in saved:
                state[k].copy_(spec[k])
            err = rel_err(logits_of(model, inputs), want)
            for k, v in saved.items():
                state[k].copy_(v)
        rep.check(f"hf_remote.{name}.routing_matters", err > SENSITIVITY,
                  f"scheme tensors at SPEC init: rel err {err:.2e} vs mhar (must exceed {SENSITIVITY:.0e})")


def check_generate(rep, name, model, run):
    with rep.guard(f"hf_remote.{name}.generate"):
        out = mhar("sample", "--run", run, "--prompt-tokens", ",".join(map(str, PROMPT)),
                   "--steps", NEW_TOKENS, "--temperature", 0).stdout.split()
        want = [int(t) for t in out]
        model.generation_config.eos_token_id = None     # config.json's eos 0 must not stop it
        model.generation_config.pad_token_id = 0
        ids = torch.tensor([PROMPT])
        got = {}
        for cache in (True, False):
            seq = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, use_cache=cache)
            got[cache] = seq[0].tolist()
        rep.check(f"hf_remote.{name}.generate", got[True] == want,
                  f"mhar sample {want}, generate {got[True]}")
        rep.check(f"hf_remote.{name}.generate_no_cache", got[False] == got[True],
                  f"use_cache=False {got[False]}")


def check_cache_steps(rep, name, model, inputs, prefill=4):
    """Prefill `prefill` tokens of each row, then feed the rest one at a time
    through the KV cache: every step's logits equal the full forward's."""
    with rep.guard(f"hf_remote.{name}.cache_steps"):
        with torch.no_grad():
            out = model(input_ids=inputs[:, :prefill], use_cache=True)
            steps = [out.logits]
            for t in range(prefill, inputs.shape[1]):
                out = model(input_ids=inputs[:, t:t + 1], cache=out.cache, use_cache=True)
                steps.append(out.logits)
        rep.within(f"hf_remote.{name}.cache_steps", rel_err(torch.cat(steps, 1), logits_of(model, inputs)), TOL)


def check_plain_refuses(rep, name, run):
    for cls in (transformers.Qwen3ForCausalLM, transformers.LlamaForCausalLM):
        test = f"hf_remote.{name}.{cls.__name__}_raises"
        try:
            cls.from_pretrained(run, dtype=torch.float32)
            rep.fail(test, "loaded a routed run without its scheme tensors")
        except Exception as e:                    # noqa: BLE001 - raising is the point
            rep.check(test, "mhar_" in str(e), f"{type(e).__name__}: {str(e).splitlines()[0][:90]}")


def check_run(rep, d, name, run, inputs):
    cfg = json.loads((run / "config.json").read_text())
    check_files(rep, name, run, cfg)
    if cfg["attnres_mode"] != "baseline":
        perturb_scheme(run, cfg, PERTURB_SEED)
    want = common.tool_dump(run, d / "batch.bin", B, T, d / f"{name}.dump.safetensors")["logits"]
    model = load_auto(rep, name, run, cfg)
    if model is not None:
        check_logits(rep, name, model, cfg, inputs, want)
        check_generate(rep, name, model, run)
        check_cache_steps(rep, name, model, inputs)
    if cfg["attnres_mode"] != "baseline":
        check_plain_refuses(rep, name, run)
    return model


def check_saved_config(rep, d, model):
    """save_pretrained keeps the identity: Qwen3 still refuses the copy."""
    with rep.guard("hf_remote.save_pretrained"):
        out = d / "resaved"
        model.save_pretrained(out)
        cfg = json.loads((out / "config.json").read_text())
        again = transformers.AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True,
                                                                  dtype=torch.float32)
        ok = cfg.get("layer_types", [""])[0].startswith("mhar_") and cfg.get("model_type") == "mhar"
        try:
            transformers.Qwen3ForCausalLM.from_pretrained(out)
            ok = False
        except Exception:                         # noqa: BLE001 - raising is the point
            pass
        ids = torch.tensor([PROMPT])
        err = rel_err(logits_of(again, ids), logits_of(model, ids))
        rep.check("hf_remote.save_pretrained", ok and err == 0,
                  f"layer_types {cfg.get('layer_types', [''])[:1]}, reloaded logits rel err {err:.1e}")


def check_llama_family(rep, model):
    """MharForCausalLM with mhar_family llama and the baseline scheme is
    transformers' LlamaForCausalLM, with RoPE scaling from its own tables."""
    config_cls, model_cls = type(model.config), type(model)
    shape = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                 rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.2)
    ropes = {"plain": {"rope_type": "default", "rope_theta": 10000.0},
             "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
             "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 16}}
    ids = common.random_tokens(2 * 40, VOCAB, TOKEN_SEED).reshape(2, 40)
    logits = {}
    for kind, rope in ropes.items():
        with rep.guard(f"hf_remote.llama.{kind}"):
            torch.manual_seed(0)
            llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**shape, rope_parameters=dict(rope)))
            ours = model_cls(config_cls(**shape, rope_parameters=dict(rope), mhar_family="llama",
                                        attnres_mode="baseline"))
            missing, unexpected = ours.load_state_dict(llama.state_dict(), strict=False)
            logits[kind] = logits_of(ours.eval(), ids)
            err = rel_err(logits[kind], logits_of(llama.eval(), ids))
            # The same weights under another RoPE must give other logits, or
            # the comparison says nothing about the scaling.
            moved = rel_err(logits[kind], logits["plain"]) if kind != "plain" else float("inf")
            rep.check(f"hf_remote.llama.{kind}", not missing and not unexpected and err <= TOL
                      and moved > SENSITIVITY,
                      f"missing {missing[:2]}, unexpected {unexpected[:2]}, rel err {err:.1e}, "
                      f"vs plain RoPE {moved:.1e}")


def check_config_rules(rep, model):
    """MharConfig refuses what mhar does not compute rather than ignoring it."""
    config_cls = type(model.config)
    bad = {"layer_types_of_another_scheme": dict(attnres_mode="mhar", layer_types=["mhar_hc"] * 6),
           "rope_yarn": dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}),
           "blocks_missing": dict(attnres_mode="block", attnres_num_blocks=0),
           "family_unknown": dict(mhar_family="gpt2")}
    for name, kwargs in bad.items():
        try:
            config_cls(**kwargs)
            rep.fail(f"hf_remote.config_refuses.{name}", f"accepted {kwargs}")
        except Exception as e:                    # noqa: BLE001 - raising is the point
            rep.passed(f"hf_remote.config_refuses.{name}", f"{type(e).__name__}")


def main():
    # One thread, here and in the mhar processes: the models are tiny, and
    # spinning thread teams only lose time on a busy machine.
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    rep = Report()
    d = Path(tempfile.mkdtemp(prefix="mhar_hf_remote_"))
    try:
        for split, seed in (("train", 1), ("val", 2)):
            mhar("data", "synth", "--out", d / f"{split}.bin", "--vocab", VOCAB, "--count", 20000,
                 "--seed", seed)
        tokens = common.random_tokens(B * (T + 1), VOCAB, TOKEN_SEED)
        common.write_tokens(d / "batch.bin", tokens.numpy(), VOCAB)
        inputs, _ = common.batch_rows(tokens, B, T)
        routed = None
        for name, residual, heads, blocks, tied, *family in RUNS:
            with rep.guard(f"hf_remote.{name}.run"):
                run = make_run(d, name, residual, heads, blocks, tied, *family)
                model = check_run(rep, d, name, run, inputs)
                if name == "mhar":
                    routed = model
        if routed is not None:
            check_saved_config(rep, d, routed)
            check_llama_family(rep, routed)
            check_config_rules(rep, routed)
        else:
            rep.fail("hf_remote.llama", "no routed model loaded")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rep.finish()


if __name__ == "__main__":
    main()
