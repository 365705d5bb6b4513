"""Cross-check mhar's safetensors reader and writer against the reference
Python library, through the C helper build/tests/tool_st_write.

Prints "PASS name" / "FAIL name: reason" per check; exits non-zero on failure.
MHAR_BUILD names the build directory (default "build", relative to the repo).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("MHAR_BUILD", "build")
TOOL = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD),
                    "tests", "tool_st_write")
failures = 0


def check(ok, name, reason=""):
    global failures
    if ok:
        print(f"PASS {name}")
    else:
        failures += 1
        print(f"FAIL {name}: {reason}")
    sys.stdout.flush()


def expected():
    """The table and values of tool_st_write.c, computed in float32."""
    a = (np.arange(15, dtype=np.float32) * np.float32(0.5) - np.float32(3)).reshape(3, 5)
    b = np.float32(1) / np.arange(1, 8, dtype=np.float32)
    s = np.array(-1234.5, dtype=np.float32)
    return {
        "model.embed_tokens.weight": a,
        "model.norm.weight": b,
        "model.layers.0.attn_res_alpha": s,
    }


def run_tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)


def raw_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return n, f.read(n)


def test_c_writes(tmp):
    path = os.path.join(tmp, "from_c.safetensors")
    r = run_tool(path)
    check(r.returncode == 0, "c_write_runs", r.stderr.strip())
    if r.returncode != 0:
        return
    try:
        got = load_file(path)
    except Exception as e:  # the reference library refusing our file is the failure
        check(False, "c_file_loads_in_python", repr(e))
        return
    check(True, "c_file_loads_in_python")
    want = expected()
    check(set(got) == set(want), "c_file_names", f"{sorted(got)} vs {sorted(want)}")
    for name, w in want.items():
        t = got.get(name)
        ok = (t is not None and t.dtype == torch.float32 and tuple(t.shape) == w.shape
              and np.array_equal(t.numpy().view(np.uint32), w.view(np.uint32)))
        check(ok, f"c_file_tensor {name}",
              f"got {None if t is None else (t.dtype, tuple(t.shape), t.flatten().tolist())}")
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
    check(meta == {"format": "pt"}, "c_file_metadata", repr(meta))
    n, header = raw_header(path)
    keys = [k for k in json.loads(header) if k != "__metadata__"]
    check(n % 8 == 0 and keys == list(want), "c_file_header_layout",
          f"header length {n}, order {keys}")


def parse_check_output(text):
    out = {}
    for line in text.strip().splitlines():
        name, *vals = line.split()
        out[name] = np.array([np.float32(v) for v in vals], dtype=np.float32)
    return out


def test_c_reads(tmp):
    path = os.path.join(tmp, "from_py.safetensors")
    want = expected()
    save_file({k: torch.from_numpy(v.copy()) for k, v in want.items()}, path,
              metadata={"format": "pt"})
    r = run_tool("--check", path)
    check(r.returncode == 0, "py_file_loads_in_c", r.stderr.strip())
    if r.returncode != 0:
        return
    got = parse_check_output(r.stdout)
    for name, w in want.items():
        g = got.get(name)
        ok = g is not None and np.array_equal(g.view(np.uint32), w.reshape(-1).view(np.uint32))
        check(ok, f"py_file_tensor {name}", f"got {g}, want {w.reshape(-1)}")


def test_c_refuses(tmp):
    """Files the reference library writes happily but that do not match the table."""
    want = expected()
    cases = {
        "c_refuses_wrong_shape": ({**want, "model.norm.weight": np.zeros(8, np.float32)},
                                  "model.norm.weight"),
        "c_refuses_bf16": (None, "BF16"),
        "c_refuses_missing": ({k: v for k, v in want.items() if k != "model.norm.weight"},
                              "model.norm.weight"),
        "c_refuses_extra": ({**want, "model.extra": np.ones(2, np.float32)}, "model.extra"),
    }
    for name, (tensors, needle) in cases.items():
        path = os.path.join(tmp, name + ".safetensors")
        if tensors is None:
            ts = {k: torch.from_numpy(v.copy()) for k, v in want.items()}
            ts["model.norm.weight"] = ts["model.norm.weight"].to(torch.bfloat16)
        else:
            ts = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()}
        save_file(ts, path, metadata={"format": "pt"})
        r = run_tool("--check", path)
        check(r.returncode != 0 and needle in r.stderr, name,
              f"rc {r.returncode}, stderr {r.stderr.strip()!r}")


def main():
    if not os.access(TOOL, os.X_OK):
        check(False, "tool_present", f"{TOOL} not built (make {BUILD}/tests/tool_st_write)")
        return 1
    with tempfile.TemporaryDirectory(prefix="mhar_st_py.") as tmp:
        test_c_writes(tmp)
        test_c_reads(tmp)
        test_c_refuses(tmp)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
