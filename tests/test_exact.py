"""Exactness of the C model and of every residual scheme against the
independent float64 PyTorch reference (tests/ref/model.py).

For each enabled scheme of SCHEMES (the qwen3 family, and the llama family
for baseline, mhar, hc, delta_mh and with llama3 RoPE scaling), on the nano
shape (d 128, 6 layers, heads 4 / kv 2, head_dim 32, ffn 384, vocab 512),
batch 2, seq 32, with random
weights: the C tool `$MHAR_BUILD/tests/tool_dump` dumps logits, loss and the
gradient of every parameter, then runs 10 AdamW steps (lr 1e-3, warm-up 2)
and dumps the loss trajectory, gradient norms and final parameters.

Random weights (tests/ref/model.py init_params): matrices N(0, 1/fan_in),
norm weights 1 + 0.1 randn, every scheme parameter perturbed from its SPEC
init. Every parameter is compared, by name and shape.

Measures and tolerances:
  1e-4  logits, loss, every gradient: max|c - ref| / max|ref| per tensor.
        The C side computes in fp32 (unit roundoff 6e-8); the roundings
        accumulated through 12 sublayers stay near 1e-6..1e-5, while a wrong
        formula is off by >= 1e-2. The 0-dim tensors (delta_mh's res_alpha)
        are taken together as one vector: a lone scalar gradient is one sum
        over B*T*d terms that can cancel to near zero by chance.
  1e-4  each step's loss, relative to that step's reference loss.
  1e-3  each step's global gradient norm (relative): late in the run the
        trajectory has amplified the roundoff (torch's own fp32 reaches 2.5e-4
        for attnres).
  1e-4  the parameters after 10 steps as ||c - ref|| / ||ref|| per tensor.
        Not max-element: AdamW's first step moves every element by about
        lr * sign(g), so an element whose true gradient lies below fp32 noise
        moves by +-lr at random; such elements exist in any fp32 run (the
        max-element figure reaches ~1e-3 for torch's own fp32) and are printed
        as "info" lines only. Gradients are checked element-wise above. (At
        1e-4 the L2 figure still catches weight decay skipped on vectors,
        6e-4, or a wrong AdamW eps, 9e-4; fp32 noise is ~1e-5.)
  1e-5  reference vs HF transformers (both at >= fp32 precision: HF computes
        its norms and softmax in fp32 even for a float64 model).
  1e-4  the continued-training recipe (RECIPES: weight decay off some
        parameter classes, z-loss, EMA of the weights) on 10 steps as above:
        losses, gradient norms and parameters at the tolerances above, each
        step's z-loss term at TOL_LOSSES, the EMA weights at TOL_PARAMS.
        The z-loss coefficient is far above PaLM's 1e-4 so that its gradient
        moves the run: at 1e-4 it would change the parameters by less than
        the tolerance and a wrong z-loss gradient would pass unseen.
The self-check "fp32_headroom" runs the reference in fp32 through the same
measures against float64: an honest fp32 implementation must pass them.

Reference self-checks that need no C code: (a) the baseline equals HF
Qwen3ForCausalLM and LlamaForCausalLM, tied and untied, with linear and llama3
RoPE scaling; (b) mhar with H = 1 equals attnres exactly
and Route(H=1) is textbook single-head AttnRes; (c) with every routing query 0
each read is the uniform mean of its sources; (d) delta_mh with every
res_alpha = 0 gives the baseline logits exactly (and denseformer at its SPEC
init too).

Enable schemes in SCHEMES as the C side gains them, or select some for one
run: MHAR_EXACT_SCHEMES=all (or a comma list of names) python3 tests/test_exact.py
(a recipe runs when its scheme or its own name is in the list).
"""
import os
import sys
import tempfile
from pathlib import Path

import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ref import common, model  # noqa: E402
from ref.common import Report, group_scalars, rel_err, rel_l2, worst_rel  # noqa: E402

