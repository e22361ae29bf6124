"""One deterministic recipe for the model-zoo fixtures' parameters, inputs and gradient summaries.

The MXNet example networks in ``tests/fixtures/mxnet/zoo`` have up to ~100 million weights, too
many to commit. So neither side stores them: ``tools/make_mxnet_zoo_fixtures.py`` (run under
MXNet's venv) and ``tests/zoo/test_mxnet_examples.py`` (run under raymod) both import this file
and make every parameter, auxiliary state, input and head gradient from its name and shape.
The fixtures record a checksum per array, so a recipe that drifts (a changed formula, a numpy
whose generator changed) is caught before any numbers are compared.

Numpy only, no raymod or MXNet import: it must run in both environments (numpy 1.23 and 2.x).
Values come from ``numpy.random.default_rng(crc32(tag + name)).random(dtype=float32)``, whose
bit stream (PCG64, 24-bit floats) numpy keeps stable; all arithmetic after it is exact or a
single IEEE float32 rounding.
"""
from __future__ import annotations

import math
import zlib
from typing import Sequence

import numpy as np

RECIPE_VERSION = 1

# How many entries of a large gradient are recorded one by one, and below which size the
# whole gradient is stored instead of a summary.
NUM_SAMPLES = 64
FULL_BELOW = 4096


def seed_of(name: str, tag: str = "param") -> int:
    """The generator seed of one named array: a stable hash of ``tag:name``."""
    return zlib.crc32(f"{tag}:{name}".encode("utf-8"))


def uniform(name: str, shape: Sequence[int], tag: str = "param") -> np.ndarray:
    """float32 values in [-1, 1), a pure function of (tag, name, shape)."""
    rng = np.random.default_rng(seed_of(name, tag))
    u = rng.random(tuple(int(d) for d in shape), dtype=np.float32)
    u *= np.float32(2.0)   # in place (arrays reach 10^8 entries); both steps exact
    u -= np.float32(1.0)
    return u


def fan_in(shape: Sequence[int]) -> int:
    """Inputs feeding one output unit: everything but the first axis (FC / conv weights)."""
    return max(1, int(np.prod(shape[1:]))) if len(shape) > 1 else max(1, int(shape[0]))


def make_param(name: str, shape: Sequence[int], dtype: str = "float32") -> np.ndarray:
    """The value of parameter or auxiliary state ``name`` of ``shape``.

    By name: BatchNorm ``*moving_var`` in [0.5, 1), ``*moving_mean`` and ``*beta`` / ``*bias``
    in [-0.1, 0.1), ``*gamma`` / ``*scale`` in [0.9, 1.1), fused-RNN ``*parameters`` in
    [-0.1, 0.1); any other array (weights) He-uniform: [-1, 1) * sqrt(6 / fan_in), so
    activations keep their scale through ReLU stacks and logits stay of order one.
    """
    u = uniform(name, shape)
    low = name.lower()
    if low.endswith(("moving_var", "running_var")):
        scale, shift = 0.25, 0.75
    elif low.endswith(("moving_mean", "running_mean", "beta", "bias")):
        scale, shift = 0.1, 0.0
    elif low.endswith(("gamma", "scale")):
        scale, shift = 0.1, 1.0
    elif low.endswith("parameters"):
        scale, shift = 0.1, 0.0
    else:
        scale, shift = math.sqrt(6.0 / fan_in(shape)), 0.0
    u *= np.float32(scale)   # one float32 rounding, then an exact or rounded shift
    if shift:
        u += np.float32(shift)
    return u.astype(dtype, copy=False)


