"""Elementwise arithmetic on sparse values, shared by the tensor ops (not an op module).

The ops that keep a sparse input sparse compute on its stored values: a row_sparse array's
held rows (a block of ``(rows,) + shape[1:]``) or a csr array's stored entries (1-d). These
helpers read another operand (dense, row_sparse or csr) at those places, build results of the
same pattern, and combine two sparse operands on the union of their patterns. They never make
a dense array of an operand's full shape unless asked to (:func:`dense`).

A csr array here may have its column ids unsorted within a row (MXNet's test helpers make such
arrays); nothing below assumes they are sorted.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...array_view import plain
from ...sparse import CSRArray, RowSparseArray, is_sparse, stype_of

SPARSE = ("csr", "row_sparse")


def bare(x: Any) -> Any:
    """``x`` with plain numpy/CuPy parts: a sparse array wrapping NDArray views (the MXNet
    compatibility layer's) becomes a raymod array of the same parts, so that kernels compute
    on base arrays; anything else as :func:`raymod.array_view.plain` gives it."""
    if isinstance(x, CSRArray):
        if type(x) is CSRArray:
            return x
        return CSRArray(plain(x.data), plain(x.indices), plain(x.indptr), x.shape, check=False)
    if isinstance(x, RowSparseArray):
        if type(x) is RowSparseArray:
            return x
        return RowSparseArray(plain(x.data), plain(x.indices), x.shape, check=False)
    return plain(x)


def dense(x: Any) -> Any:
    """``x`` as a dense array (a sparse one densified)."""
    return bare(x).todense() if is_sparse(x) else x


def with_values(like: Any, values: Any) -> Any:
    """A sparse array of ``like``'s pattern (rows, or csr places) holding ``values``."""
    if isinstance(like, RowSparseArray):
        return RowSparseArray(values, like.indices, like.shape, check=False)
    return CSRArray(values, like.indices, like.indptr, like.shape, check=False)


def empty_like(x: Any) -> Any:
    """A sparse array of ``x``'s storage, shape and dtype that stores nothing."""
    xp = x.xp
    if isinstance(x, RowSparseArray):
        return RowSparseArray.empty(x.shape, x.dtype, xp)
    return CSRArray.empty(x.shape, x.dtype, xp)


def scale(g: Any, factor: float) -> Any:
    """``g * factor`` in ``g``'s own storage."""
    if is_sparse(g):
        g = bare(g)
        return with_values(g, g.data * factor)
    return g * factor


def rows_of(xp, x: RowSparseArray, rows: Any):
    """The rows ``rows`` of a row_sparse ``x`` as a dense block (zeros for rows it lacks)."""
    if x.indices.shape[0] == 0:
        return xp.zeros((rows.shape[0],) + tuple(x.shape[1:]), x.dtype)
    return x.take(rows)


def csr_keys(x: CSRArray):
    """One int64 key per stored entry: ``row * columns + column``."""
    return x.row_ids() * max(int(x.shape[1]), 1) + x.indices


def _lookup(xp, keys, values, wanted):
    """``values`` at the positions whose key is in ``wanted`` (0 where a key is absent)."""
    if keys.shape[0] == 0:
        return xp.zeros(wanted.shape, values.dtype)
    order = xp.argsort(keys)
    sorted_keys = keys[order]
    pos = xp.minimum(xp.searchsorted(sorted_keys, wanted), keys.shape[0] - 1)
    hit = sorted_keys[pos] == wanted
    found = values[order][pos]
    return xp.where(hit, found, xp.zeros((), values.dtype)).astype(values.dtype, copy=False)


def values_at(xp, src: Any, like: Any):
    """``src`` (dense, row_sparse or csr, of ``like``'s shape) read at the places ``like``
    stores: a block of rows for a row_sparse ``like``, one value per entry for a csr one."""
    src = bare(src)
    if isinstance(like, RowSparseArray):
        if isinstance(src, RowSparseArray):
            return rows_of(xp, src, like.indices)
        if isinstance(src, CSRArray):
            return src.take_rows(like.indices).todense()
        return src[like.indices]
    rows, cols = like.row_ids(), like.indices
    if isinstance(src, CSRArray):
        return _lookup(xp, csr_keys(src), src.data, rows * max(int(like.shape[1]), 1) + cols)
    if isinstance(src, RowSparseArray):
        if src.indices.shape[0] == 0:
            return xp.zeros(rows.shape, src.dtype)
        pos, held = src.positions(rows)
        found = src.data[pos, cols]
        if held is None:
            return found
        return xp.where(held, found, xp.zeros((), src.dtype)).astype(src.dtype, copy=False)
    return src[rows, cols]


def csr_from_keys(xp, keys, values, shape: tuple) -> CSRArray:
    """A csr array of ``shape`` holding ``values`` at the ascending unique ``keys``."""
    cols = max(int(shape[1]), 1)
    rows = keys // cols
    indptr = xp.zeros(int(shape[0]) + 1, np.int64)
    if keys.shape[0]:
        xp.cumsum(xp.bincount(rows, minlength=int(shape[0])), out=indptr[1:])
    return CSRArray(values, keys % cols, indptr, shape, check=False)


def union_apply(xp, a: Any, b: Any, fn: Callable) -> Any:
    """``fn(a, b)`` for two sparse arrays of one storage type, on the union of what they
    store (``fn(0, 0)`` must be 0): row_sparse for row_sparse operands, csr for csr ones."""
    a, b = bare(a), bare(b)
    if isinstance(a, RowSparseArray):
        rows = xp.unique(xp.concatenate([a.indices, b.indices])).astype(np.int64, copy=False)
        out = fn(rows_of(xp, a, rows), rows_of(xp, b, rows))
        return RowSparseArray(out.astype(a.dtype, copy=False), rows, a.shape, check=False)
    ka, kb = csr_keys(a), csr_keys(b)
    keys = xp.unique(xp.concatenate([ka, kb])).astype(np.int64, copy=False)
    out = fn(_lookup(xp, ka, a.data, keys), _lookup(xp, kb, b.data, keys))
    return csr_from_keys(xp, keys, out.astype(a.dtype, copy=False), a.shape)


def product(xp, p: Any, q: Any) -> Any:
    """``p * q`` elementwise, sparse where either operand is: the pattern of the sparse one
    (of ``p`` when both are), read from the other at those places."""
    p, q = bare(p), bare(q)
    if not is_sparse(p) and not is_sparse(q):
        return p * q
    if is_sparse(p) and is_sparse(q) and stype_of(p) != stype_of(q):
        # a csr entry's row in a row_sparse array: read the row_sparse one densely
        if isinstance(p, RowSparseArray):
            p = p.todense()
        else:
            q = q.todense()
    if not is_sparse(p):
        p, q = q, p
    return with_values(p, p.data * values_at(xp, q, p))


def special(xp):
    """scipy.special, or cupyx.scipy.special for CuPy arrays (gamma, gammaln, digamma)."""
    if xp is np:
        import scipy.special as sp
        return sp
    import cupyx.scipy.special as sp  # pragma: no cover - GPU only
    return sp  # pragma: no cover


def digamma(xp, x):
    """The digamma function, ``+inf`` at 0 and the negative integers (as MXNet's cephes
    ``psi``, where scipy gives ``-inf`` at 0 and NaN below)."""
    out = special(xp).digamma(x)
    poles = (x <= 0) & (x == xp.floor(x))
    return xp.where(poles, xp.asarray(np.inf, dtype=out.dtype), out)
