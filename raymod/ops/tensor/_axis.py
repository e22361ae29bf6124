"""Axis helpers shared by the tensor ops (not an op module)."""
from __future__ import annotations

from ...base import ShapeError


def norm_axis(axis: int, ndim: int, what: str = "axis", extra: int = 0) -> int:
    """``axis`` in ``[0, ndim + extra)``, counting negatives from the end; ShapeError otherwise."""
    size = ndim + extra
    if not -size <= axis < size:
        raise ShapeError(f"{what}={axis} is out of range for a {ndim}-d input")
    return axis % size


def fill_unknown(shape: tuple | None, other: tuple | None) -> tuple | None:
    """``shape`` with its unknown (0) dims taken from ``other`` of the same length."""
    if shape is None or other is None or len(shape) != len(other):
        return shape
    return tuple(a or b for a, b in zip(shape, other))