SCHEMES = [
    dict(name="baseline", mode="baseline", enabled=True),
    dict(name="baseline_untied", mode="baseline", tied=False, enabled=True),
    dict(name="attnres", mode="attnres", enabled=True),
    dict(name="mhar_h2", mode="mhar", heads=2, enabled=True),
    dict(name="mhar_h4", mode="mhar", heads=4, enabled=True),
    dict(name="mhar_h8", mode="mhar", heads=8, enabled=True),
    dict(name="block_h2_n2", mode="block", heads=2, blocks=2, enabled=True),
    dict(name="block_h1_n3", mode="block", heads=1, blocks=3, enabled=True),
    dict(name="hc", mode="hc", enabled=True),
    dict(name="denseformer", mode="denseformer", enabled=True),
    dict(name="delta_mh_h2_n3", mode="delta_mh", heads=2, blocks=3, enabled=True),
    # The llama family (no per-head q/k norm), and Llama 3.1 RoPE scaling at
    # positions beyond its original context (LLAMA3_ROPE: 16 < T).
    dict(name="llama_baseline", mode="baseline", family="llama", enabled=True),
    dict(name="llama_mhar_h4", mode="mhar", heads=4, family="llama", enabled=True),
    dict(name="llama_hc", mode="hc", family="llama", enabled=True),
    dict(name="llama_delta_mh_h2_n3", mode="delta_mh", heads=2, blocks=3, family="llama", enabled=True),
    dict(name="llama_mhar_h4_rope_llama3", mode="mhar", heads=4, family="llama", rope="llama3", enabled=True),
    dict(name="qwen3_baseline_rope_linear", mode="baseline", rope="linear", enabled=True),
]

# hd 32, theta 10000: wavelengths 6.3 .. 35000; with original context 16 the
# bands are < 8 (kept), 8 .. 16 (blended), > 16 (divided by 4): all present.
ROPE_SCALING = {
    "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0,
               "original_max_position_embeddings": 16},
    "linear": {"rope_type": "linear", "factor": 2.5},
}

# The recipe on top of schemes whose "route" tensors are of every kind:
# queries and key norms, null sources and gates, hc, dwa.
RECIPES = [
    dict(name="recipe_all_delta_mh", scheme="delta_mh_h2_n3", wd_exclude="all", z_loss=0.02, ema=0.9),
    dict(name="recipe_embed_route_hc", scheme="hc", wd_exclude="embed,route", z_loss=0.02, ema=0.8),
    dict(name="recipe_norm_mhar", scheme="mhar_h4", wd_exclude="norm", z_loss=0.0, ema=0.0),
    dict(name="recipe_zloss_denseformer", scheme="denseformer", wd_exclude="", z_loss=0.05, ema=0.95),
]
CLASSES = {"all": ("embed", "norm", "route"), "": ()}

B, T = 2, 32
SEED, TOKEN_SEED = 1234, 7
STEPS, LR, WARMUP = 10, 1e-3, 2
TOL_FORWARD = 1e-4      # logits, loss, gradients
TOL_LOSSES = 1e-4       # each step's loss
TOL_GRAD_NORM = 1e-3    # each step's gradient norm
TOL_PARAMS = 1e-4       # parameters after STEPS steps, L2 per tensor
TOL_HF = 1e-5


def config_of(sc):
    return common.make_config(sc["mode"], heads=sc.get("heads", 1), blocks=sc.get("blocks", 0),
                              tied=sc.get("tied", True), family=sc.get("family", "qwen3"),
                              rope_scaling=ROPE_SCALING.get(sc.get("rope")))


def scheme(name):
    return next(sc for sc in SCHEMES if sc["name"] == name)


def selected_schemes():
    pick = os.environ.get("MHAR_EXACT_SCHEMES", "")
    if not pick:
        return [sc for sc in SCHEMES if sc["enabled"]]
    if pick == "all":
        return list(SCHEMES)
    recipes = {rc["name"] for rc in RECIPES}
    return [scheme(n.strip()) for n in pick.split(",") if n.strip() and n.strip() not in recipes]


def selected_recipes():
    """Every recipe, or with MHAR_EXACT_SCHEMES set those on a chosen scheme
    (or named in it); "none" runs none."""
    pick = os.environ.get("MHAR_EXACT_SCHEMES", "")
    if not pick or pick == "all":
        return list(RECIPES)
    names = {n.strip() for n in pick.split(",")}
    return [rc for rc in RECIPES if rc["scheme"] in names or rc["name"] in names]


