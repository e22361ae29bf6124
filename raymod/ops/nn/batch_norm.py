"""BatchNorm: normalise each channel by batch statistics (training) or moving ones."""
from __future__ import annotations

import math

import numpy as np

from ...base import ShapeError
from .. import _batch_parts
from ..base import Op, Param, merge_shape
from ._channel_sums import channel_sums

#: numpy data from this many values takes its per-channel operands repeated over each
#: sample's positions: a broadcast along short rows pays per row (a product takes 0.52-0.66x
#: the time at (16-32, 64-512, 56x56-7x7), 0.86x at (2, 96-256, 28x28-14x14); 1.36x at
#: (2, 64, 7, 7), which keeps the broadcast)
REPEAT_MIN_SIZE = 1 << 15


def _per_channel(xp, v, rows):
    """``v``, one value per channel, shaped to broadcast against ``rows`` (lead, C, L), or
    repeated over a row's L positions (see ``REPEAT_MIN_SIZE``)."""
    length = rows.shape[2]
    if xp is np and length > 1 and rows.size >= REPEAT_MIN_SIZE:
        return np.repeat(v, length).reshape(-1, length)
    return v[:, None]


def _cuts(xp, rows) -> list | None:
    """Parts of the leading axis of ``rows`` (lead, C, L) over which the elementwise passes
    run at once on threads (see :mod:`.._batch_parts`), or None for one pass over all. The
    per-channel sums stay whole: each value is computed as without parts, to the bit."""
    return _batch_parts.cuts(rows.shape[0], rows.size) if xp is np else None


def _centred(xp, rows, mean, cuts):
    """``rows - mean`` per channel, into a new array."""
    out = xp.empty_like(rows)
    per = _per_channel(xp, mean, rows)
    _batch_parts.each(cuts, lambda s: xp.subtract(rows[s], per, out=out[s]))
    return out


