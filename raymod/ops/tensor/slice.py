"""slice (crop): a strided window of the leading axes, with Python's slicing rules."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ._axis import fill_unknown


class Slice(Op):
    """``data[begin[0]:end[0]:step[0], begin[1]:end[1]:step[1], ...]``.

    ``begin``, ``end`` and ``step`` cover the first ``len(begin)`` axes; later axes are kept
    whole. Entries follow Python slicing: ``None`` means the start or end of the axis in the
    direction of ``step``, negative values count from the end, out-of-range values are
    clipped, and a negative step walks backwards. ``step`` may be empty (all ones). A window
    that selects nothing is an error (MXNet would return an empty array). Backward keeps the
    input shape and scatters the gradient into zeros.
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

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [x[tuple(self.windows(x.shape))]], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        grad = xp.zeros(saved, g.dtype)
        grad[tuple(self.windows(saved))] = g
        return [grad]