def f64(params):
    return {k: v.double() for k, v in params.items()}


def worst_tensor(got, ref):
    """(name, error) of the worst tensor, the 0-dim ones taken together."""
    return worst_rel(*group_scalars(got, ref))


# --------------------------------------------------------------------------
# Reference self-checks (no C code)
# --------------------------------------------------------------------------

def check_hf(rep, tmp, inputs):
    """(a) reference baseline == transformers Qwen3ForCausalLM and
    LlamaForCausalLM, tied and untied, and with RoPE scaling."""
    from transformers import LlamaForCausalLM, Qwen3ForCausalLM
    cases = [("qwen3", tied, None) for tied in (True, False)] + \
            [("llama", tied, None) for tied in (True, False)] + \
            [("llama", True, "llama3"), ("llama", True, "linear"), ("qwen3", True, "llama3")]
    for family, tied, rope in cases:
        name = f"selfcheck.hf_{family}_{'tied' if tied else 'untied'}{'_rope_' + rope if rope else ''}"
        with rep.guard(name):
            cfg = common.make_config("baseline", tied=tied, family=family, rope_scaling=ROPE_SCALING.get(rope))
            params = model.init_params(cfg, SEED)
            run = common.write_run_dir(Path(tmp) / name, cfg, params)
            cls = Qwen3ForCausalLM if family == "qwen3" else LlamaForCausalLM
            hf, info = cls.from_pretrained(
                run, attn_implementation="eager", dtype=torch.float64, output_loading_info=True)
            bad = {k: v for k, v in info.items() if v}
            if bad:
                raise AssertionError(f"HF loading info not clean: {bad}")
            with torch.no_grad():
                want = hf(input_ids=inputs).logits
                got = model.forward(cfg, f64(params), inputs)
            rep.within(name, rel_err(got, want), TOL_HF, "logits")


def single_head_route(S, q, g, eps=1e-6):
    """Textbook single-head AttnRes: softmax_n(q . RMSNorm_g(S_n)), values S_n."""
    keys = [s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * g for s in S]
    w = torch.stack([k @ q for k in keys]).softmax(0)
    return sum(w[n, ..., None] * S[n] for n in range(len(S)))


def random_sources(n, d=128, seed=3):
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    return [rand(B, T, d) * (i + 1) for i in range(n)], rand(d), 1 + 0.1 * rand(d)


def check_h1_is_attnres(rep, inputs):
    """(b) mhar H=1 == attnres bit for bit; Route(H=1) is the single-head
    formula; head h of Route(H) is the single-head read with q zeroed outside
    slice h (contiguous slices, full-width rho)."""
    with rep.guard("selfcheck.mhar_h1_is_attnres"):
        cfg_a, cfg_m = common.make_config("attnres"), common.make_config("mhar", heads=1)
        params = f64(model.init_params(cfg_a, SEED))
        same = torch.equal(model.forward(cfg_a, params, inputs), model.forward(cfg_m, params, inputs))
        rep.check("selfcheck.mhar_h1_is_attnres", same, "logits bit-identical" if same else "differ")
    with rep.guard("selfcheck.route_h1_formula"):
        S, q, g = random_sources(5)
        err = rel_err(model.route(S, q, g, 1, 1e-6), single_head_route(S, q, g))
        rep.within("selfcheck.route_h1_formula", err, 1e-12)
    with rep.guard("selfcheck.route_heads_are_masked_queries"):
        S, q, g = random_sources(5, seed=4)
        H, w = 4, 128 // 4
        got, head_of = model.route(S, q, g, H, 1e-6), torch.arange(128) // w
        sl = [slice(h * w, (h + 1) * w) for h in range(H)]
        err = max(rel_err(got[..., sl[h]], single_head_route(S, q * (head_of == h), g)[..., sl[h]])
                  for h in range(H))
        rep.within("selfcheck.route_heads_are_masked_queries", err, 1e-12)


