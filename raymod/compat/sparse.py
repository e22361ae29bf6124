"""MXNet's sparse NDArrays over raymod's: :class:`CSRNDArray` and :class:`RowSparseNDArray`.

Each is a subclass of raymod's own array type (:class:`~raymod.sparse.CSRArray`,
:class:`~raymod.sparse.RowSparseArray`), so raymod's kernels take one wherever they take
those, and holds a raymod array of that type (``_base``) whose index and value arrays are its
own: nothing is copied to make one. Wrapping a holder an executor bound
(:func:`sparse_view`) gives user code an array whose ``x[:] = batch`` fills that holder.

MXNet's surface on top: ``.data`` / ``.indices`` / ``.indptr`` as NDArrays (views of the
held arrays), ``.context``, ``asnumpy``, ``asscipy``, ``tostype``, ``copyto``, ``astype``,
row slicing of csr arrays, whole assignment ``x[:] = y`` and the arithmetic MXNet defines on
sparse arrays, with the result storage MXNet gives (:func:`binary`).
"""
from __future__ import annotations

import functools
import numbers
import operator
from typing import Any

import numpy as np

from ..array_view import plain
from ..base import MXNetError
from ..context import Context, context_of
from ..sparse import CSRArray, RowSparseArray
from ..sparse._common import SparseBase, module_of
from ..sparse.row_sparse import sum_rows
from .ndarray import NDArray, _synchronize, _view

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "NotSupportedForSparseNDArray",
           "sparse_view", "unwrap", "binary", "is_sparse_nd", "STYPE_CLASS"]


class NotSupportedForSparseNDArray(MXNetError):
    """An NDArray method that MXNet does not define for sparse arrays (``reshape``, ``_at``)."""

    def __init__(self, function: Any, alias: Any = None, *args: Any):
        name = getattr(function, "__name__", str(function))
        super().__init__(f"Function {name}{f' (namely operator {alias!r})' if alias else ''} "
                         f"is not supported for a sparse NDArray")


# NDArray methods MXNet also gives sparse arrays: each runs the op of that name
# (``x.square()`` is ``mx.nd.square(x)``), with the op's storage rules
_FLUENT = frozenset("""
zeros_like ones_like broadcast_to broadcast_like broadcast_axes repeat pad swapaxes split slice
slice_axis slice_like take one_hot pick sort topk argsort argmax argmin clip abs sign flatten
expand_dims tile transpose flip sum nansum prod nanprod mean max min round rint fix floor ceil
trunc sin cos tan arcsin arccos arctan degrees radians sinh cosh tanh arcsinh arccosh arctanh
exp expm1 log log10 log2 log1p sqrt rsqrt cbrt rcbrt square reciprocal relu sigmoid softmax
log_softmax squeeze diag
""".split())


def _nd_module():
    from .mxnet import ndarray as nd  # the op functions; imported late (it imports this)
    return nd


def _as_view(array: Any, ctx: Context | None) -> NDArray:
    """``array`` (a plain numpy/CuPy array) as an NDArray sharing its memory."""
    out = _view(array)
    if ctx is not None and ctx != context_of(array):
        out._ctx = ctx
    return out


def _move(array: Any, ctx: Context) -> Any:
    """A copy of the plain array ``array`` on ``ctx``'s device."""
    xp = ctx.xp
    if xp is np:
        return np.array(array.get() if hasattr(array, "get") and
                        not isinstance(array, np.ndarray) else array, copy=True)
    with ctx.scope():
        return xp.array(array, copy=True)


