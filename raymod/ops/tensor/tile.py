"""tile: repeat the whole array along each axis."""
from __future__ import annotations

from ...base import AttributeValueError
from ..base import Op, Param


class Tile(Op):
    """``data`` repeated ``reps[i]`` times along axis ``i``, as ``numpy.tile``.

    When ``reps`` is shorter than ``data``'s rank it is padded with leading 1s; when longer,
    ``data`` gets leading axes of size 1. Each entry must be >= 1 (MXNet cannot infer a
    shape for 0 either). The gradient sums the head gradient over the copies. Backward
    keeps the input shape.
    """

    name = "tile"
    params = {"reps": Param("shape")}

    def check(self) -> None:
        if any(r < 1 for r in self.reps):
            raise AttributeValueError(f"tile: reps={self.reps} must be >= 1 everywhere")

    def _padded(self, shape: tuple) -> tuple[tuple, tuple]:
        n = max(len(shape), len(self.reps))
        return ((1,) * (n - len(shape)) + tuple(shape),
                (1,) * (n - len(self.reps)) + tuple(self.reps))

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [out_shapes[0]], []
        dims, reps = self._padded(data)
        return [data], [tuple(d * r for d, r in zip(dims, reps))], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [xp.tile(x, self.reps)], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        dims, reps = self._padded(saved)
        # the output axis of size r * d splits into (copy r, position d); sum over the copies
        split = tuple(v for pair in zip(reps, dims) for v in pair)
        g = out_grads[0].reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return [g.reshape(saved)]