def check_zero_query_uniform(rep, inputs):
    """(c) with every routing query 0, each read is the uniform mean of its sources."""
    for name in ("mhar_h4", "block_h2_n2", "block_h1_n3", "delta_mh_h2_n3"):
        check = f"selfcheck.zero_query_uniform.{name}"
        with rep.guard(check):
            cfg = config_of(scheme(name))
            params = f64(model.init_params(cfg, SEED))
            for k in params:
                if k.endswith("_res_proj.weight"):
                    params[k] = torch.zeros_like(params[k])
            trace = []
            model.forward(cfg, params, inputs, trace=trace)
            err = max(rel_err(x, torch.stack([s.expand_as(x) for s in srcs]).mean(0))
                      for srcs, x in trace)
            rep.within(check, err, 1e-12, f"{len(trace)} reads, worst")


def check_exact_reductions(rep, inputs):
    """(d) delta_mh with res_alpha = 0 == baseline exactly, in float64 and
    fp32; denseformer at its SPEC init (one-hot dwa) == baseline exactly."""
    base_cfg = common.make_config("baseline")
    base = model.init_params(base_cfg, SEED)
    delta_cfg = config_of(scheme("delta_mh_h2_n3"))
    delta = model.init_params(delta_cfg, SEED)
    for k in delta:
        if k.endswith("_res_alpha"):
            delta[k] = torch.zeros_like(delta[k])
    dense_cfg = common.make_config("denseformer")
    dense = model.init_params(dense_cfg, SEED, random_routing=False)
    cases = [("delta_zero_alpha_is_baseline", delta_cfg, delta),
             ("denseformer_init_is_baseline", dense_cfg, dense)]
    for label, cfg, params in cases:
        for dtype in (torch.float64, torch.float32):
            name = f"selfcheck.{label}.{str(dtype).split('.')[-1]}"
            with rep.guard(name), torch.no_grad():
                cast = lambda p: {k: v.to(dtype) for k, v in p.items()}   # noqa: E731
                want = model.forward(base_cfg, cast(base), inputs)
                got = model.forward(cfg, cast(params), inputs)
                same = torch.equal(got, want)
                rep.check(name, same, "bit-identical" if same else f"differ, rel {rel_err(got, want):.1e}")


def check_token_file(rep, tmp):
    with rep.guard("selfcheck.token_file"):
        path = Path(tmp) / "roundtrip.bin"
        toks = common.random_tokens(1000, 70000, 5).numpy()
        common.write_tokens(path, toks, 70000)
        back, vocab = common.read_tokens(path)
        ok = vocab == 70000 and (back == toks).all() and path.stat().st_size == 32 + 4 * 1000
        rep.check("selfcheck.token_file", bool(ok), "round trip")


# --------------------------------------------------------------------------
# Error figures, shared by the fp32 headroom self-check and the C comparison
# --------------------------------------------------------------------------

def step_error(got, ref):
    """(step, error): the worst per-step relative error of a trajectory."""
    errs = [abs(g - r) / abs(r) if len(got) == len(ref) else float("inf")
            for g, r in zip(got, ref)] or [float("inf")]
    step = max(range(len(errs)), key=errs.__getitem__)
    return step, errs[step]


def forward_errors(logits, value, grads, ref):
    """{kind: (where, error)} of (logits, loss, grads) against the reference."""
    return {"logits": ("", rel_err(logits, ref[0])),
            "loss": ("", rel_err(value.reshape(-1), ref[1].reshape(-1))),
            "grads": worst_tensor(grads, ref[2])}


def train_errors(losses, norms, params, ref):
    """{kind: (where, error)} of a training run against the reference run.
    Parameters: ||c - ref|| / ||ref|| per tensor (see the module docstring)."""
    return {"losses": step_error(losses, ref[0]),
            "grad_norm": step_error(norms, ref[1]),
            "params": worst_rel(*group_scalars(params, ref[2]), measure=rel_l2)}


TOLERANCES = {"logits": TOL_FORWARD, "loss": TOL_FORWARD, "grads": TOL_FORWARD,
              "losses": TOL_LOSSES, "grad_norm": TOL_GRAD_NORM, "params": TOL_PARAMS,
              "z_terms": TOL_LOSSES, "ema": TOL_PARAMS}