class BaseSparseNDArray:
    """What :class:`CSRNDArray` and :class:`RowSparseNDArray` share (MXNet's base class).

    An instance holds a raymod sparse array in ``_base``; its properties read and write that
    array's parts, so every wrapper of one holder sees (and sets) the same contents.
    """

    _base: Any
    _ctx: Context | None
    # numpy operators defer to our reflected methods (dense * csr), and `==` keeps a hash
    __array_ufunc__ = None
    __array_priority__ = 1000.0
    __hash__ = object.__hash__
    _raymod_type: type = SparseBase

    def __raymod_plain__(self) -> Any:
        """The raymod array inside (what kernels compute on: see ``array_view.plain``)."""
        return self._base

    @classmethod
    def _of(cls, base: Any, ctx: Context | None = None) -> "BaseSparseNDArray":
        """A wrapper of the raymod array ``base`` (no copy; writes reach ``base``)."""
        out = object.__new__(cls)
        out.__dict__["_base"] = base
        out.__dict__["_ctx"] = ctx if ctx is not None and ctx != context_of(base.data) else None
        return out

    # --- what the holder is ------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._base.shape

    @shape.setter
    def shape(self, value: tuple) -> None:
        self._base.shape = tuple(int(d) for d in value)

    @property
    def dtype(self) -> np.dtype:
        return self._base.data.dtype

    @property
    def xp(self):
        return module_of(self._base.data)

    def _parts(self) -> tuple:
        return self._base._parts()

    @property
    def context(self) -> Context:
        """The device the array lives on (``cpu(i)`` as it was created or bound)."""
        return self._ctx or context_of(self._base.data)

    ctx = context

    @property
    def writable(self) -> bool:
        return True

    @property
    def _num_aux(self) -> int:
        """How many index arrays the storage has (csr: indptr and indices; row_sparse: one)."""
        return len(self._base._parts()) - 1

    @property
    def _aux_types(self) -> list:
        return [np.dtype(np.int64)] * self._num_aux

    def _data(self) -> NDArray:
        """A copy of the stored values."""
        return _as_view(self._base.data.copy(), self._ctx)

    def _aux_data(self, i: int) -> NDArray:
        """A copy of index array ``i`` in MXNet's order (csr: 0 indptr, 1 indices)."""
        return _as_view(self._aux_parts()[i].copy(), self._ctx)

    # --- conversion --------------------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        """A dense host copy as a plain ``numpy.ndarray``."""
        dense = self._base.todense()
        host = dense.get() if not isinstance(dense, np.ndarray) else dense
        return np.array(host, copy=True)

    def todense(self) -> NDArray:
        """A dense copy as an NDArray (MXNet's ``tostype('default')``)."""
        dense = self._base.todense()
        if any(dense is p for p in self._base._parts()):  # a full row_sparse array's rows
            dense = dense.copy()
        return _as_view(dense, self._ctx)

    def tostype(self, stype: str) -> Any:
        """A copy stored as ``stype`` (``'default'``, or this array's own storage).

        Raises
        ------
        ValueError
            Between csr and row_sparse, as MXNet (go through ``'default'``).
        """
        if stype == "default":
            return self.todense()
        if stype == self.stype:
            return self.copy()
        if stype in ("csr", "row_sparse"):
            raise ValueError(f"cast_storage from {self.stype} to {stype} is not supported")
        raise ValueError(f"tostype: unknown storage type {stype!r}")

    def copy(self) -> "BaseSparseNDArray":
        """A deep copy on the same context."""
        return type(self)._of(self._base.copy(), self._ctx)

    def astype(self, dtype: Any, copy: bool = True) -> "BaseSparseNDArray":
        """The array with values of ``dtype``: a new array, or itself when ``copy`` is False
        and it already has that dtype."""
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        out = self._base.copy()
        out.data = out.data.astype(dtype)
        return type(self)._of(out, self._ctx)

    def copyto(self, other: Any) -> Any:
        """Copy into ``other`` (a dense NDArray, or a sparse one of this storage; returned),
        or to a new array on ``other`` (a Context)."""
        if isinstance(other, Context):
            return self.as_in_context(other) if other != self.context else self.copy()
        if other is self:
            return other
        if isinstance(other, SparseBase):
            if other.stype != self.stype:
                raise TypeError(f"copyto does not support destination NDArray stype "
                                f"{other.stype} from {self.stype}")
            other[:] = self.copy()
            return other
        if hasattr(other, "shape") and hasattr(other, "dtype"):
            if tuple(other.shape) != self.shape:
                raise ValueError(f"copyto: shape {tuple(other.shape)} of the destination is "
                                 f"not {self.shape}")
            dense = self._base.todense()
            other[...] = dense.get() if isinstance(other, np.ndarray) and \
                not isinstance(dense, np.ndarray) else dense
            return other
        raise TypeError(f"copyto does not support type {type(other).__name__}")

    def as_in_context(self, context: Context) -> "BaseSparseNDArray":
        """The array itself when it is on ``context``, else a copy there."""
        if not isinstance(context, Context):
            raise TypeError(f"as_in_context: context must be a Context, got "
                            f"{type(context).__name__}")
        if context == self.context:
            return self
        parts = [_move(p, context) for p in self._base._parts()]
        return type(self)._of(self._rebuild(parts), context)

    def wait_to_read(self) -> None:
        """Nothing to wait for on numpy (CuPy: synchronise the device)."""
        _synchronize(self._base.data)

    wait_to_write = wait_to_read

    def check_format(self, full_check: bool = True) -> None:
        """Raise MXNetError when the index arrays do not form a valid array of this storage
        (``full_check`` is accepted; every check runs)."""
        try:
            self._base.check_format()
        except ValueError as err:
            raise MXNetError(f"check_format: {err}") from None

    # --- what MXNet leaves out for sparse arrays ---------------------------------------------
    def reshape(self, *shape: Any, **kwargs: Any):
        raise NotSupportedForSparseNDArray(self.reshape, None, shape)

    def _slice(self, start: Any, stop: Any):
        raise NotSupportedForSparseNDArray(self._slice, None, start, stop)

    def _at(self, idx: Any):
        raise NotSupportedForSparseNDArray(self._at, "[idx]", idx)

    def attach_grad(self, *args: Any, **kwargs: Any):
        from .errors import not_supported
        raise not_supported("attach_grad", "autograd (mx.autograd)")

    # --- ops as methods ----------------------------------------------------------------------
    @property
    def T(self) -> Any:
        """The transpose (a dense array, as MXNet's transpose of a sparse one)."""
        return _nd_module().transpose(self)

    def norm(self, *args: Any, **kwargs: Any) -> Any:
        """``mx.nd.norm`` of this array."""
        return _nd_module().norm(self, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _FLUENT:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return functools.partial(getattr(_nd_module(), name), self)

    # --- arithmetic, with MXNet's result storage (see binary) --------------------------------
    def __add__(self, other):
        return binary("add", self, other)

    def __radd__(self, other):
        return binary("add", other, self)

    def __sub__(self, other):
        return binary("sub", self, other)

    def __rsub__(self, other):
        return binary("sub", other, self)

    def __mul__(self, other):
        return binary("mul", self, other)

    def __rmul__(self, other):
        return binary("mul", other, self)

    def __truediv__(self, other):
        return binary("div", self, other)

    def __rtruediv__(self, other):
        return binary("div", other, self)

    __div__, __rdiv__ = __truediv__, __rtruediv__

    def __mod__(self, other):
        return binary("mod", self, other)

    def __rmod__(self, other):
        return binary("mod", other, self)

    def __pow__(self, other):
        return binary("pow", self, other)

    def __rpow__(self, other):
        return binary("pow", other, self)

    # `0 < x` reaches x.__gt__(0): the comparison reflected, which is the same question
    def __eq__(self, other):
        return binary("eq", self, other)

    def __ne__(self, other):
        return binary("ne", self, other)

    def __gt__(self, other):
        return binary("gt", self, other)

    def __ge__(self, other):
        return binary("ge", self, other)

    def __lt__(self, other):
        return binary("lt", self, other)

    def __le__(self, other):
        return binary("le", self, other)

    def __neg__(self):
        out = self._base.copy()
        out.data = -out.data
        return type(self)._of(out, self._ctx)

    def _assign_result(self, result: Any) -> "BaseSparseNDArray":
        self[:] = result
        return self

    def __iadd__(self, other):
        return self._assign_result(self + other)

    def __isub__(self, other):
        return self._assign_result(self - other)

    def __imul__(self, other):
        return self._assign_result(self * other)

    def __itruediv__(self, other):
        return self._assign_result(self / other)

    __idiv__ = __itruediv__

    def __bool__(self) -> bool:
        raise ValueError("the truth value of a sparse NDArray is ambiguous")

    def __repr__(self) -> str:
        return f"\n<{type(self).__name__} {'x'.join(map(str, self.shape))} @{self.context}>"

    # --- whole assignment ----------------------------------------------------------------------
    def _check_whole(self, key: Any) -> None:
        if key is Ellipsis:
            return
        if isinstance(key, slice):
            if key.start is None and key.stop is None and key.step is None:
                return
            raise ValueError(f"assignment with slice for {type(self).__name__} is not "
                             "implemented yet (only x[:] = value)")
        raise TypeError(f"{type(self).__name__} only supports [:] for assignment, got {key!r}")

    def _dense_source(self, value: Any) -> Any:
        """``value`` (dense NDArray, numpy/CuPy array, nested lists) as a dense array of this
        array's shape and device, for storing into it."""
        if isinstance(value, SparseBase):
            value = unwrap(value).todense()
        xp = self.xp
        if xp is np:
            dense = np.asarray(value.get() if hasattr(value, "get") and
                               not isinstance(value, np.ndarray) else value)
        else:
            dense = xp.asarray(value)
        dense = plain(dense)
        if tuple(dense.shape) != self.shape:
            dense = xp.broadcast_to(dense, self.shape)
        return dense.astype(self.dtype, copy=False)

    def _aux_parts(self) -> tuple:  # pragma: no cover - overridden
        raise NotImplementedError

    def _rebuild(self, parts: list) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class CSRNDArray(BaseSparseNDArray, CSRArray):
    """A 2-d array in compressed sparse row form, with MXNet's ``CSRNDArray`` methods.

    Row ``i`` holds ``data[indptr[i]:indptr[i+1]]`` at the columns
    ``indices[indptr[i]:indptr[i+1]]``. Create one with ``mx.nd.sparse.csr_matrix``,
    ``mx.nd.array(scipy_csr)`` or ``x.tostype('csr')``.

    Parameters
    ----------
    data, indices, indptr : array
        The stored values, their column ids, and the row offsets.
    shape : tuple of two ints
        The dense shape.
    check : bool, default True
        Validate the arrays (ValueError naming the one at fault).
    ctx : Context, optional
        The context reported (``cpu(1)``); the arrays' own device otherwise.

    Notes
    -----
    ``data``, ``indices`` and ``indptr`` are NDArray views of the held arrays (MXNet gives
    copies). ``x[:] = y`` replaces the contents (with a csr array, a dense array or a scipy
    matrix), ``x[i]`` and ``x[a:b]`` are row slices, as in MXNet.
    """

    stype = "csr"
    _raymod_type = CSRArray

    def __init__(self, data: Any, indices: Any, indptr: Any, shape: tuple, check: bool = True,
                 ctx: Context | None = None):
        base = CSRArray(plain(data), plain(indices), plain(indptr), shape, check=check)
        self.__dict__["_base"] = base
        self.__dict__["_ctx"] = ctx if ctx is not None and ctx != context_of(base.data) else None

    @property
    def data(self) -> NDArray:
        """The stored values (an NDArray view)."""
        return _as_view(self._base.data, self._ctx)

    @data.setter
    def data(self, value: Any) -> None:
        self._base.data = plain(value)

    @property
    def indices(self) -> NDArray:
        """The column id of each stored value (an int64 NDArray view)."""
        return _as_view(self._base.indices, self._ctx)

    @indices.setter
    def indices(self, value: Any) -> None:
        self._base.indices = plain(value)

    @property
    def indptr(self) -> NDArray:
        """Where each row starts in ``data`` (an int64 NDArray view, ``rows + 1`` long)."""
        return _as_view(self._base.indptr, self._ctx)

    @indptr.setter
    def indptr(self, value: Any) -> None:
        self._base.indptr = plain(value)

    @property
    def nnz(self) -> int:
        return self._base.nnz

    def _aux_parts(self) -> tuple:
        return (self._base.indptr, self._base.indices)

    def _rebuild(self, parts: list) -> CSRArray:
        return CSRArray(*parts, self.shape, check=False)

    def scipy(self):
        """The held arrays as a scipy (cupyx on GPU) csr_matrix, no copy."""
        return self._base.scipy()

    def asscipy(self):
        """A ``scipy.sparse.csr_matrix`` copy (on the host)."""
        from scipy.sparse import csr_matrix

        host = [p.get() if not isinstance(p, np.ndarray) else p for p in self._base._parts()]
        return csr_matrix(tuple(np.array(p, copy=True) for p in host), shape=self.shape,
                          dtype=self.dtype)

    def row_ids(self):
        return self._base.row_ids()

    def unique_columns(self):
        return self._base.unique_columns()

    def take_rows(self, rows: Any) -> "CSRNDArray":
        return CSRNDArray._of(self._base.take_rows(plain(rows)), self._ctx)

    def __getitem__(self, key: Any) -> "CSRNDArray":
        """Rows: ``x[i]`` (a 1-row csr array, as MXNet) or ``x[a:b]``; ``x[:]`` is ``x``."""
        if isinstance(key, (int, np.integer)):
            rows = self.shape[0]
            index = int(key) + rows if key < 0 else int(key)
            if not 0 <= index < rows:
                raise IndexError(f"row {int(key)} is out of range for {rows} rows")
            return CSRNDArray._of(self._base[index:index + 1].copy(), self._ctx)
        if isinstance(key, slice):
            if key.step is not None:
                raise ValueError("CSRNDArray only supports continuous slicing on axis 0")
            if key.start is None and key.stop is None:
                return self
            return CSRNDArray._of(self._base[key].copy(), self._ctx)
        if isinstance(key, tuple):
            raise ValueError("Multi-dimension indexing is not supported")
        raise ValueError(f"Undefined behaviour for {key!r}")

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[:] = value``: a csr array, a dense array (its non-zeros) or a scipy matrix.

        Raises
        ------
        ValueError
            For a Python scalar (as MXNet) or another key than ``[:]``.
        """
        self._check_whole(key)
        if value is self:
            return
        if isinstance(value, (numbers.Number, np.generic)):
            raise ValueError("Assigning numeric types to CSRNDArray is not implemented yet.")
        if isinstance(value, CSRArray):
            source = unwrap(value)
        elif hasattr(value, "tocsr"):
            source = CSRArray.from_scipy(value)
        else:
            source = CSRArray.from_dense(self._dense_source(value))
        if module_of(source.data) is not self.xp:
            source = CSRArray(*[_move(p, self.context) for p in source._parts()],
                              source.shape, check=False)
        self._base[:] = source

    def __reduce__(self):
        return (_rebuild_csr, (*self._base._parts(), self.shape, self._ctx))


class RowSparseNDArray(BaseSparseNDArray, RowSparseArray):
    """Some rows of an array, by row id, with MXNet's ``RowSparseNDArray`` methods.

    ``dense[indices[i]] = data[i]``; rows not held are zeros. Embedding tables and the
    gradients of ``Embedding(sparse_grad=True)`` and ``dot(csr, weight)`` are stored so.

    Parameters
    ----------
    data : array
        The held rows, shape ``(len(indices),) + shape[1:]``.
    indices : array of int
        Their row ids, ascending.
    shape : tuple of ints
        The dense shape.
    check : bool, default True
        Validate (ValueError naming the argument at fault).
    ctx : Context, optional
        The context reported; the arrays' own device otherwise.

    Notes
    -----
    ``x[:] = value`` takes a row_sparse array, a dense array (its non-zero rows) or a scalar
    (every row held, set to it; 0 holds none). ``x[:]`` is ``x`` itself.
    """

    stype = "row_sparse"
    _raymod_type = RowSparseArray

    def __init__(self, data: Any, indices: Any, shape: tuple, check: bool = True,
                 ctx: Context | None = None):
        base = RowSparseArray(plain(data), plain(indices), shape, check=check)
        self.__dict__["_base"] = base
        self.__dict__["_ctx"] = ctx if ctx is not None and ctx != context_of(base.data) else None

    @property
    def data(self) -> NDArray:
        """The held rows (an NDArray view)."""
        return _as_view(self._base.data, self._ctx)

    @data.setter
    def data(self, value: Any) -> None:
        self._base.data = plain(value)

    @property
    def indices(self) -> NDArray:
        """The ids of the held rows (an int64 NDArray view)."""
        return _as_view(self._base.indices, self._ctx)

    @indices.setter
    def indices(self, value: Any) -> None:
        self._base.indices = plain(value)

    def _aux_parts(self) -> tuple:
        return (self._base.indices,)

    def _rebuild(self, parts: list) -> RowSparseArray:
        return RowSparseArray(*parts, self.shape, check=False)

    @property
    def is_full(self) -> bool:
        return self._base.is_full

    def table(self):
        return self._base.table()

    def positions(self, row_ids: Any):
        return self._base.positions(plain(row_ids))

    def take(self, row_ids: Any):
        return self._base.take(plain(row_ids))

    def retain(self, indices: Any) -> "RowSparseNDArray":
        """Only the held rows whose ids are in ``indices`` (MXNet's ``sparse.retain``)."""
        if isinstance(indices, SparseBase):
            raise TypeError("retain: indices must be a dense array of row ids")
        return RowSparseNDArray._of(self._base.retain(plain(indices)).copy(), self._ctx)

    def __getitem__(self, key: Any) -> "RowSparseNDArray":
        """Only ``x[:]`` (the array itself), as MXNet."""
        if isinstance(key, slice):
            if key.start is None and key.stop is None and key.step is None:
                return self
            raise ValueError("RowSparseNDArray only supports [:] for __getitem__")
        if isinstance(key, tuple):
            raise ValueError("Multi-dimension indexing is not supported")
        raise ValueError(f"__getitem__ with {type(key).__name__} key is not implemented for "
                         "RowSparseNDArray")

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[:] = value``: a row_sparse array, a dense array, or a scalar."""
        self._check_whole(key)
        if value is self:
            return
        xp = self.xp
        if isinstance(value, (numbers.Number, np.generic)):
            if value == 0:
                source = RowSparseArray.empty(self.shape, self.dtype, xp)
            else:  # every row held, as MXNet's _set_value on a row_sparse array
                source = RowSparseArray.full(xp.full(self.shape, value, self.dtype))
        elif isinstance(value, RowSparseArray):
            source = unwrap(value)
            if module_of(source.data) is not xp:
                source = RowSparseArray(*[_move(p, self.context) for p in source._parts()],
                                        source.shape, check=False)
        else:
            source = RowSparseArray.from_dense(self._dense_source(value))
        self._base[:] = source

    def __reduce__(self):
        return (_rebuild_rsp, (*self._base._parts(), self.shape, self._ctx))


STYPE_CLASS = {"csr": CSRNDArray, "row_sparse": RowSparseNDArray}


def _rebuild_csr(data, indices, indptr, shape, ctx=None) -> CSRNDArray:
    return CSRNDArray._of(CSRArray(data, indices, indptr, shape, check=False), ctx)


def _rebuild_rsp(data, indices, shape, ctx=None) -> RowSparseNDArray:
    return RowSparseNDArray._of(RowSparseArray(data, indices, shape, check=False), ctx)


def is_sparse_nd(value: Any) -> bool:
    """Whether ``value`` is a raymod sparse array (wrapped or not)."""
    return isinstance(value, SparseBase)


def sparse_view(value: Any, ctx: Context | None = None) -> BaseSparseNDArray:
    """``value`` (a raymod CSRArray / RowSparseArray) as the matching NDArray class, holding
    the same object: its arrays are not copied, and ``view[:] = x`` fills ``value`` itself."""
    if isinstance(value, BaseSparseNDArray):
        return value
    return STYPE_CLASS[value.stype]._of(value, ctx)


def unwrap(value: Any) -> Any:
    """The plain raymod array of a sparse NDArray (what kernels compute on); anything else
    as it is."""
    return value.__dict__["_base"] if isinstance(value, BaseSparseNDArray) else value


# ---- arithmetic ----------------------------------------------------------------------------

_FUNCS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "div": operator.truediv, "mod": operator.mod, "pow": operator.pow,
          "eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge,
          "lt": operator.lt, "le": operator.le}
_LOGIC = ("eq", "ne", "gt", "ge", "lt", "le")


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (numbers.Number, np.generic))


def _context(*values: Any) -> Context | None:
    for v in values:
        if isinstance(v, BaseSparseNDArray) or hasattr(v, "_ctx"):
            ctx = getattr(v, "_ctx", None)
            if ctx is not None:
                return ctx
    return None


def _dense_of(value: Any, xp) -> Any:
    if isinstance(value, SparseBase):
        return unwrap(value).todense()
    if xp is np:
        return np.asarray(value.get() if hasattr(value, "get") and
                          not isinstance(value, np.ndarray) else value)
    return plain(xp.asarray(value))


def _scalar_keeps_storage(name: str, scalar: Any, sparse_left: bool) -> bool:
    """Whether ``sparse op scalar`` (``scalar op sparse`` if not ``sparse_left``) keeps the
    sparse storage in MXNet: ``*`` and ``/`` by a scalar always (only the stored values are
    computed), ``+``/``-`` of 0, a comparison that is false at 0; the rest are dense."""
    if name in ("mul",) or (name == "div" and sparse_left):
        return True
    if name in ("add", "sub") and sparse_left:
        return scalar == 0
    if name == "add":  # 0 + x: MXNet's _plus_scalar with 0
        return scalar == 0
    if name in _LOGIC:  # reflected comparisons arrive here already reflected
        with np.errstate(all="ignore"):
            return not bool(_FUNCS[name](0.0, scalar))
    return False


def binary(name: str, lhs: Any, rhs: Any, broadcast_lhs_dense: bool = True) -> Any:
    """``lhs <name> rhs`` where one side is a sparse NDArray, stored as MXNet stores it.

    Parameters
    ----------
    name : {'add', 'sub', 'mul', 'div', 'mod', 'pow', 'eq', 'ne', 'gt', 'ge', 'lt', 'le'}
    lhs, rhs : sparse NDArray, dense array or scalar
    broadcast_lhs_dense : bool, default True
        A dense ``lhs`` (``dense * csr``, which MXNet runs as its dense NDArray's broadcast
        op) gives a dense result. False: MXNet's ``sparse.multiply(dense, csr)`` rules.

    Returns
    -------
    NDArray, CSRNDArray or RowSparseNDArray
        With a scalar: sparse when MXNet's scalar op keeps the storage (``x * 2``, ``x / 2``,
        ``x + 0``, ``x > 0``), else dense. With two arrays of one shape: ``+``/``-``/``*`` of
        two csr (two row_sparse) arrays is csr (row_sparse); ``sparse * dense`` has the
        sparse operand's storage; the rest (``/``, ``**``, comparisons, mixed storage) is
        dense. With broadcasting, ``csr * dense`` and ``csr / dense`` stay csr when the result
        has the csr's shape; the rest is dense.
    """
    fn = _FUNCS[name]
    sparse = lhs if isinstance(lhs, BaseSparseNDArray) else rhs
    base = unwrap(sparse)
    xp, dtype, ctx = module_of(base.data), base.data.dtype, _context(lhs, rhs)
    if _is_scalar(lhs) or _is_scalar(rhs):
        sparse_left = sparse is lhs
        scalar = rhs if sparse_left else lhs
        if _scalar_keeps_storage(name, scalar, sparse_left):
            out = base.copy()
            with np.errstate(all="ignore"):
                values = fn(out.data, scalar) if sparse_left else fn(scalar, out.data)
            out.data = values.astype(dtype, copy=False)
            return sparse_view(out, ctx)
        return _dense_result(fn, lhs, rhs, xp, dtype, ctx)
    other = rhs if sparse is lhs else lhs
    if not hasattr(other, "shape"):  # nested lists: MXNet takes no such operand
        return NotImplemented
    same_shape = tuple(other.shape) == base.shape
    if isinstance(other, SparseBase):
        if same_shape and other.stype == sparse.stype and name in ("add", "sub", "mul"):
            a, b = unwrap(lhs), unwrap(rhs)
            combined = _csr_combine(name, a, b) if sparse.stype == "csr" else \
                _rsp_combine(name, a, b)
            combined.data = combined.data.astype(dtype, copy=False)
            return sparse_view(combined, ctx)
        return _dense_result(fn, lhs, rhs, xp, dtype, ctx)
    lhs_dense = sparse is rhs
    if name in ("mul", "div") and not (lhs_dense and broadcast_lhs_dense):
        target = _broadcast_shape(base.shape, tuple(other.shape))
        keeps = target == base.shape and (
            (same_shape and name == "mul") or (sparse.stype == "csr" and not lhs_dense))
        if keeps:
            dense = xp.broadcast_to(_dense_of(other, xp), base.shape)
            return sparse_view(_scale_stored(name, base, dense, lhs_dense, dtype), ctx)
    return _dense_result(fn, lhs, rhs, xp, dtype, ctx)


def _broadcast_shape(a: tuple, b: tuple) -> tuple | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def _dense_result(fn, lhs: Any, rhs: Any, xp, dtype: np.dtype, ctx: Context | None) -> NDArray:
    a = lhs if _is_scalar(lhs) else _dense_of(lhs, xp)
    b = rhs if _is_scalar(rhs) else _dense_of(rhs, xp)
    with np.errstate(all="ignore"):
        out = fn(a, b)
    out = xp.asarray(out)
    if out.dtype != dtype and (out.dtype == np.bool_ or out.dtype.kind == dtype.kind or
                               dtype.kind in "iu"):
        out = out.astype(dtype)  # MXNet keeps the input's dtype (1.0 / 0.0 for comparisons)
    return _as_view(plain(out), ctx)


def _csr_combine(name: str, a: CSRArray, b: CSRArray) -> CSRArray:
    left, right = a.scipy(), b.scipy()
    if name == "add":
        m = left + right
    elif name == "sub":
        m = left - right
    else:
        m = left.multiply(right)
    m = m.tocsr()
    if not m.has_sorted_indices:
        m = m.sorted_indices()
    xp = module_of(a.data)
    return CSRArray(xp.asarray(m.data), xp.asarray(m.indices).astype(np.int64),
                    xp.asarray(m.indptr).astype(np.int64), a.shape, check=False)


def _rsp_combine(name: str, a: RowSparseArray, b: RowSparseArray) -> RowSparseArray:
    xp = module_of(a.data)
    if name == "add":
        return sum_rows([a, b], a.shape).copy()
    if name == "sub":
        negated = RowSparseArray(-b.data, b.indices, b.shape, check=False)
        return sum_rows([a, negated], a.shape).copy()
    rows = xp.intersect1d(a.indices, b.indices)
    pa, _ = a.positions(rows)
    pb, _ = b.positions(rows)
    return RowSparseArray(a.data[pa] * b.data[pb], rows.astype(np.int64), a.shape, check=False)


def _scale_stored(name: str, base: Any, dense: Any, dense_left: bool, dtype) -> Any:
    """The stored values of ``base`` times (over) the matching entries of ``dense``."""
    out = base.copy()
    if isinstance(base, CSRArray):
        other = dense[base.row_ids(), base.indices]
    else:
        other = dense[base.indices]
    fn = _FUNCS[name]
    with np.errstate(all="ignore"):
        values = fn(other, out.data) if dense_left else fn(out.data, other)
    out.data = values.astype(dtype, copy=False)
    return out


def zero_preserving(fn: Any) -> bool:
    """Whether the one-input function ``fn`` maps 0 to 0 (it can run on stored values)."""
    try:
        with np.errstate(all="ignore"):
            return bool(np.asarray(fn(np.zeros(1, np.float64)))[0] == 0)
    except Exception:  # noqa: BLE001 - a function that takes no array: not elementwise
        return False


def apply_elementwise(fn: Any, value: BaseSparseNDArray, **kwargs: Any) -> Any:
    """``fn`` (a numpy ufunc of one input) on a sparse NDArray: on its stored values when
    ``fn(0) == 0`` (the result keeps the storage, as MXNet's sparse unary ops), else on a
    dense copy."""
    base = unwrap(value)
    xp = module_of(base.data)
    ufunc = getattr(xp, getattr(fn, "__name__", ""), fn)
    if zero_preserving(fn):
        out = base.copy()
        with np.errstate(all="ignore"):
            out.data = ufunc(out.data, **kwargs).astype(base.data.dtype, copy=False)
        return sparse_view(out, value._ctx)
    with np.errstate(all="ignore"):
        dense = ufunc(base.todense(), **kwargs)
    return _as_view(plain(xp.asarray(dense)), value._ctx)

