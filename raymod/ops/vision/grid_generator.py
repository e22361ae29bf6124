"""GridGenerator: sampling grids for BilinearSampler from an affine matrix or a flow field."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._sampling import affine_target_grid, check_grid_axes, check_target_shape


class GridGenerator(Op):
    """A normalised sampling grid (N, 2, H, W) for :class:`BilinearSampler`.

    ``transform_type='affine'``: ``data`` (N, 6) is a 2x3 matrix per sample, row-major; the
    grid is that matrix applied to the normalised target coordinates ``(x, y, 1)`` of an
    (H, W) = ``target_shape`` output (x, y in [-1, 1], -1 and 1 at the first and last pixel).
    ``transform_type='warp'``: ``data`` (N, 2, H, W) is an optical flow in pixels (x first);
    the grid is ``(pixel + flow)`` normalised by ``(W - 1) / 2`` and ``(H - 1) / 2`` minus 1.
    The hidden second output ``grid_dst`` is the target grid: (3, H*W) normalised
    coordinates for affine, (2, H, W) pixel coordinates for warp.

    Attributes
    ----------
    transform_type : {'affine', 'warp'}
    target_shape : tuple of int, default (0, 0)
        Output (H, W), required (each >= 2) for affine; ignored for warp.

    Backward: affine keeps ``grid_dst`` (the data gradient is the head gradient times its
    transpose); warp keeps nothing (the head gradient divided by the normalisation).
    """

    name = "GridGenerator"
    params = {"transform_type": Param("str", choices=("affine", "warp")),
              "target_shape": Param("shape", (0, 0))}
    outputs = ("output", "grid_dst")

    def check(self) -> None:
        if self.transform_type == "affine":
            self._target = check_target_shape(self.name, self.target_shape)
            self.retain_outputs = (1,)

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if self.transform_type == "affine":
            h, w = self._target
            if data is not None and (len(data) != 2 or data[1] not in (0, 6)):
                raise ShapeError(f"data must be (batch, 6) affine matrices for "
                                 f"transform_type='affine', got {data}")
            batch = data[0] if data else (out_shapes[0][0] if out_shapes[0] else 0)
            return [(batch, 6)], [(batch, 2, h, w), (3, h * w)], []
        if data is None:
            data = out_shapes[0]
        if data is None:
            return [None], [None, None], []
        if len(data) != 4 or data[1] not in (0, 2):
            raise ShapeError(f"data must be a (batch, 2, y, x) flow for transform_type='warp', "
                             f"got {data}")
        check_grid_axes("data", data)
        return [data], [data, (2,) + tuple(data[2:])], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if self.transform_type == "affine":
            h, w = self._target
            dst = affine_target_grid(xp, h, w, x.dtype)
            out = xp.matmul(x.reshape(-1, 2, 3), dst).reshape(-1, 2, h, w)
            return [out, dst], None
        check_grid_axes("data", x.shape)
        h, w = x.shape[2:]
        dst = xp.stack([xp.broadcast_to(xp.arange(w, dtype=x.dtype)[None, :], (h, w)),
                        xp.broadcast_to(xp.arange(h, dtype=x.dtype)[:, None], (h, w))])
        half = self._half_sizes(xp, x)
        return [(x + dst) / half - 1, dst], None

    @staticmethod
    def _half_sizes(xp, x):
        h, w = x.shape[2:]
        return xp.asarray([(w - 1) / 2, (h - 1) / 2], dtype=x.dtype).reshape(1, 2, 1, 1)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        if self.transform_type == "affine":
            dst = outputs[1]
            n = g.shape[0]
            return [xp.matmul(g.reshape(n, 2, -1), dst.T).reshape(n, 6)]
        return [g / self._half_sizes(xp, g)]
