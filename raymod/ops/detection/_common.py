"""Helpers shared by the detection ops: float-tuple attributes and batched greedy NMS."""
from __future__ import annotations

import ast
from typing import Any, Callable

from ...base import AttributeValueError

# MXNet keeps float attributes as C floats; values derived from them are rounded the same way
FLT_MAX = 3.4028234663852886e38


def c_exp(xp, x):
    """``exp`` correctly rounded, as C's ``expf`` gives it: through float64 for float32.

    numpy's float32 ``exp`` is off by an ulp in about a tenth of cases; MXNet's CPU ops call
    the C library, whose ``expf`` agreed with the rounded float64 result in every case tried.
    """
    return xp.exp(x.astype(xp.float64)).astype(x.dtype) if x.dtype.itemsize < 8 else xp.exp(x)


def c_log(xp, x):
    """``log`` correctly rounded (glibc's ``logf``, used by MXNet, is an ulp off at times)."""
    return xp.log(x.astype(xp.float64)).astype(x.dtype) if x.dtype.itemsize < 8 else xp.log(x)


def float_tuple(op: str, key: str, value: Any, length: int | None = None) -> tuple[float, ...]:
    """Parse an MXNet ``Tuple<float>`` attribute: ``(0.5, 1, 2)``, ``[1,2]``, ``2`` or a tuple."""
    try:
        if isinstance(value, str):
            value = ast.literal_eval(value.strip() or "()")
        if isinstance(value, (int, float)):
            value = (value,)
        out = tuple(float(v) for v in value)
    except (ValueError, TypeError, SyntaxError):
        raise AttributeValueError(f"{op}: attribute {key!r} must be a tuple of numbers, "
                                  f"got {value!r}") from None
    if length is not None and len(out) != length:
        raise AttributeValueError(f"{op}: attribute {key!r} needs {length} values, got "
                                  f"{len(out)}: {out}")
    return out


def greedy_nms(xp, candidates, suppresses: Callable, max_keep: int | None = None):
    """Greedy non-maximum suppression over rows of boxes already sorted by score.

    ``candidates`` is a (batch, n) boolean array of the positions taking part.
    ``suppresses(ref)`` gets, per batch row, the position of the box just kept and returns a
    (batch, n) boolean array of the positions that box suppresses. At most ``max_keep`` boxes
    are kept per row. Returns the (batch, n) boolean mask of kept positions.

    The loop runs once per kept box (every row advances together), each step one vectorised
    overlap row; the greedy order makes the steps inherently sequential.
    """
    alive = candidates.copy()
    kept = xp.zeros_like(alive)
    rows = xp.arange(alive.shape[0])
    steps = 0
    while max_keep is None or steps < max_keep:
        ref = alive.argmax(axis=1)  # first remaining candidate of each row
        found = alive[rows, ref]
        if not bool(found.any()):
            break
        kept[rows, ref] |= found
        alive[rows, ref] = False
        alive &= ~(suppresses(ref) & found[:, None])
        steps += 1
    return kept
