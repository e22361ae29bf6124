"""slice (crop): a strided window of the leading axes, with Python's slicing rules."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ...sparse import CSRArray
from ..base import Op, Param
from ._axis import fill_unknown
from ._sparse_math import bare, dense


class Slice(Op):
    """``data[begin[0]:end[0]:step[0], begin[1]:end[1]:step[1], ...]``.

    ``begin``, ``end`` and ``step`` cover the first ``len(begin)`` axes; later axes are kept
    whole. Entries follow Python slicing: ``None`` means the start or end of the axis in the
    direction of ``step``, negative values count from the end, out-of-range values are
    clipped, and a negative step walks backwards. ``step`` may be empty (all ones). A window
    that selects nothing is an error (MXNet would return an empty array). Backward keeps the
    input shape and scatters the gradient into zeros.

    A csr input sliced with unit steps (``step`` empty or ``(1,)``, as MXNet) gives a csr
    result: its rows ``begin[0]:end[0]`` and, with two entries, its columns
    ``begin[1]:end[1]``; its gradient is dense. Other steps slice a dense copy.
    """

    name = "slice"
    aliases = ("crop",)
    params = {"begin": Param("shape"), "end": Param("shape"), "step": Param("shape", ())}

    def check(self) -> None:
        if len(self.begin) != len(self.end):
            raise AttributeValueError(f"slice: begin={self.begin} and end={self.end} must have "
                                      "the same length")
        if self.step and len(self.step) != len(self.begin):
            raise AttributeValueError(f"slice: step={self.step} must be empty or as long as "
                                      f"begin={self.begin}")
        if any(s == 0 for s in self.step):
            raise AttributeValueError(f"slice: step={self.step} has a 0 entry")

    def windows(self, shape: tuple) -> list:
        """One ``slice`` per axis of an input of ``shape`` (unknown sizes give ``None``)."""
        if len(self.begin) > len(shape):
            raise ShapeError(f"begin={self.begin} has more entries than data of shape "
                             f"{tuple(shape)} has axes")
        steps = self.step or (None,) * len(self.begin)
        out = [slice(b, e, s) for b, e, s in zip(self.begin, self.end, steps)]
        return out + [slice(None)] * (len(shape) - len(out))

    def out_shape(self, shape: tuple) -> tuple:
        out = []
        for i, (window, size) in enumerate(zip(self.windows(shape), shape)):
            length = len(range(*window.indices(size))) if size else 0
            if size and not length:
                raise ShapeError(f"begin={self.begin}, end={self.end}, step={self.step} "
                                 f"selects nothing from axis {i} of data of shape {tuple(shape)}")
            out.append(length)
        return tuple(out)

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None:
            return [None], [out], []
        n = len(self.begin)
        if out is not None and len(out) == len(data):  # the axes kept whole come back
            data = fill_unknown(data, tuple(data[:n]) + tuple(out[n:]))
        return [data], [self.out_shape(data)], []

    def takes_sparse(self, in_stypes):
        return in_stypes[0] == "csr" and self.step in ((), (None,), (1,))

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        return ["csr"], ["default"]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if isinstance(x, CSRArray):
            return [self._slice_csr(xp, bare(x))], x.shape
        return [x[tuple(self.windows(x.shape))]], x.shape

    def _slice_csr(self, xp, x: CSRArray) -> CSRArray:
        rows, cols = self.windows(x.shape)[:2]
        r0, r1, _ = rows.indices(x.shape[0])
        out = x[r0:max(r1, r0)]
        c0, c1, _ = cols.indices(x.shape[1])
        c1 = max(c1, c0)
        if (c0, c1) == (0, x.shape[1]):
            return out.copy()
        keep = (out.indices >= c0) & (out.indices < c1)
        # kept[k]: how many of the first k stored values are kept; the new row starts
        kept = xp.zeros(keep.shape[0] + 1, np.int64)
        if keep.shape[0]:
            xp.cumsum(keep.astype(np.int64), out=kept[1:])
        indptr = kept[out.indptr - out.indptr[0]]
        return CSRArray(out.data[keep], out.indices[keep] - c0, indptr,
                        (out.shape[0], c1 - c0), check=False)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = dense(out_grads[0])
        grad = xp.zeros(saved, g.dtype)
        grad[tuple(self.windows(saved))] = g
        return [grad]