def check_fp32_headroom(rep, inputs, targets):
    """The reference run in fp32 passes the tolerances the C side must meet."""
    kw = dict(steps=STEPS, lr=LR, warmup=WARMUP)
    for sc in SCHEMES:
        name = f"selfcheck.fp32_headroom.{sc['name']}"
        with rep.guard(name):
            cfg = config_of(sc)
            params = model.init_params(cfg, SEED)
            lo = model.loss_and_grads(cfg, params, inputs, targets, torch.float32)
            hi = model.loss_and_grads(cfg, params, inputs, targets, torch.float64)
            errs = forward_errors(*lo, hi)
            tlo = model.train_reference(cfg, params, inputs, targets, dtype=torch.float32, **kw)
            thi = model.train_reference(cfg, params, inputs, targets, dtype=torch.float64, **kw)
            errs.update(train_errors(*tlo, thi))
            ok = all(e <= TOLERANCES[k] for k, (_, e) in errs.items())
            rep.check(name, ok, ", ".join(f"{k} {e:.1e}" for k, (_, e) in errs.items()))


# --------------------------------------------------------------------------
# C vs reference
# --------------------------------------------------------------------------

def tensor(dump, key):
    if key not in dump:
        raise KeyError(f"tool_dump output has no {key!r}")
    return dump[key]


def prefixed(dump, prefix):
    return {k[len(prefix):]: v for k, v in dump.items() if k.startswith(prefix)}


def compare_names(rep, name, dump, prefix, params):
    """The dump holds prefix+name, with the parameter's shape, for exactly the
    parameters of the config."""
    got = {k: tuple(v.shape) for k, v in prefixed(dump, prefix).items()}
    missing, extra = sorted(set(params) - set(got)), sorted(set(got) - set(params))
    shapes = [f"{k} {got[k]} != {tuple(v.shape)}" for k, v in params.items()
              if k in got and got[k] != tuple(v.shape)]
    if missing or extra or shapes:
        more = lambda xs: f"{xs[:3]}{'...' if len(xs) > 3 else ''}"   # noqa: E731
        return rep.fail(name, f"missing {more(missing)}, extra {more(extra)}, shapes {more(shapes)}")
    return rep.passed(name, f"{len(got)} tensors")


def report_errors(rep, name, errs):
    for kind, (where, err) in errs.items():
        what = f"worst {'step ' if isinstance(where, int) else ''}{where}:" if where != "" else ""
        rep.within(f"{name}.{kind}", err, TOLERANCES[kind], what)


def compare_forward(rep, name, dump, cfg, params, inputs, targets):
    ref = model.loss_and_grads(cfg, params, inputs, targets)
    compare_names(rep, f"{name}.grad_names", dump, "grad.", params)
    got = (tensor(dump, "logits"), tensor(dump, "loss"), prefixed(dump, "grad."))
    report_errors(rep, name, forward_errors(*got, ref))


def compare_train(rep, name, dump, cfg, params, inputs, targets):
    ref = model.train_reference(cfg, params, inputs, targets, steps=STEPS, lr=LR, warmup=WARMUP)
    compare_names(rep, f"{name}.train_param_names", dump, "param.", params)
    got = (tensor(dump, "losses").double().reshape(-1).tolist(),
           tensor(dump, "grad_norm").double().reshape(-1).tolist(), prefixed(dump, "param."))
    report_errors(rep, f"{name}.train", train_errors(*got, ref))
    worst, err = worst_tensor(got[2], ref[2])        # information only, not a check
    print(f"info {name}.train.params max-element: worst {worst}: rel err {err:.2e}")


def recipe_args(rc):
    """(tool_dump's flags, train_recipe_reference's keywords) of a recipe."""
    flags = {k: rc[k] for k in ("wd_exclude", "z_loss", "ema") if rc[k]}
    ema = float(torch.tensor(rc["ema"], dtype=torch.float32))    # as the C side reads it
    kw = dict(steps=STEPS, lr=LR, warmup=WARMUP, z_loss=rc["z_loss"], ema=ema,
              wd_exclude=CLASSES.get(rc["wd_exclude"], tuple(rc["wd_exclude"].split(","))))
    return flags, kw


