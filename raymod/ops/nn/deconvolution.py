"""Deconvolution (transposed convolution): the data gradient of Convolution, as GEMM + col2im."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ._channel_sums import channel_sums
from ._im2col import (CONV_PARAMS, batch_last, batch_major, channel_major, check_conv_attrs,
                      col2im, data_batch_channels, grouped, im2col, spatial_attr,
                      times_transposed)


_OWN_PARAMS = {"adj": Param("shape", (), doc="extra output length at the end"),
               "target_shape": Param("shape", (), doc="output spatial shape; overrides pad, adj"),
               "no_bias": Param("bool", True), "workspace": Param("int", 512)}
# MXNet's declaration order (positional arguments follow it): adj, target_shape after pad
_DECONV_PARAMS = {k: _OWN_PARAMS.get(k) or CONV_PARAMS[k]
                  for k in ("kernel", "stride", "dilate", "pad", "adj", "target_shape",
                            "num_filter", "num_group", "workspace", "no_bias", "cudnn_tune",
                            "cudnn_off", "layout")}


class Deconvolution(Op):
    """Transposed convolution of ``data`` (N, C, *spatial) with ``weight`` (C, F/G, *kernel).

    Each input pixel scatters ``data[n, c] * weight[c]`` into the output at stride ``stride``
    (dilated by ``dilate``); the result is cropped by ``pad`` on both sides, so this is exactly
    the gradient of a Convolution with the same kernel, stride, dilate, pad and groups. Output
    length per axis: ``s*(x-1) + d*(k-1) + 1 - 2p + adj``. With ``target_shape`` the output has
    that spatial shape and ``pad``/``adj`` are derived from it (``pad`` and ``adj`` ignored).

    Attributes
    ----------
    kernel, stride, dilate, pad, adj, target_shape : tuple of int
        One entry per spatial axis (1, 2 or 3 axes); ``adj`` must be smaller than ``stride``.
    num_filter, num_group : int
    no_bias : bool
        Default True (as in MXNet); with a bias the inputs are ``data, weight, bias``.
    workspace, cudnn_tune, cudnn_off : accepted for MXNet compatibility, unused.
    layout : str or None
        Only the channel-first layout is supported.

    Backward keeps ``data`` and ``weight``.
    """

    name = "Deconvolution"
    params = _DECONV_PARAMS
    inputs = ("data", "weight", "bias")
    retain_inputs = (0, 1)

    def check(self) -> None:
        check_conv_attrs(self)
        nd = len(self.kernel_)
        if self.num_filter % self.num_group:
            raise AttributeValueError(f"Deconvolution: num_filter={self.num_filter} must be a "
                                      f"multiple of num_group={self.num_group}")
        self.adj_ = spatial_attr(self.name, "adj", self.adj, nd, 0, 0)
        target = self.target_shape
        self.target_ = None
        if target and any(target):
            self.target_ = spatial_attr(self.name, "target_shape", target, nd, 0, 1)
        elif any(a >= s for a, s in zip(self.adj_, self.stride_)):
            raise AttributeValueError(f"Deconvolution: adj={self.adj_} must be smaller than "
                                      f"stride={self.stride_} on every axis")

    def list_arguments(self) -> list[str]:
        return ["data", "weight"] if self.no_bias else ["data", "weight", "bias"]

    def _geometry(self, spatial):
        """(pad, adj, output spatial shape) for input spatial shape ``spatial``."""
        full = [s * (x - 1) + d * (k - 1) + 1 if x else 0
                for x, k, s, d in zip(spatial, self.kernel_, self.stride_, self.dilate_)]
        if self.target_ is None:
            pad, adj = self.pad_, self.adj_
        else:
            if any(f and f < t for f, t in zip(full, self.target_)):
                raise ShapeError(f"target_shape={self.target_} is larger than the unpadded "
                                 f"output {tuple(full)} for input spatial shape {tuple(spatial)}")
            pad = tuple((f - t + 1) // 2 if f else 0 for f, t in zip(full, self.target_))
            adj = tuple((f - t) % 2 if f else 0 for f, t in zip(full, self.target_))
            if any(a >= s for a, s in zip(adj, self.stride_)):
                raise ShapeError(f"target_shape={self.target_} needs adj={adj}, which must be "
                                 f"smaller than stride={self.stride_}")
        out = self.target_ or tuple(f - 2 * p + a if f else 0 for f, p, a in zip(full, pad, adj))
        if any(f and o < 1 for f, o in zip(full, out)):
            raise ShapeError(f"pad={pad} leaves no output for input spatial shape "
                             f"{tuple(spatial)} (output would be {out})")
        return pad, adj, out

    def infer_shape(self, in_shapes, out_shapes):
        nd, g, f = len(self.kernel_), self.num_group, self.num_filter
        data, weight, out = in_shapes[0], in_shapes[1], out_shapes[0]
        batch, chans = data_batch_channels(self, data, out, (weight[0] if weight else 0))
        spatial = tuple(data[2:]) if data else (0,) * nd
        new_data = None if data is None and not batch and not chans else (batch, chans) + spatial
        shapes = [new_data, (chans, f // g) + self.kernel_] + ([] if self.no_bias else [(f,)])
        return shapes, [(batch, f) + self._geometry(spatial)[2]], []

    def forward(self, xp, inputs, aux, is_train):
        x, w = inputs[0], inputs[1]
        n, g = x.shape[0], self.num_group
        pad, _, out = self._geometry(x.shape[2:])
        last = batch_last(x.shape[2:])
        cols = xp.matmul(grouped(w, g).swapaxes(1, 2), channel_major(xp, x, g, last))
        grid = x.shape[2:] + (n,) if last else (n,) + x.shape[2:]
        cols = cols.reshape((self.num_filter,) + self.kernel_ + grid)
        y = col2im(xp, cols, (n, self.num_filter) + out, self.kernel_, self.stride_,
                   self.dilate_, pad, last)
        if not self.no_bias:
            y += inputs[2].reshape((1, -1) + (1,) * len(out))
        return [y], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, w, gy = inputs[0], inputs[1], out_grads[0]
        n, g = x.shape[0], self.num_group
        grads = [None] * len(inputs)
        if not self.no_bias and need_grad[2]:
            grads[2] = channel_sums(xp, 1, gy)
        if not (need_grad[0] or need_grad[1]):
            return grads
        pad = self._geometry(x.shape[2:])[0]
        last = batch_last(x.shape[2:])
        cols = im2col(xp, gy, x.shape[2:], self.kernel_, self.stride_, self.dilate_, pad, last)
        cols = cols.reshape(g, -1, x[:, 0].size)  # (G, F/G * prod(kernel), N * prod(spatial))
        if need_grad[0]:
            grads[0] = batch_major(xp, xp.matmul(grouped(w, g), cols), n, x.shape[2:], last)
        if need_grad[1]:
            xt = channel_major(xp, x, g, last)
            grads[1] = times_transposed(xp, xt, cols).reshape(w.shape)
        return grads
