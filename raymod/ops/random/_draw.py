"""Draws shared by the sampling ops (not an op module)."""
from __future__ import annotations

import numpy as np

from ... import random as rm_random

SAMPLE_DTYPES = ("float16", "float32", "float64")


def standard(xp, kind: str, shape: tuple, dtype: np.dtype):
    """Standard normal or U[0, 1) samples of ``shape`` from raymod's generator for ``xp``.

    Generators draw float32 or float64 only; float16 samples are drawn in float32.
    """
    draw = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
    gen = rm_random.device_generator(xp)
    if kind == "normal":
        values = gen.standard_normal(shape, dtype=draw)
    else:
        values = gen.random(shape, dtype=draw)
    return values.astype(dtype, copy=False)
