"""Helpers shared by the Python tests: run directories (config.json +
model.safetensors), mhar token files, driving the C tools, reading their
output, the relative-error measure, and the PASS/FAIL reporter that
tests/run.sh counts.

Relative error of a tensor, as in tests/check.h: max|a - ref| / max|ref|, one
figure per tensor, so it scales with the tensor and is not fooled by entries
that are near zero. An all-zero reference (e.g. the gradient of a routing site
that reads a single source) is compared absolutely instead (denominator 1).
rel_l2 is the same in the L2 sense, ||a - ref|| / ||ref||, for quantities
where a few elements may legitimately scatter (parameters after AdamW steps).
"""
import contextlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parents[2]

TOKEN_MAGIC = b"MHARTOK\0"
TOKEN_HEADER = struct.Struct("<8sIIQII")    # magic, version, width, count, vocab, reserved

# The nano test shape of tests/test_exact.py.
NANO = dict(hidden_size=128, num_hidden_layers=6, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, intermediate_size=384, vocab_size=512)


# --------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------

def build_dir():
    """$MHAR_BUILD (default "build"), relative to the repo root."""
    b = Path(os.environ.get("MHAR_BUILD", "build"))
    return b if b.is_absolute() else REPO / b


def tool_path(name="tool_dump"):
    return build_dir() / "tests" / name


def mhar_binary():
    """$MHAR_BIN (set by make test; a sanitizer build has its own), else ./mhar."""
    return Path(os.environ.get("MHAR_BIN") or REPO / "mhar")


# --------------------------------------------------------------------------
# Run directories
# --------------------------------------------------------------------------

FAMILY_CLASS = {"qwen3": "Qwen3ForCausalLM", "llama": "LlamaForCausalLM"}


def make_config(mode="baseline", heads=1, blocks=0, tied=True, family="qwen3", rope_scaling=None, **shape):
    """A full config.json dict: the HF Qwen3 (or Llama) keys of SPEC §3, the
    extra keys transformers expects, and the attnres_* keys. `shape`
    overrides NANO; rope_scaling is a transformers rope_scaling dict."""
    s = {**NANO, **shape}
    if family == "qwen3":
        family_keys = {"use_sliding_window": False, "sliding_window": None,
                       "max_window_layers": s["num_hidden_layers"]}
    else:
        family_keys = {"mlp_bias": False}
    return {
        "architectures": [FAMILY_CLASS[family]],
        "model_type": family,
        **family_keys,
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "hidden_size": s["hidden_size"],
        "num_hidden_layers": s["num_hidden_layers"],
        "num_attention_heads": s["num_attention_heads"],
        "num_key_value_heads": s["num_key_value_heads"],
        "head_dim": s["head_dim"],
        "intermediate_size": s["intermediate_size"],
        "vocab_size": s["vocab_size"],
        "max_position_embeddings": s.get("max_position_embeddings", 256),
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "rope_scaling": rope_scaling,
        "tie_word_embeddings": tied,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
        "attnres_mode": mode,
        "attnres_num_heads": heads,
        "attnres_num_blocks": blocks,
    }


def write_config(path, cfg):
    Path(path).write_text(json.dumps(cfg, indent=2) + "\n")