def recipe_errors(got, ref):
    """train_errors plus the z-loss terms and the EMA weights."""
    errs = train_errors(*got[:3], ref[:3])
    if any(ref[3]):
        errs["z_terms"] = step_error(got[3], ref[3])
    if ref[4] is not None:
        errs["ema"] = worst_rel(*group_scalars(got[4], ref[4]), measure=rel_l2)
    return errs


def check_recipe_fp32_headroom(rep, inputs, targets):
    for rc in RECIPES:
        name = f"selfcheck.fp32_headroom.{rc['name']}"
        with rep.guard(name):
            cfg = config_of(scheme(rc["scheme"]))
            params = model.init_params(cfg, SEED)
            _, kw = recipe_args(rc)
            lo = model.train_recipe_reference(cfg, params, inputs, targets, dtype=torch.float32, **kw)
            hi = model.train_recipe_reference(cfg, params, inputs, targets, **kw)
            errs = recipe_errors(lo, hi)
            ok = all(e <= TOLERANCES[k] for k, (_, e) in errs.items())
            rep.check(name, ok, ", ".join(f"{k} {e:.1e}" for k, (_, e) in errs.items()))


def check_recipe_against_c(rep, rc, tmp, tokens_path, inputs, targets):
    """mhar's optimizer with the recipe (tool_dump) against the reference's."""
    name = f"exact.{rc['name']}"
    with rep.guard(name):
        cfg = config_of(scheme(rc["scheme"]))
        params = model.init_params(cfg, SEED)
        run = common.write_run_dir(Path(tmp) / rc["name"], cfg, params)
        flags, kw = recipe_args(rc)
        dump = common.tool_dump(run, tokens_path, B, T, Path(tmp) / f"{rc['name']}.safetensors",
                                steps=STEPS, lr=LR, warmup=WARMUP, recipe=flags)
        ref = model.train_recipe_reference(cfg, params, inputs, targets, **kw)
        if rc["ema"]:
            compare_names(rep, f"{name}.ema_names", dump, "ema.", params)
        got = (tensor(dump, "losses").double().reshape(-1).tolist(),
               tensor(dump, "grad_norm").double().reshape(-1).tolist(), prefixed(dump, "param."),
               tensor(dump, "z_terms").double().reshape(-1).tolist(), prefixed(dump, "ema.") or None)
        report_errors(rep, name, recipe_errors(got, ref))


def check_against_c(rep, sc, tmp, tokens_path, inputs, targets):
    name = f"exact.{sc['name']}"
    cfg = config_of(sc)
    params = model.init_params(cfg, SEED)
    run = common.write_run_dir(Path(tmp) / sc["name"], cfg, params)
    with rep.guard(f"{name}.forward"):
        dump = common.tool_dump(run, tokens_path, B, T, Path(tmp) / f"{sc['name']}.fwd.safetensors")
        compare_forward(rep, name, dump, cfg, params, inputs, targets)
    with rep.guard(f"{name}.train"):
        dump = common.tool_dump(run, tokens_path, B, T, Path(tmp) / f"{sc['name']}.train.safetensors",
                                steps=STEPS, lr=LR, warmup=WARMUP)
        compare_train(rep, name, dump, cfg, params, inputs, targets)


def main():
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    transformers.utils.logging.disable_progress_bar()
    rep = Report()
    with tempfile.TemporaryDirectory(prefix="mhar_exact_") as tmp:
        tokens = common.random_tokens(B * (T + 1), common.NANO["vocab_size"], TOKEN_SEED)
        tokens_path = Path(tmp) / "tokens.bin"
        common.write_tokens(tokens_path, tokens.numpy(), common.NANO["vocab_size"])
        inputs, targets = common.batch_rows(tokens, B, T)

        check_token_file(rep, tmp)
        check_hf(rep, tmp, inputs)
        check_h1_is_attnres(rep, inputs)
        check_zero_query_uniform(rep, inputs)
        check_exact_reductions(rep, inputs)
        check_fp32_headroom(rep, inputs, targets)
        check_recipe_fp32_headroom(rep, inputs, targets)
        for sc in selected_schemes():
            check_against_c(rep, sc, tmp, tokens_path, inputs, targets)
        for rc in selected_recipes():
            check_recipe_against_c(rep, rc, tmp, tokens_path, inputs, targets)
    rep.finish()


if __name__ == "__main__":
    main()
