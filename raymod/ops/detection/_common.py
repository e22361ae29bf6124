"""Helpers shared by the detection ops: C-rounded exp/log, float-tuple attributes, batched
greedy NMS."""
from __future__ import annotations

import ast
from typing import Any, Callable

from ...base import AttributeValueError

# the largest float32, C's FLT_MAX: where MXNet's ROIPooling starts each bin's maximum
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


def true_first(xp, mask):
    """Per row, the column order that puts ``mask``'s true entries first, both parts in order."""
    return xp.argsort((~mask).astype(xp.int8), axis=1, kind="stable")  # CuPy sorts no bools


def greedy_nms(xp, data, candidates, rule: Callable, groups=None, max_keep: int | None = None):
    """Greedy non-maximum suppression over rows of boxes already sorted by score.

    ``data`` (batch, n, k) holds what ``rule`` needs per box (corners, area, ...);
    ``candidates`` (batch, n) marks the boxes taking part. ``rule(xp, ref, data)`` gets the box
    just kept in every row (rows, k) and the boxes of those rows (rows, m, k) and returns
    which of them it suppresses (rows, m). With ``groups`` (batch, n), boxes only suppress
    boxes of their own group (class): each group then runs as a row of its own, which
    divides the work by about the number of groups. At most ``max_keep`` boxes are kept per
    row (only without groups). Returns the (batch, n) boolean mask of kept boxes.

    The loop runs once per kept box of the longest row (all rows advance together), each
    step one vectorised overlap row: the greedy order makes the steps sequential.
    """
    batch, n = candidates.shape
    used = xp.flatnonzero(candidates.any(axis=0))
    width = int(used[-1]) + 1 if used.size else 0  # columns past the last candidate never matter
    kept = xp.zeros((batch, n), bool)
    if width == 0:
        return kept
    data, candidates = data[:, :width], candidates[:, :width]
    if groups is None:
        kept[:, :width] = _greedy_rows(xp, data, candidates, rule, max_keep)
        return kept
    # one row per (image, group): candidates ordered by group, score order kept inside
    key = xp.where(candidates, groups[:, :width], xp.inf)
    order = xp.argsort(key, axis=1, kind="stable")
    key = xp.take_along_axis(key, order, axis=1)
    pos = xp.arange(width)
    starts = xp.concatenate([xp.ones((batch, 1), bool), key[:, 1:] != key[:, :-1]], axis=1)
    group = xp.cumsum(starts, axis=1) - 1
    first = xp.zeros((batch, width), xp.int64)  # column where each group starts
    b = xp.broadcast_to(xp.arange(batch)[:, None], order.shape)
    first[b[starts], group[starts]] = xp.broadcast_to(pos, starts.shape)[starts]
    within = pos - xp.take_along_axis(first, group, axis=1)
    real = xp.isfinite(key)
    rows, cols = int(group.max()) + 1, int(within[real].max()) + 1
    slot = xp.full((batch, rows, cols), -1, xp.int64)
    slot[b[real], group[real], within[real]] = order[real]
    slot = slot.reshape(batch * rows, cols)
    owner = xp.repeat(xp.arange(batch), rows)[:, None]
    row_kept = _greedy_rows(xp, data[owner, xp.maximum(slot, 0)], slot >= 0, rule, None)
    hit = row_kept & (slot >= 0)
    kept[xp.broadcast_to(owner, slot.shape)[hit], slot[hit]] = True
    return kept


def _greedy_rows(xp, data, alive, rule: Callable, max_keep: int | None):
    """The greedy loop of :func:`greedy_nms` on independent rows."""
    alive = alive.copy()
    kept = xp.zeros_like(alive)
    column = xp.broadcast_to(xp.arange(alive.shape[1]), alive.shape)  # original column
    rows = xp.arange(alive.shape[0])
    steps = 0
    while max_keep is None or steps < max_keep:
        ref = alive.argmax(axis=1)  # first remaining candidate of each row
        found = alive[rows, ref]
        if not bool(found.any()):
            break
        kept[rows, column[rows, ref]] |= found
        alive[rows, ref] = False
        # columns before the slowest row's box are settled in every row
        lo = int(xp.where(found, ref, alive.shape[1]).min())
        alive[:, lo:] &= ~(rule(xp, data[rows, ref], data[:, lo:]) & found[:, None])
        steps += 1
        remaining = int(alive.sum(axis=1).max())
        if remaining == 0:
            break
        if remaining <= alive.shape[1] // 2:
            # drop settled columns (keeping the order of the rest): later steps scan less
            order = true_first(xp, alive)[:, :remaining]
            alive = xp.take_along_axis(alive, order, axis=1)
            column = xp.take_along_axis(column, order, axis=1)
            data = xp.take_along_axis(data, order[..., None], axis=1)
    return kept