class BatchNorm(Op):
    """Batch normalisation over every axis but ``axis`` (the channel axis, default 1).

    ``output = gamma * (data - mean) / sqrt(var + eps) + beta`` per channel. In training
    (``forward(is_train=True)`` without ``use_global_stats``) mean and the biased variance come
    from the batch, and the auxiliary states are updated in place:
    ``moving = moving * momentum + batch * (1 - momentum)``. Otherwise the moving statistics
    are used and, in backward, treated as constants.

    ``fix_gamma=True`` uses gamma = 1 and gives gamma a zero gradient (MXNet also overwrites
    the gamma array with ones; raymod leaves inputs untouched). With ``output_mean_var`` the
    op shows three outputs: output, the mean used, and, as in MXNet, the *inverse standard
    deviation* ``1 / sqrt(var + eps)`` under the name ``var``. float16 data keeps float32
    parameters and statistics. ``cudnn_off`` and the calibration ranges are accepted and ignored.

    Backward keeps the centred data ``data - mean`` in place of ``data`` (the same memory,
    and two passes fewer than centring it again), ``gamma`` (unless ``fix_gamma``), the
    inverse standard deviation, and whether the statistics were the batch's: after an
    inference forward they are the moving statistics, which the gradient treats as constants.
    """

    name = "BatchNorm"
    params = {"eps": Param("float", 1e-3), "momentum": Param("float", 0.9),
              "fix_gamma": Param("bool", True), "use_global_stats": Param("bool", False),
              "output_mean_var": Param("bool", False), "axis": Param("int", 1),
              "cudnn_off": Param("bool", False),
              "min_calib_range": Param("float", None, optional=True),
              "max_calib_range": Param("float", None, optional=True)}
    inputs = ("data", "gamma", "beta")
    outputs = ("output", "mean", "var")
    aux = ("moving_mean", "moving_var")

    def check(self) -> None:
        # backward reads the centred data it saved, not the input: gamma is all it keeps
        self.retain_inputs = () if self.fix_gamma else (1,)
        self._row_shapes: dict[tuple, tuple] = {}  # see _rows

    def num_visible_outputs(self) -> int:
        return 3 if self.output_mean_var else 1

    def auto_input_attrs(self) -> dict[str, dict[str, str]]:
        """Initializers MXNet puts on the auto-created moving statistics."""
        return {"moving_mean": {"__init__": '["zero", {}]'},
                "moving_var": {"__init__": '["one", {}]'}}

    def _axis(self, ndim: int) -> int:
        if not -ndim <= self.axis < ndim:
            raise ShapeError(f"axis={self.axis} is out of range for data with {ndim} dims")
        return self.axis % ndim

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        channel = None
        for s in list(in_shapes[1:]) + list(out_shapes[1:]):
            channel = merge_shape(channel, s, "gamma, beta, mean and var must share a shape")
        if data is not None:
            axis = self._axis(len(data))
            channel = merge_shape(channel, (data[axis],),
                                  f"gamma/beta must have shape (C,) for data {data} on axis "
                                  f"{axis}")
            data = data[:axis] + channel + data[axis + 1:]
        return [data, channel, channel], [data, channel, channel], [channel, channel]

    def infer_type(self, in_types, out_types):
        data = in_types[0] or out_types[0]
        if data is None:
            return list(in_types), list(out_types), [None, None]
        param = np.dtype("float32") if data == np.float16 else data
        return [data, param, param], [data, param, param], [param, param]

    def _rows(self, shape: tuple) -> tuple:
        """``(lead, C, L)``: data of ``shape`` seen as rows, one per leading index and channel,
        each the L positions after the channel axis; kept per shape (a small map's whole op
        takes 20-40 microseconds, and every call saved is one less reshape or broadcast)."""
        rows = self._row_shapes.get(shape)
        if rows is None:
            axis = self._axis(len(shape))
            rows = self._row_shapes[shape] = (math.prod(shape[:axis]), shape[axis],
                                              math.prod(shape[axis + 1:]))
        return rows

    def forward(self, xp, inputs, aux, is_train):
        x, gamma, beta = inputs
        moving_mean, moving_var = aux
        xc = x if x.dtype == gamma.dtype else x.astype(gamma.dtype)  # float16: in float32
        rows = xc.reshape(self._rows(x.shape))
        cuts = _cuts(xp, rows)
        batch_stats = is_train and not self.use_global_stats
        if batch_stats:
            # sums as BLAS products, the mean's 1/n folded into them: numpy's mean() and
            # var() re-derive the axes and pass over the data more often
            inv_n = 1.0 / (rows.shape[0] * rows.shape[2])
            mean = channel_sums(xp, 1, rows, scale=inv_n)
            centred = _centred(xp, rows, mean, cuts)
            var = channel_sums(xp, 1, centred, centred, scale=inv_n)
            m = self.momentum
            moving_mean *= m
            moving_mean += (1 - m) * mean
            moving_var *= m
            moving_var += (1 - m) * var
        else:
            mean, var = moving_mean.copy(), moving_var
            centred = _centred(xp, rows, mean, cuts)
        inv_std = var + self.eps
        xp.sqrt(inv_std, out=inv_std)
        xp.reciprocal(inv_std, out=inv_std)
        scale = _per_channel(xp, inv_std if self.fix_gamma else gamma * inv_std, rows)
        shift = _per_channel(xp, beta, rows)
        y = xp.empty_like(centred)

        def normalised(s):
            xp.multiply(centred[s], scale, out=y[s])
            y[s] += shift

        _batch_parts.each(cuts, normalised)
        y = y.reshape(x.shape) if y.dtype == x.dtype else y.astype(x.dtype).reshape(x.shape)
        # backward reads the centred data (as rows), which takes the input's place in memory
        return [y, mean, inv_std], (centred, inv_std, batch_stats)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        gamma = inputs[1]
        centred, inv_std, used_batch_stats = saved
        g = out_grads[0].reshape(centred.shape)
        if g.dtype != centred.dtype:
            g = g.astype(centred.dtype)
        # after an inference forward the statistics were the moving ones: constants
        batch_stats = need_grad[0] and used_batch_stats
        want_gamma = need_grad[1] and not self.fix_gamma
        ggamma = gbeta = None
        if want_gamma or batch_stats:  # sum(g * xhat) with xhat = centred * inv_std
            ggamma = channel_sums(xp, 1, g, centred)
            ggamma *= inv_std
        if need_grad[2] or batch_stats:
            gbeta = channel_sums(xp, 1, g)
        gx = None
        if need_grad[0]:
            scale = _per_channel(xp, inv_std if self.fix_gamma else gamma * inv_std, g)
            gx = xp.empty_like(g)
            if batch_stats:  # (g - mean(g) - xhat * mean(g * xhat)) * scale, in place
                inv_n = 1.0 / (centred.shape[0] * centred.shape[2])
                per_xhat = _per_channel(xp, ggamma * inv_std * inv_n, g)
                per_g = _per_channel(xp, gbeta * inv_n, g)

                def part(s):
                    xp.multiply(centred[s], per_xhat, out=gx[s])
                    gx[s] += per_g
                    xp.subtract(g[s], gx[s], out=gx[s])
                    gx[s] *= scale
            else:  # moving statistics are constants
                def part(s):
                    xp.multiply(g[s], scale, out=gx[s])
            _batch_parts.each(_cuts(xp, g), part)
            if gx.dtype != out_grads[0].dtype:
                gx = gx.astype(out_grads[0].dtype)
            gx = gx.reshape(out_grads[0].shape)
        if need_grad[1] and self.fix_gamma:
            ggamma = xp.zeros_like(inv_std)
        return [gx, ggamma if need_grad[1] else None, gbeta if need_grad[2] else None]
