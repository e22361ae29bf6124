"""What both sparse array types share: their array module, dtype checks and refusals."""
from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np


def module_of(array: Any) -> types.ModuleType:
    """numpy or cupy, whichever ``array`` belongs to."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray):
        return cupy
    return np


def index_array(xp, values: Any, what: str):
    """``values`` as a 1-d int64 array, or ValueError naming ``what``."""
    out = xp.asarray(values)
    if out.ndim != 1:
        raise ValueError(f"{what} must be 1-d, got shape {tuple(out.shape)}")
    if out.dtype.kind not in "iu":
        if out.size and out.dtype.kind == "f" and bool((out != xp.floor(out)).any()):
            raise ValueError(f"{what} must hold integers, got {out.dtype} values with fractions")
        if out.dtype.kind not in "fb" and out.size:
            raise ValueError(f"{what} must hold integers, got dtype {out.dtype}")
    return out.astype(np.int64, copy=False)


class SparseBase:
    """Methods common to :class:`CSRArray` and :class:`RowSparseArray`."""

    stype = "default"
    __slots__ = ()
    # numpy operators with a sparse operand defer to its reflected methods (dense + rsp)
    # instead of converting it through __array__, which refuses
    __array_ufunc__ = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def _parts(self) -> tuple:
        """The arrays that make up the array (values first)."""
        return tuple(getattr(self, name) for name in self._part_names)

    @property
    def nbytes(self) -> int:
        """Bytes held: the stored values and their index arrays."""
        return sum(int(a.nbytes) for a in self._parts())

    @property
    def xp(self) -> types.ModuleType:
        return module_of(self.data)

    def __array__(self, dtype=None, copy=None):
        # a dense copy of an Avazu batch is 32 GB: never made by accident
        raise TypeError(f"a {self.stype} array of shape {self.shape} does not convert to a "
                        "dense array implicitly; call .todense() (or cast_storage) to ask for one")

    def __len__(self) -> int:
        return self.shape[0]

    def astype(self, dtype: Any, copy: bool = True):
        """The same array with its values as ``dtype`` (itself when already so and
        ``copy`` is False); the caller's array is never changed."""
        if not copy and self.data.dtype == dtype:
            return self
        out = self.copy()
        out.data = out.data.astype(dtype, copy=False)
        return out

    def on_host(self, copy: bool = False):
        """The same array with host (numpy) parts: itself when they are already there and
        ``copy`` is False."""
        if self.xp is np and not copy:
            return self
        out = self.copy()
        for name in self._part_names:
            part = getattr(out, name)
            setattr(out, name, part.get() if hasattr(part, "get") else np.asarray(part))
        return out

    def asnumpy(self) -> np.ndarray:
        """A dense host copy (MXNet's name)."""
        dense = self.todense()
        return dense.get() if hasattr(dense, "get") else dense

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.shape[0]}x{'x'.join(map(str, self.shape[1:]))} "
                f"{self.dtype} nnz={self.data.size}>")
