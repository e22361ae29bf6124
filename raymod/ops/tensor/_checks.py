"""Checks shared by the indexing, ordering and shape tensor ops (not an op module)."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError


def axis_of(axis: int, shape: tuple, attr: str = "axis", extra: int = 0) -> int:
    """``axis`` of an input of ``shape`` in ``[0, ndim + extra)``; ShapeError naming both."""
    size = len(shape) + extra
    if not -size <= axis < size:
        raise ShapeError(f"{attr}={axis} is out of range for data of shape {tuple(shape)} "
                         f"(valid: {-size} to {size - 1})")
    return axis % size


def dtype_choice(op: str, attr: str, value, allowed: tuple[str, ...]) -> np.dtype:
    """``value`` as a numpy dtype if its name is one of ``allowed``; AttributeValueError if not."""
    dtype = np.dtype(value)
    if dtype.name not in allowed:
        raise AttributeValueError(f"{op}: attribute {attr!r} must be one of "
                                  f"{', '.join(allowed)}; got {dtype.name!r}")
    return dtype


def as_index(xp, indices):
    """Float or integer indices as int64, truncated toward zero as MXNet's C cast does."""
    return indices.astype(xp.int64, copy=False)
