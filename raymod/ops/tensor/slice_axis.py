"""slice_axis: a contiguous range of one axis."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._axis import fill_unknown, norm_axis


class SliceAxis(Op):
    """``data[..., begin:end, ...]`` along ``axis``; negative indices count from the end.

    ``end=None`` means the end of the axis. Unlike Python slicing, an empty or out-of-range
    range is an error, as in MXNet. Backward keeps only the input shape.
    """

    name = "slice_axis"
    params = {"axis": Param("int"), "begin": Param("int"), "end": Param("int", optional=True)}

    def bounds(self, size: int) -> tuple[int, int]:
        begin = self.begin + size if self.begin < 0 else self.begin
        end = size if self.end is None else self.end + size if self.end < 0 else self.end
        if not 0 <= begin < end <= size:
            raise ShapeError(f"begin={self.begin}, end={self.end} is not a non-empty range of "
                             f"an axis of size {size}")
        return begin, end

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None:
            return [None], [None], []
        ax = norm_axis(self.axis, len(data))
        if out is not None and len(out) == len(data):
            data = fill_unknown(data, out[:ax] + (data[ax],) + out[ax + 1:])
        if data[ax]:
            begin, end = self.bounds(data[ax])
            size = end - begin
        else:  # unknown axis length: the slice length is known only for non-negative bounds
            size = self.end - self.begin if self.end is not None and min(
                self.begin, self.end) >= 0 else 0
        return [data], [data[:ax] + (size,) + data[ax + 1:]], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        begin, end = self.bounds(x.shape[ax])
        return [x[(slice(None),) * ax + (slice(begin, end),)]], (x.shape, ax, begin, end)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        shape, ax, begin, end = saved
        g = out_grads[0]
        grad = xp.zeros(shape, g.dtype)
        grad[(slice(None),) * ax + (slice(begin, end),)] = g
        return [grad]
