"""A trained run with its routing weights replaced by random test values.

A few steps from zero-initialised queries leave the routes near uniform, so
a comparison of two implementations on them would barely exercise the
routing; the tests that compare logits put random values there first.
"""
import os

from . import common
from . import model as ref_model


def scheme_names(cfg):
    """The run's tensors that a baseline model of the same shape lacks."""
    base = ref_model.param_shapes({**cfg, "attnres_mode": "baseline"})
    return [k for k in ref_model.param_shapes(cfg) if k not in base]


def perturb_scheme(run, cfg, seed):
    """Replace every scheme tensor of the run by its test value from `seed`."""
    path = run / "model.safetensors"
    tensors = common.load_safetensors(path)
    test = ref_model.init_params(cfg, seed, random_routing=True)
    for k in scheme_names(cfg):
        tensors[k] = test[k]
    os.unlink(path)                    # a hard link to the checkpoint's copy: write a new file
    common.write_params(path, tensors)
