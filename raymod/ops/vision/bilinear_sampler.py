"""BilinearSampler: sample NCHW data at the positions of a normalised grid."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._sampling import bilinear_sample, bilinear_sample_grad, corners


class BilinearSampler(Op):
    """Bilinear interpolation of ``data`` (N, C, H, W) at ``grid`` (N, 2, Ho, Wo).

    ``grid[n, 0]`` and ``grid[n, 1]`` are the source x and y of each output pixel, normalised
    so that -1 and 1 are the centres of the first and last pixel (MXNet's convention); the
    four neighbours of a source position are weighted bilinearly, and neighbours outside the
    image count as zeros. The output is (N, C, Ho, Wo). The hidden second output ``tmp``
    (N, Ho, Wo, 2) is the grid in channel-last order (cuDNN's layout, which MXNet keeps there).

    Attributes
    ----------
    cudnn_off : bool or None
        Accepted for MXNet compatibility; unused.

    Backward keeps ``data`` and ``grid``, and each output pixel's four source neighbours and
    their weights. The grid gradient is that of the piecewise-bilinear
    forward (one-sided at whole pixel positions, as MXNet's).
    """

    name = "BilinearSampler"
    params = {"cudnn_off": Param("bool", None, optional=True)}
    inputs = ("data", "grid")
    outputs = ("output", "tmp")
    retain_inputs = (0, 1)

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        data, grid = in_shapes
        if data is not None and len(data) != 4:
            raise ShapeError(f"data must be 4-D (batch, channel, y, x), got {data}")
        if grid is not None and (len(grid) != 4 or grid[1] not in (0, 2)):
            raise ShapeError(f"grid must be (batch, 2, y, x), got {grid}")
        if data is None or grid is None:
            return list(in_shapes), [None, None], []
        if data[0] and grid[0] and data[0] != grid[0]:
            raise ShapeError(f"data {data} and grid {grid} must have the same batch size")
        batch = data[0] or grid[0]
        out = (batch, data[1]) + tuple(grid[2:])
        return [(batch,) + tuple(data[1:]), (batch, 2) + tuple(grid[2:])], \
            [out, (batch,) + tuple(grid[2:]) + (2,)], []

    def forward(self, xp, inputs, aux, is_train):
        data, grid = inputs
        out, near = bilinear_sample(xp, data, grid)
        return [out, xp.moveaxis(grid, 1, -1)], (near if is_train else None)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        data, grid = inputs
        if saved is None:  # after an inference forward
            saved = corners(xp, grid, *data.shape[2:])
        return list(bilinear_sample_grad(xp, out_grads[0], data, grid.shape, saved,
                                         need_grad[0], need_grad[1]))
