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


def channel_sums(xp, axis: int, a, b=None, out=None, scale: float = 1.0):
    """Per-channel sums of ``a`` (or of ``a * b``) over every axis but ``axis``, times
    ``scale``, written into ``out`` (a vector) when it is given.

    Each (leading index, channel) row is summed by a BLAS product with a vector of ones, and
    the leading rows by another (``add.reduce`` or the ``sum`` method cost more in calls than
    in arithmetic at small maps), whose vector holds ``scale`` (a mean costs no extra pass);
    with the channels last, one matrix-vector product does it. ``a`` and ``b`` given as
    (lead, C, L) rows (BatchNorm's) are used as they are: at small maps the whole call is a
    few microseconds, and each reshape or helper call is a tenth of one.
    """
    shape = a.shape
    if axis == 1 and len(shape) == 3:
        rows3, (lead, chans, length) = True, shape
    else:
        rows3 = False
        lead, chans, length = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    if length == 1:  # the channels last
        terms = a if b is None else a * b
        return _into(out, xp.matmul(filled_vector(xp, lead, a.dtype, scale),
                                    terms.reshape(lead, chans), out=out))
    a3 = a if rows3 else a.reshape(lead, chans, length)
    if b is None:
        rows = a3 @ filled_vector(xp, length, a.dtype, 1.0)
    elif length < ROW_DOT_MIN:
        rows = xp.multiply(a3, b if rows3 and b.shape == shape else b.reshape(a3.shape))
        rows = rows @ filled_vector(xp, length, a.dtype, 1.0)
    else:
        rows = xp.matmul(a3[:, :, None, :], b.reshape(lead, chans, length, 1))
        rows = rows.reshape(lead, chans)
    if lead > 1:  # the leading rows' sum, scaled
        return _into(out, xp.matmul(filled_vector(xp, lead, rows.dtype, scale), rows,
                                    out=out))
    if out is None:
        out = rows[0]  # a product's own result, never an input
    else:
        out[...] = rows[0]
    if scale != 1.0:
        out *= scale
    return out


def _into(out, result):
    """``out`` when given (what ``matmul(..., out=out)`` wrote; the CuPy stand-in returns
    another wrapper of it), else ``result``."""
    return result if out is None else out


#: read-only numpy vectors by (length, dtype, value); a plain dict, since an ``lru_cache``
#: lookup and a ``np.dtype`` call each cost as much as a small map's product
_NUMPY_FILLED: dict = {}
_NUMPY_FILLED_MAX = 256


def ones_vector(xp, n: int, dtype):
    """A vector of ``n`` ones; numpy's are made once per length and dtype, read-only (sums
    as matrix-vector products: here, and global average pooling)."""
    return filled_vector(xp, n, dtype, 1.0)


def filled_vector(xp, n: int, dtype, value: float):
    """A vector of ``n`` entries ``value``, cached read-only for numpy (see ``ones_vector``)."""
    if xp is not np:
        return xp.full(n, value, dtype=dtype)
    key = (n, dtype, value)
    vector = _NUMPY_FILLED.get(key)
    if vector is None:
        if len(_NUMPY_FILLED) >= _NUMPY_FILLED_MAX:
            _NUMPY_FILLED.clear()
        vector = np.full(n, value, dtype=dtype)
        vector.flags.writeable = False
        _NUMPY_FILLED[key] = vector
    return vector
