"""Constant padding for the kernels: one fill and one slice copy.

``xp.pad`` goes through a general Python path (every mode, per-axis pad areas) that costs
about 30-40 microseconds a call whatever the size (measured, numpy, batch-2 conv inputs),
more than the copy itself at the small maps of MXNet's example networks.
"""
from __future__ import annotations


def constant_pad(xp, x, widths, value=0):
    """``x`` padded with ``value``: ``widths`` is one ``(before, after)`` pair per axis, as
    for ``xp.pad(x, widths, constant_values=value)``; a new array even without padding."""
    widths = [tuple(w) for w in widths]
    if len(widths) != x.ndim or any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"constant_pad: widths must be {x.ndim} non-negative (before, after) "
                         f"pairs for shape {tuple(x.shape)}, got {widths}")
    shape = tuple(d + b + a for d, (b, a) in zip(x.shape, widths))
    out = xp.zeros(shape, dtype=x.dtype) if value == 0 else xp.full(shape, value, dtype=x.dtype)
    out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, widths))] = x
    return out
