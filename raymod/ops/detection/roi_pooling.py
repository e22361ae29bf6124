"""ROIPooling: max pooling of each region of interest into a fixed grid (Fast R-CNN)."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ._common import FLT_MAX


def round_half_away(xp, v):
    """``std::round``: halves go away from zero (numpy's ``round`` goes to even)."""
    a = xp.abs(v)
    down = xp.floor(a)
    return xp.copysign(down + (a - down >= 0.5), v)


def check_rois_shapes(data, rois) -> tuple:
    """Shared shape rule of ROIPooling/ROIAlign: data (n, c, h, w), rois (r, 5)."""
    if data is not None and len(data) != 4:
        raise ShapeError(f"data must be 4-D (batch, channel, height, width), got "
                         f"shape {tuple(data)}")
    if rois is not None and (len(rois) != 2 or rois[1] not in (0, 5)):
        raise ShapeError(f"rois must have shape (num_rois, 5) as [batch_index, x1, y1, "
                         f"x2, y2], got shape {tuple(rois)}")
    return tuple(data) if data is not None else None, (rois[0], 5) if rois else None


class ROIPooling(Op):
    """Max-pool each region of interest of a feature map into ``pooled_size`` bins.

    ``rois`` rows are ``[batch_index, x1, y1, x2, y2]`` in image coordinates. Corners are
    scaled by ``spatial_scale`` and rounded half away from zero; the region spans
    ``x2 - x1 + 1`` by ``y2 - y1 + 1`` cells (at least 1) and bin ``(i, j)`` covers rows
    ``floor(i * h / ph) .. ceil((i + 1) * h / ph)`` of it, clipped to the feature map. An
    empty bin, or a roi whose batch index is outside the batch, gives 0. Ties in a bin go to
    the first maximum in row-major order. Output: (num_rois, channels, ph, pw).

    Backward sends each output gradient to the input cell that won its bin (kept: the
    winners' positions). ``rois`` gets no gradient (MXNet writes zeros).

    Attributes
    ----------
    pooled_size : (int, int)
        Output height and width.
    spatial_scale : float
        Feature-map size over image size (1 / total stride), in [0, 1].
    """

    name = "ROIPooling"
    params = {"pooled_size": Param("shape"), "spatial_scale": Param("float")}
    inputs = ("data", "rois")
    no_grad_inputs = ("rois",)

    def check(self) -> None:
        if len(self.pooled_size) != 2 or min(self.pooled_size) < 1:
            raise AttributeValueError(f"ROIPooling: pooled_size must be two positive ints "
                                      f"(h, w), got {self.pooled_size}")
        if not 0 <= self.spatial_scale <= 1:
            raise AttributeValueError(f"ROIPooling: spatial_scale must be in [0, 1], got "
                                      f"{self.spatial_scale}")

    def infer_shape(self, in_shapes, out_shapes):
        data, rois = check_rois_shapes(*in_shapes)
        out = None
        if data is not None or rois is not None:
            out = ((rois or (0,))[0], (data or (0, 0))[1]) + tuple(self.pooled_size)
        return [data, rois], [out], []

    def forward(self, xp, inputs, aux, is_train):
        data, rois = inputs
        n, c, h, w = data.shape
        ph, pw = self.pooled_size
        dt = data.dtype.type
        # MXNet multiplies in the data type by the float32 attribute value
        corners = round_half_away(xp, rois[:, 1:5] * dt(np.float32(self.spatial_scale)))
        x1, y1, x2, y2 = (corners[:, k].astype(xp.int64) for k in range(4))
        batch = rois[:, 0].astype(xp.int64)  # truncation toward zero, as a C cast
        hstart, hend = self._bins(xp, y1, y2, ph, h, dt)
        wstart, wend = self._bins(xp, x1, x2, pw, w, dt)
        valid = ((hend[:, :, None] > hstart[:, :, None]) & (wend[:, None, :] > wstart[:, None, :])
                 & ((batch >= 0) & (batch < n))[:, None, None])
        flat = data.transpose(0, 2, 3, 1).reshape(n * h * w, c)  # one row per (b, y, x)
        row0 = xp.clip(batch, 0, n - 1)[:, None, None] * (h * w)
        best = xp.full((len(rois), ph, pw, c), -FLT_MAX, data.dtype)
        arg = xp.full(best.shape, -1, xp.int64)
        # one step per cell offset inside a bin (bins are a few cells wide), all rois at once
        span_h = int((hend - hstart).max()) if len(rois) else 0
        span_w = int((wend - wstart).max()) if len(rois) else 0
        for dy in range(span_h):
            y = hstart + dy
            for dx in range(span_w):
                x = wstart + dx
                inside = valid & (y < hend)[:, :, None] & (x < wend)[:, None, :]
                pos = (row0 + xp.minimum(y, h - 1)[:, :, None] * w
                       + xp.minimum(x, w - 1)[:, None, :])
                vals = xp.take(flat, pos, axis=0)
                better = (vals > best) & inside[..., None]  # strict: the first maximum wins
                best = xp.where(better, vals, best)
                arg = xp.where(better, pos[..., None], arg)
        best = xp.where(valid[..., None], best, dt(0))
        return [xp.ascontiguousarray(best.transpose(0, 3, 1, 2))], (arg, data.shape)

    @staticmethod
    def _bins(xp, lo, hi, bins, size, dt):
        """Per roi and bin, the [start, end) cells along one axis, clipped to [0, size]."""
        length = xp.maximum(hi - lo + 1, 1).astype(dt)
        step = length / dt(bins)
        k = xp.arange(bins, dtype=dt)
        start = xp.floor(k[None, :] * step[:, None]).astype(xp.int64) + lo[:, None]
        end = xp.ceil((k + 1)[None, :] * step[:, None]).astype(xp.int64) + lo[:, None]
        return xp.clip(start, 0, size), xp.clip(end, 0, size)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None, None]
        arg, (n, c, h, w) = saved
        g = out_grads[0].transpose(0, 2, 3, 1)
        won = arg >= 0
        target = arg * c + xp.arange(c)  # flat index into a (n*h*w, c) array
        grad = xp.zeros(n * h * w * c, g.dtype)
        xp.add.at(grad, target[won], g[won])
        return [xp.ascontiguousarray(grad.reshape(n, h, w, c).transpose(0, 3, 1, 2)), None]
