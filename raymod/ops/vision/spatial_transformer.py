"""SpatialTransformer: an affine sampling grid and bilinear sampling in one op."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._sampling import (affine_target_grid, bilinear_sample, bilinear_sample_grad,
                        check_target_shape, corners)


class SpatialTransformer(Op):
    """Warp ``data`` (N, C, H, W) by the affine matrices ``loc`` (N, 6) onto a target grid.

    The same as ``BilinearSampler(data, GridGenerator(loc, 'affine', target_shape))``:
    each output pixel of the (Ht, Wt) = ``target_shape`` map, at normalised coordinates
    ``(x, y)`` in [-1, 1], samples ``data`` bilinearly at ``loc.reshape(2, 3) @ (x, y, 1)``,
    with zeros outside the image. Hidden outputs: ``grid_dst`` (3, Ht*Wt), the target
    coordinates, and ``grid_src`` (N, 2, Ht*Wt), the source positions.

    Attributes
    ----------
    target_shape : tuple of int
        Output (H, W), each >= 2; required.
    transform_type : {'affine'}
    sampler_type : {'bilinear'}
    cudnn_off : bool or None
        Accepted for MXNet compatibility; unused.

    Backward keeps ``data``, ``grid_dst`` and ``grid_src``, and each target pixel's four
    source neighbours and their weights.
    """

    name = "SpatialTransformer"
    params = {"target_shape": Param("shape", (0, 0)),
              "transform_type": Param("str", choices=("affine",)),
              "sampler_type": Param("str", choices=("bilinear",)),
              "cudnn_off": Param("bool", None, optional=True)}
    inputs = ("data", "loc")
    outputs = ("output", "grid_dst", "grid_src")
    retain_inputs = (0,)
    retain_outputs = (1, 2)

    def check(self) -> None:
        self._target = check_target_shape(self.name, self.target_shape)

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        data, loc = in_shapes
        h, w = self._target
        if data is not None and len(data) != 4:
            raise ShapeError(f"data must be 4-D (batch, channel, y, x), got {data}")
        if loc is not None and (len(loc) != 2 or loc[1] not in (0, 6)):
            raise ShapeError(f"loc must be (batch, 6) affine matrices, got {loc}")
        if data is not None and loc is not None and data[0] and loc[0] and data[0] != loc[0]:
            raise ShapeError(f"data {data} and loc {loc} must have the same batch size")
        batch = (data[0] if data else 0) or (loc[0] if loc else 0)
        chans = data[1] if data else 0
        new_data = None if data is None else (batch,) + tuple(data[1:])
        return [new_data, (batch, 6)], [(batch, chans, h, w), (3, h * w), (batch, 2, h * w)], []

    def forward(self, xp, inputs, aux, is_train):
        data, loc = inputs
        h, w = self._target
        dst = affine_target_grid(xp, h, w, data.dtype)
        src = xp.matmul(loc.reshape(-1, 2, 3), dst)
        out, near = bilinear_sample(xp, data, src.reshape(-1, 2, h, w))
        return [out, dst, src], (near if is_train else None)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        data, (dst, src) = inputs[0], outputs[1:]
        h, w = self._target
        if saved is None:  # after an inference forward
            saved = corners(xp, src.reshape(-1, 2, h, w), *data.shape[2:])
        gdata, ggrid = bilinear_sample_grad(xp, out_grads[0], data, (len(src), 2, h, w),
                                            saved, need_grad[0], need_grad[1])
        gloc = None
        if need_grad[1]:
            n = data.shape[0]
            gloc = xp.matmul(ggrid.reshape(n, 2, h * w), dst.T).reshape(n, 6)
        return [gdata, gloc]
