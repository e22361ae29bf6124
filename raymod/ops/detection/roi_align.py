"""_contrib_ROIAlign: bilinear sampling of regions of interest on a grid (Mask R-CNN)."""
from __future__ import annotations

import math

import numpy as np

from ...base import AttributeValueError, MXNetError, ShapeError
from ..base import Op, Param
from .roi_pooling import check_rois_shapes


class ROIAlign(Op):
    """Average of bilinearly sampled points in each of ``pooled_size`` bins of every roi.

    ``rois`` rows are ``[batch_index, x1, y1, x2, y2]``; corners are scaled by
    ``spatial_scale`` without rounding (and shifted by -0.5 with ``aligned``, Detectron2's
    pixel model). Without ``aligned`` a region is at least 1 x 1. Each bin is sampled on a
    ``sample_ratio`` x ``sample_ratio`` grid (``ceil(bin size)`` per axis when
    ``sample_ratio <= 0``); a point more than one cell outside the map counts as 0, one
    within is clamped to the border. With ``position_sensitive`` (R-FCN) bin ``(i, j)`` of
    output channel ``c`` reads input channel ``c * ph * pw + i * pw + j``, so the output has
    ``channels / (ph * pw)`` channels. A roi with a batch index outside the batch gives 0
    (MXNet documents 0 for negative indices but leaves most of the row unwritten).

    Backward spreads each output gradient over the four cells of every sample with the
    bilinear weights; it keeps ``rois`` and recomputes the samples. ``rois`` gets no
    gradient (MXNet writes zeros).

    Attributes
    ----------
    pooled_size : (int, int)
    spatial_scale : float
        In [0, 1].
    sample_ratio : int, default -1
    position_sensitive : bool, default False
    aligned : bool, default False
        Then every valid roi must have positive width and height (MXNet checks the same).
    """

    name = "_contrib_ROIAlign"
    params = {"pooled_size": Param("shape"), "spatial_scale": Param("float"),
              "sample_ratio": Param("int", -1), "position_sensitive": Param("bool", False),
              "aligned": Param("bool", False)}
    inputs = ("data", "rois")
    no_grad_inputs = ("rois",)
    retain_inputs = (1,)

    def check(self) -> None:
        if len(self.pooled_size) != 2 or min(self.pooled_size) < 1:
            raise AttributeValueError(f"{self.name}: pooled_size must be two positive ints "
                                      f"(h, w), got {self.pooled_size}")
        if not 0 <= self.spatial_scale <= 1:
            raise AttributeValueError(f"{self.name}: spatial_scale must be in [0, 1], got "
                                      f"{self.spatial_scale}")

    @property
    def _bins(self) -> int:
        """Input channels per output channel."""
        return math.prod(self.pooled_size) if self.position_sensitive else 1

    def infer_shape(self, in_shapes, out_shapes):
        data, rois = check_rois_shapes(*in_shapes)
        channels = 0
        if data is not None and data[1]:
            if data[1] % self._bins:
                raise ShapeError(f"position_sensitive needs data channels divisible by "
                                 f"{self.pooled_size[0]}*{self.pooled_size[1]}, got data "
                                 f"shape {data}")
            channels = data[1] // self._bins
        out = None
        if data is not None or rois is not None:
            out = ((rois or (0,))[0], channels) + tuple(self.pooled_size)
        return [data, rois], [out], []

    def _samples(self, xp, rois, shape, dtype):
        """(generator, count): the generator yields, per sample offset of a bin, the mask of
        samples taken and the four ``(row, weight)`` cells of each; count is per roi.

        Rows index the data laid out as (batch, bin, y, x) x channels; arrays are (r, ph, pw).
        """
        n, _, h, w = shape
        ph, pw = self.pooled_size
        dt = np.dtype(dtype).type
        scale = dt(np.float32(self.spatial_scale))
        shift = dt(0.5) if self.aligned else dt(0)
        batch = rois[:, 0].astype(xp.int64)
        valid = (batch >= 0) & (batch < n)
        # rois outside the batch are skipped; zero corners keep their arithmetic finite
        corners = xp.where(valid[:, None], rois[:, 1:5], dt(0))
        x1, y1, x2, y2 = (corners[:, k] * scale - shift for k in range(4))
        width, height = x2 - x1, y2 - y1
        if self.aligned:
            bad = valid & ((width <= 0) | (height <= 0))
            if bool(bad.any()):
                raise MXNetError(f"{self.name}: with aligned=True every roi needs a positive "
                                 f"width and height; roi {int(bad.argmax())} has none")
        else:
            width, height = xp.maximum(width, dt(1)), xp.maximum(height, dt(1))
        bin_h, bin_w = height / dt(ph), width / dt(pw)
        if self.sample_ratio > 0:
            grid_h = grid_w = xp.full(len(rois), self.sample_ratio, xp.int64)
        else:  # at least 1 for every valid roi
            grid_h = xp.maximum(xp.ceil(bin_h).astype(xp.int64), 1)
            grid_w = xp.maximum(xp.ceil(bin_w).astype(xp.int64), 1)
        count = (grid_h * grid_w).astype(dtype)
        # sample offsets past a roi's own grid (or any offset of an invalid roi) are skipped
        used_h, used_w = xp.where(valid, grid_h, 0), xp.where(valid, grid_w, 0)
        cell_base = xp.clip(batch, 0, n - 1)[:, None, None] * self._bins
        if self.position_sensitive:
            cell_base = cell_base + xp.arange(ph * pw).reshape(1, ph, pw)
        steps_h = int(used_h.max()) if len(rois) else 0
        steps_w = int(used_w.max()) if len(rois) else 0

        def axis(start, size, bins, step, grid, used, k):
            """Sample k of every bin on one axis: (outside, low, high, low/high weights)."""
            pos = (start[:, None] + xp.arange(bins, dtype=dtype)[None, :] * step[:, None]
                   + dt(k + 0.5) * step[:, None] / grid[:, None].astype(dtype))
            outside = (pos < -1) | (pos > size) | (k >= used)[:, None]
            pos = xp.maximum(pos, dt(0))
            low = pos.astype(xp.int64)
            top = low >= size - 1
            low = xp.where(top, size - 1, low)
            high = xp.where(top, size - 1, low + 1)
            frac = xp.where(top, dt(0), pos - low.astype(dtype))
            return outside, low, high, dt(1) - frac, frac

        def samples():
            for iy in range(steps_h):
                out_y, y_lo, y_hi, wy_lo, wy_hi = axis(y1, h, ph, bin_h, grid_h, used_h, iy)
                for ix in range(steps_w):
                    out_x, x_lo, x_hi, wx_lo, wx_hi = axis(x1, w, pw, bin_w, grid_w, used_w, ix)
                    inside = ~(out_y[:, :, None] | out_x[:, None, :])
                    cells = [((cell_base * h + yy[:, :, None]) * w + xx[:, None, :],
                              wy[:, :, None] * wx[:, None, :])
                             for yy, wy in ((y_lo, wy_lo), (y_hi, wy_hi))
                             for xx, wx in ((x_lo, wx_lo), (x_hi, wx_hi))]
                    yield inside, cells

        return samples(), count

    def forward(self, xp, inputs, aux, is_train):
        data, rois = inputs
        n, c, h, w = data.shape
        ph, pw = self.pooled_size
        out_c = c // self._bins
        # (batch, bin, y, x) rows of channels, so a sample reads contiguous channel vectors
        flat = data.reshape(n, out_c, self._bins, h, w).transpose(0, 2, 3, 4, 1)
        flat = flat.reshape(-1, out_c)
        samples, count = self._samples(xp, rois, data.shape, data.dtype)
        acc = xp.zeros((len(rois), ph, pw, out_c), data.dtype)
        # one step per sample offset (a few per bin), all rois and bins at once; samples are
        # added in MXNet's order, the four corners of a sample summed first
        for inside, cells in samples:
            term = None
            for row, weight in cells:
                part = weight[..., None] * xp.take(flat, row, axis=0)
                term = part if term is None else term + part
            acc += xp.where(inside[..., None], term, 0)
        out = acc / count[:, None, None, None]
        return [xp.ascontiguousarray(out.transpose(0, 3, 1, 2))], data.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None, None]
        rois = inputs[1]
        n, c, h, w = saved
        out_c = c // self._bins
        g = out_grads[0].transpose(0, 2, 3, 1)
        samples, count = self._samples(xp, rois, saved, g.dtype)
        grad = xp.zeros(n * self._bins * h * w * out_c, g.dtype)
        count = count[:, None, None, None]
        channel = xp.arange(out_c)
        for inside, cells in samples:
            for row, weight in cells:
                # skipped samples add zeros; a flat index scatters faster than rows of channels
                share = g * (weight * inside)[..., None] / count
                xp.add.at(grad, (row[..., None] * out_c + channel).ravel(), share.ravel())
        grad = grad.reshape(n, self._bins, h, w, out_c).transpose(0, 4, 1, 2, 3)
        return [xp.ascontiguousarray(grad.reshape(n, c, h, w)), None]