def make_input(name: str, shape: Sequence[int], spec: dict, dtype: str = "float32") -> np.ndarray:
    """An input array from its recipe ``spec``.

    ``{"kind": "uniform", "low": a, "high": b}`` gives floats in [a, b);
    ``{"kind": "int", "high": n, "low": m}`` gives whole numbers m..n-1 (``low`` defaults to
    0), stored as ``dtype``.
    """
    u = uniform(name, shape, tag="input")
    if spec["kind"] == "uniform":
        low, high = float(spec.get("low", -1.0)), float(spec.get("high", 1.0))
        out = (u.astype(np.float64) + 1.0) * ((high - low) / 2.0) + low
    elif spec["kind"] == "int":
        low, high = int(spec.get("low", 0)), int(spec["high"])
        span = high - low
        out = low + np.minimum(np.floor((u.astype(np.float64) + 1.0) * (span / 2.0)), span - 1)
    else:
        raise ValueError(f"input {name!r}: unknown recipe kind {spec['kind']!r}")
    return out.astype(dtype)


def head_grad(output_name: str, shape: Sequence[int], dtype: str = "float32") -> np.ndarray:
    """The head gradient fed to backward for a non-loss output."""
    return uniform(output_name, shape, tag="head").astype(dtype, copy=False)


def crc32(arr: np.ndarray) -> int:
    """crc32 of an array's bytes (C order)."""
    return zlib.crc32(np.ascontiguousarray(arr).data)


def checksum(arr: np.ndarray) -> dict:
    """What identifies an array made by the recipe: crc32 of its bytes and its float64 sum."""
    a = np.ascontiguousarray(arr)
    return {"crc32": zlib.crc32(a.tobytes()), "sum": float(a.sum(dtype=np.float64)),
            "dtype": str(a.dtype), "shape": list(a.shape)}


PROBE_CHUNK = 1 << 20


def projection(name: str, flat: np.ndarray) -> tuple[float, float]:
    """``(sum(flat * probe), rms(probe))`` for the fixed random probe of gradient ``name``.

    The probe is uniform in [-1, 1), made in chunks of PROBE_CHUNK entries, chunk ``k`` from
    its own seed ``probe:name:k``, so a 100-million-entry gradient needs no equal-sized probe.
    """
    total, squares = 0.0, 0.0
    for k, start in enumerate(range(0, flat.size, PROBE_CHUNK)):
        part = flat[start:start + PROBE_CHUNK].astype(np.float64)
        p = uniform(f"{name}:{k}", (part.size,), tag="probe").astype(np.float64)
        total += float(part @ p)
        squares += float(p @ p)
    return total, math.sqrt(squares / max(1, flat.size))


def sample_positions(name: str, size: int) -> np.ndarray:
    """NUM_SAMPLES distinct flat positions of a gradient: one uniformly placed in each of
    NUM_SAMPLES equal bins (so they spread over the whole array), ascending."""
    count = min(NUM_SAMPLES, size)
    rng = np.random.default_rng(seed_of(name, "positions"))
    step = size / count
    pos = np.floor((np.arange(count) + rng.random(count)) * step).astype(np.int64)
    return np.minimum(pos, size - 1)


def summarize(name: str, grad: np.ndarray) -> dict:
    """A gradient's record: full values when small, else norm, max, projection and samples.

    Sums run in float64 over chunks, so huge float32 gradients are never copied whole.
    """
    flat = np.ascontiguousarray(grad).reshape(-1)
    squares, max_abs = 0.0, 0.0
    for start in range(0, flat.size, PROBE_CHUNK):
        part = flat[start:start + PROBE_CHUNK].astype(np.float64)
        squares += float(part @ part)
        max_abs = max(max_abs, float(np.abs(part).max()))
    rec = {"shape": list(np.shape(grad)), "norm": math.sqrt(squares), "max_abs": max_abs}
    if flat.size < FULL_BELOW:
        rec["full"] = flat.astype(np.float64)
        return rec
    rec["projection"], rec["probe_rms"] = projection(name, flat)
    pos = sample_positions(name, flat.size)
    rec["positions"] = pos
    rec["samples"] = flat[pos].astype(np.float64)
    return rec