def write_params(path, params):
    """fp32 safetensors with metadata {"format": "pt"}."""
    tensors = {k: v.detach().to(torch.float32).contiguous() for k, v in params.items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def write_run_dir(directory, cfg, params):
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    write_config(d / "config.json", cfg)
    write_params(d / "model.safetensors", params)
    return d


def load_safetensors(path):
    return load_file(str(path))


def safetensors_metadata(path):
    with safe_open(str(path), framework="pt") as f:
        return f.metadata()


# --------------------------------------------------------------------------
# Token files
# --------------------------------------------------------------------------

def write_tokens(path, tokens, vocab):
    """mhar token file: 32-byte header then little-endian u16/u32 tokens."""
    tokens = np.asarray(tokens).reshape(-1)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
        raise ValueError("token id out of range")
    width = 2 if vocab <= 65536 else 4
    body = tokens.astype("<u2" if width == 2 else "<u4").tobytes()
    header = TOKEN_HEADER.pack(TOKEN_MAGIC, 1, width, tokens.size, vocab, 0)
    Path(path).write_bytes(header + body)


def read_tokens(path):
    """(tokens int64 array, vocab) of an mhar token file."""
    raw = Path(path).read_bytes()
    magic, version, width, count, vocab, _ = TOKEN_HEADER.unpack_from(raw)
    if magic != TOKEN_MAGIC or version != 1 or width not in (2, 4):
        raise ValueError(f"{path}: not an mhar token file")
    dtype = "<u2" if width == 2 else "<u4"
    return np.frombuffer(raw, dtype=dtype, count=count, offset=32).astype(np.int64), vocab


def random_tokens(count, vocab, seed):
    return torch.randint(0, vocab, (count,), generator=torch.Generator().manual_seed(seed))


def batch_rows(tokens, B, T):
    """The tool's batch: row b is tokens[b*(T+1) : b*(T+1)+T+1]; inputs are its
    first T tokens, targets the next-token shift. Returns (inputs, targets)."""
    rows = torch.as_tensor(np.asarray(tokens[: B * (T + 1)])).long().reshape(B, T + 1)
    return rows[:, :T], rows[:, 1:]


# --------------------------------------------------------------------------
# Running the C side
# --------------------------------------------------------------------------

class ToolError(RuntimeError):
    pass


def run_command(args, timeout=600, cwd=REPO):
    """Run a command; ToolError (with the tail of its output) unless it exits 0."""
    exe = Path(args[0])
    if not exe.exists():
        raise ToolError(f"{exe} not found (not built yet?)")
    try:
        res = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{exe.name} timed out after {timeout}s") from None
    if res.returncode != 0:
        tail = (res.stdout + res.stderr).strip().splitlines()[-5:]
        raise ToolError(f"{exe.name} exited {res.returncode}: " + " | ".join(tail))
    return res


def tool_dump(run_dir, tokens_path, B, T, out, steps=None, lr=None, warmup=None, recipe=None, timeout=300):
    """Run tests/tool_dump and return its output tensors (a dict). recipe:
    {"wd_exclude": "embed,norm", "z_loss": C, "ema": D} (any of them)."""
    args = [tool_path(), "--run", run_dir, "--tokens", tokens_path,
            "--batch", B, "--seq", T, "--out", out]
    if steps is not None:
        args += ["--steps", steps, "--lr", repr(float(lr)), "--warmup", warmup]
    for key, value in (recipe or {}).items():
        args += ["--" + key.replace("_", "-"), value]
    run_command(args, timeout=timeout)
    return load_safetensors(out)


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------

def rel_err(a, ref):
    """max|a - ref| / max|ref| (absolute if ref is all zero); inf on a shape
    mismatch or a non-finite value."""
    a = torch.as_tensor(a).double()
    ref = torch.as_tensor(ref).double()
    if a.shape != ref.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    diff = (a - ref).abs().max().item()
    if diff != diff:                              # NaN
        return float("inf")
    scale = ref.abs().max().item()
    return diff / (scale if scale > 0 else 1.0)


def rel_l2(a, ref):
    """||a - ref|| / ||ref|| (absolute if ref is all zero); inf on a shape
    mismatch or a non-finite value."""
    a = torch.as_tensor(a).double()
    ref = torch.as_tensor(ref).double()
    if a.shape != ref.shape:
        return float("inf")
    diff = (a - ref).norm().item()
    if diff != diff:
        return float("inf")
    scale = ref.norm().item()
    return diff / (scale if scale > 0 else 1.0)


def worst_rel(got, ref, measure=rel_err):
    """(name, error) of the worst tensor over the names of `ref`; a name absent
    from `got` counts as an infinite error."""
    errs = {k: (measure(got[k], v) if k in got else float("inf")) for k, v in ref.items()}
    name = max(errs, key=errs.get)
    return name, errs[name]


def group_scalars(got, ref):
    """Replace the 0-dim tensors of both dicts by one vector "scalars(N)".

    A lone scalar's gradient (delta_mh's res_alpha: one dot product over
    B*T*d terms) can be near zero by chance, and then max|a-ref|/|ref| is
    meaningless; compared as one vector the scalars share one scale, as the
    entries of any other tensor do. A scalar missing from `got` becomes NaN.
    """
    names = sorted(k for k, v in ref.items() if v.dim() == 0)
    if not names:
        return got, ref
    key, nan = f"scalars({len(names)})", torch.tensor(float("nan"))
    g = {k: v for k, v in got.items() if k not in names}
    r = {k: v for k, v in ref.items() if k not in names}
    g[key] = torch.stack([got.get(k, nan).double().reshape(()) for k in names])
    r[key] = torch.stack([ref[k].double() for k in names])
    return g, r


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

class Report:
    """Prints "PASS name" / "FAIL name: reason" lines (what tests/run.sh
    counts) and remembers whether anything failed."""

    def __init__(self):
        self.failures = 0

    def passed(self, name, detail=""):
        print(f"PASS {name}" + (f"  ({detail})" if detail else ""), flush=True)

    def fail(self, name, reason):
        self.failures += 1
        print(f"FAIL {name}: {reason}", flush=True)

    def check(self, name, ok, detail):
        """PASS with detail, or FAIL with detail as the reason."""
        (self.passed if ok else self.fail)(name, detail)
        return ok

    def within(self, name, err, tol, what=""):
        """Check an error figure against a tolerance."""
        detail = f"{what + ' ' if what else ''}rel err {err:.2e}, tol {tol:.0e}"
        return self.check(name, err <= tol, detail)

    @contextlib.contextmanager
    def guard(self, name):
        """Turn an exception inside the block into one FAIL line."""
        try:
            yield
        except Exception as e:                    # noqa: BLE001 - reported, not hidden
            self.fail(name, f"{type(e).__name__}: {e}")

    def finish(self):
        sys.exit(1 if self.failures else 0)
