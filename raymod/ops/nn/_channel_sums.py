"""Per-channel sums as BLAS products (BatchNorm's statistics, depthwise weight gradients).

numpy's reduction over several axes walks the array with short strided runs; a matrix-vector
product with a vector of ones, or a batched dot product, runs in BLAS: 2-3x faster at small
maps, 1.5-3x at large ones, up to 9x with the channels last (measured, one thread, (2, 128,
4, 4) to (2, 64, 56, 56), and MobileNet's channels-last depthwise terms at batch 32).
"""
from __future__ import annotations

import math

import numpy as np


#: rows shorter than this multiply out, then sum as one matrix-vector product; longer ones
#: take a batched dot product each (its per-row cost is 2x the product's at (32, 64, 7, 7),
#: while at (2, 96, 28, 28) the product's extra pass is 1.4x the batched dots)
ROW_DOT_MIN = 400


def channel_sums(xp, axis: int, a, b=None, out=None):
    """Per-channel sums of ``a`` (or of ``a * b``) over every axis but ``axis``, written into
    ``out`` (a vector) when it is given.

    Each (leading index, channel) row is summed by a BLAS product with a vector of ones, and
    the leading rows by another (``add.reduce`` or the ``sum`` method cost more in calls than
    in arithmetic at small maps); with the channels last, one matrix-vector product does it.
    """
    shape = a.shape
    lead, chans = math.prod(shape[:axis]), shape[axis]
    if axis == len(shape) - 1:
        terms = a if b is None else a * b
        return _into(out, xp.matmul(ones_vector(xp, lead, a.dtype), terms.reshape(lead, chans),
                                    out=out))
    a3 = a.reshape(lead, chans, -1)
    length = a3.shape[2]
    if b is None:
        rows = a3 @ ones_vector(xp, length, a.dtype)
    elif length < ROW_DOT_MIN:
        rows = xp.multiply(a3, b.reshape(a3.shape)) @ ones_vector(xp, length, a.dtype)
    else:
        rows = xp.matmul(a3[:, :, None, :], b.reshape(lead, chans, length, 1))
        rows = rows.reshape(lead, chans)
    return _summed_rows(xp, rows, out)


def _summed_rows(xp, rows, out):
    """The sum of the rows of ``rows`` (lead, C), into ``out`` when it is given."""
    if rows.shape[0] > 1:
        return _into(out, xp.matmul(ones_vector(xp, rows.shape[0], rows.dtype), rows, out=out))
    if out is None:
        return rows[0]  # a product's own result (the channels-first paths), never an input
    out[...] = rows[0]
    return out


def _into(out, result):
    """``out`` when given (what ``matmul(..., out=out)`` wrote; the CuPy stand-in returns
    another wrapper of it), else ``result``."""
    return result if out is None else out


#: read-only numpy vectors of ones by (length, dtype); a plain dict, since an ``lru_cache``
#: lookup and a ``np.dtype`` call each cost as much as a small map's product
_NUMPY_ONES: dict = {}
_NUMPY_ONES_MAX = 256


def ones_vector(xp, n: int, dtype):
    """A vector of ``n`` ones; numpy's are made once per length and dtype, read-only (sums
    as matrix-vector products: here, and global average pooling)."""
    if xp is not np:
        return xp.ones(n, dtype=dtype)
    ones = _NUMPY_ONES.get((n, dtype))
    if ones is None:
        if len(_NUMPY_ONES) >= _NUMPY_ONES_MAX:
            _NUMPY_ONES.clear()
        ones = np.ones(n, dtype=dtype)
        ones.flags.writeable = False
        _NUMPY_ONES[(n, dtype)] = ones
    return ones
