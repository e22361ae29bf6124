"""Convolution: 1-D, 2-D or 3-D, strided, padded, dilated and grouped, as im2col + GEMM."""
from __future__ import annotations

import math
import os
from typing import NamedTuple

import numpy as np

from ...base import AttributeValueError
from ..base import Op
from ._channel_sums import channel_sums
from ._im2col import (CONV_PARAMS, batch_last, batch_major, blocked_forward,
                      blocked_weight_grad, channel_major, check_conv_attrs, col2im, cols_size,
                      conv_out_size, data_batch_channels, data_grad_as_conv, flipped_transpose,
                      grouped, im2col, swaps_product, times_transposed, transposed_pad)
from .. import _batch_parts
from . import (_depthwise, _depthwise_dense, _depthwise_numba, _depthwise_rows, _im2col,
               _shifted, _shifted_blocks, _skinny_gemm, _winograd)

# Depthwise layers with fewer output positions (batch times map) use the grouped GEMM.
DEPTHWISE_MIN_POSITIONS = 1024
# Stride-1 depthwise numpy layers padded to keep their size run over columns read whole maps
# at a time (see _depthwise_rows) on maps at least this wide, up to this many column
# elements. Measured inside MobileNet (one thread, numpy; a layer alone flatters the column
# routes, whose buffers stay hot): at batch 2 (92K-166K column elements, 8x8 to 32x32 maps)
# forward + backward 0.76-0.82x the grouped route's time (4x4 maps: even, alone); at batch
# 32 (1.5M-2.7M) 0.97-1.25x the per-offset route's.
DEPTHWISE_ROWS_MIN_WIDTH = 8
DEPTHWISE_ROWS_MAX_COLS = 1 << 18
# Winograd pays for its transforms only when there are enough tiles per GEMM and channels
# per tile (measured with numpy on one thread: at 2x2 tiles of a batch-2 4x4 map it is 5x
# slower than im2col, at 16x16 maps with 64+ channels about 1.5x faster).
WINOGRAD_MIN_TILES = 64
WINOGRAD_MIN_CHANNELS = 16
# With Winograd in backward only, forward keeps im2col's columns for the weight gradient and
# the gradients must build the input transform themselves: that pays from larger layers
# (measured, numpy, one thread, at load 7-10 so +-20%: forward + backward 0.73x im2col's at
# 841 tiles of 256 channels and at 13225 tiles of 64, 0.92-0.99x at 392 tiles of 64-128,
# 1.05x at 98 tiles, 1.27x at 10952 tiles of 32 channels).
WINOGRAD_BACKWARD_MIN_TILES = 512
WINOGRAD_BACKWARD_MIN_CHANNELS = 64
# With this many channels and filters the products outweigh the transforms from fewer
# tiles: 0.80-0.85x at 196-225 tiles of 256-512 channels (VGG-16's conv4 at 28x28),
# 0.87-0.90x at 121-128, 0.96x at 98 of 256, 1.07x at 64 of 512 (forward + backward, numpy,
# one thread, load 1-2).
WINOGRAD_BACKWARD_WIDE_CHANNELS = 256
WINOGRAD_BACKWARD_WIDE_MIN_TILES = 120
# Where Winograd runs: "backward" (the default) for both gradients only, "1" for forward
# too, "0" nowhere. Per layer its float32 error is within 2x of im2col's (2-4e-7 relative to
# float64 for outputs and both gradients on fcn32s's layers). But a forward pass with other
# last bits than im2col's (and MXNet's) changes discrete choices downstream, which max
# pooling and ReLU make on near-equal values: with Winograd in forward fcn32s's float32
# gradients land 1.5e-3 (median 4.4e-4) from the float64 truth against im2col's 4.7e-5
# (median 8e-6); with Winograd in backward only they land where im2col's do (4.71e-5,
# median 8.05e-6), since no decision depends on a gradient's last bits.
WINOGRAD = os.environ.get("RAYMOD_CONV_WINOGRAD", "backward")
if WINOGRAD not in ("0", "1", "backward"):
    raise ValueError(f"RAYMOD_CONV_WINOGRAD={WINOGRAD!r}: expected '0' (off), '1' (forward "
                     f"and backward) or 'backward' (gradients only, the default)")
# A stride-1 layer's data gradient runs as a convolution of the output gradient when the
# batch has at least this many input positions per filter (see Convolution.backward).
AS_CONV_MIN_POSITIONS_PER_FILTER = 4

# A 1x1, stride-1, unpadded, ungrouped layer multiplies each sample's (C, L) map by the
# weight, in the data's own layout, once a sample has this many positions: no im2col and no
# transposes (measured, numpy, one thread: forward 1.1-2.2x and backward 1.1-1.8x faster
# from 4x4 maps; at 1x1 maps the per-sample weight-gradient products cost 7x).
POINTWISE_MIN_POSITIONS = 16

# Forward builds the columns of large layers a block of output rows at a time (about this
# many elements a block) when nothing keeps them for backward: see _im2col.blocked_forward.
BLOCKED_FORWARD_MIN = 3 << 20  # from about here it pays (0.78x at 3.6M, 0.97-1.05x at 2M)
BLOCKED_FORWARD_BUDGET = 1 << 19
# ... and only when a block still holds this many output positions: with 256 or 512 input
# channels (2304 to 4608 rows of columns) a block is too narrow a product, 1.1-1.3x slower
# than the whole one (measured as above on VGG-16's conv3 and conv4 layers)
BLOCKED_FORWARD_MIN_POSITIONS = 384
# Large stride-1 layers of at most this many channels (and no more filters) run backward by
# row blocks too, from BLOCKED_BACKWARD_MIN column elements, instead of Winograd or whole
# columns: at 64 channels Winograd's transforms of a large map cost more than its products
# save (VGG-16's conv1_2 at 230x230: backward 0.58x the time blocked), from 128 on Winograd
# wins (1.2-1.5x). Forward and backward together: 0.84-0.88x at 4-30M column elements,
# 0.94-1.09x at 3.6M (measured, numpy, one thread).
BLOCKED_BACKWARD_MAX_CHANNELS = 64
BLOCKED_BACKWARD_MIN = 4 << 20
# Where those blocks run, layers padded to keep their size with at most this many channels
# and filters take shifted GEMMs by blocks instead of im2col's (see _shifted_blocks: kw copies
# of the rows a block reads, not kh*kw). Measured, numpy, one thread, alone: VGG-16's
# conv1_2 (64 channels, 230x230) forward 48.8 -> 45.8 ms, data gradient 49.0 -> 47.6,
# weight gradient 49.8 -> 48.9; conv2_2 (128, 115x115) forward 44.2 -> 41.8; conv2_1 (64 to
# 128) forward even (22.3 -> 22.1); with 256 channels (58x58) forward 1.04x, with 512 1.23x.
SHIFTED_BLOCKS_MAX_CHANNELS = 128

# A stride-1, ungrouped 2-D layer padded to keep its size ("same": its data gradient is then
# padded alike; LeNet's unpadded 5x5 layer took 1.3-2.5x as long) runs its data gradient as
# shifted GEMMs (see _shifted) on maps SHIFTED_MIN_WIDTH to SHIFTED_MAX_WIDTH wide (any width
# with at most SHIFTED_ANY_WIDTH channels) and with kernels up to SHIFTED_MAX_KW wide, while
# channels and filters are at most SHIFTED_MAX_CHANNELS (SHIFTED_NARROW_MAX_CHANNELS below
# SHIFTED_WIDE_FROM columns). Measured against the other routes (numpy, one thread): 0.37-0.95x
# inside those bounds at batch 1-2, 0.29-0.76x at 16-32; 1.0-1.15x at 7x7 maps of 96-128
# channels, 1.1-1.2x on 1x7 kernels and 147x147 maps, 1.0-1.1x with 256 channels.
SHIFTED_MIN_WIDTH = 6
SHIFTED_MAX_WIDTH = 64
SHIFTED_ANY_WIDTH = 32
SHIFTED_MAX_KW = 5
SHIFTED_MAX_CHANNELS = 192
SHIFTED_NARROW_MAX_CHANNELS = 64
SHIFTED_WIDE_FROM = 14
# Where Winograd would take both gradients only up to this many channels and filters: the
# transforms the weight gradient makes anyway serve the data gradient too (backward 0.92-0.94x
# at 32x32 to 56x56 maps of 64 channels; 1.08-1.17x with 96-128 channels or on 100x100 maps).
SHIFTED_OVER_WINOGRAD_MAX_CHANNELS = 64
# Forward and weight gradient too (the forward keeps its stacked rows) where channels and
# filters are SHIFTED_FORWARD_MIN_CHANNELS to SHIFTED_FORWARD_MAX_CHANNELS on maps at least
# SHIFTED_FORWARD_MIN_WIDTH wide (narrower ones build their columns batch last, cheaply).
# Inside the networks (one thread, executors alternating in one process) 96 against 32:
# inception_bn_small 0.977-0.980x a step (its 3x3 layers of 64-96 channels at 28x28),
# inception_v3 0.969x, ResNet-18 0.997x, neural_style 0.991x; 192 would take GoogLeNet's
# 64 -> 192 layer on 15x15 maps too, 1.019-1.023x its step.
SHIFTED_FORWARD_MIN_CHANNELS = 8
SHIFTED_FORWARD_MAX_CHANNELS = 96
SHIFTED_FORWARD_MIN_WIDTH = 13

# Column buffers up to this many elements are kept from forward for the weight gradient;
# larger ones are rebuilt from the retained data in backward to bound memory.
KEEP_COLS_MAX = 1 << 24


class _Route(NamedTuple):
    """How a Convolution runs at one input shape, worked out once (see Convolution._route)."""

    out: tuple  # output spatial shape
    depthwise: bool
    depthwise_rows: bool  # see _depthwise_rows
    depthwise_dense: bool  # see _depthwise_dense
    winograd_forward: bool
    winograd_backward: bool
    batch_last: bool  # column buffers' layout (see _im2col.batch_last)
    pointwise: bool  # 1x1 per sample (see POINTWISE_MIN_POSITIONS)
    blocked_backward: bool  # by row blocks (see BLOCKED_BACKWARD_MAX_CHANNELS)
    blocked_forward: bool  # by row blocks when no columns are kept (BLOCKED_FORWARD_MIN)
    shifted_blocks: bool  # those blocks as shifted GEMMs (SHIFTED_BLOCKS_MAX_CHANNELS)
    keep_cols: bool  # training forward keeps its columns for the weight gradient
    shifted_data_grad: bool  # the data gradient as shifted GEMMs (see SHIFTED_MAX_WIDTH)
    shifted_forward: bool  # forward and weight gradient too (SHIFTED_FORWARD_MAX_CHANNELS)
    numba_depthwise: bool = False  # compiled loops, where numba is installed


class _Parts(NamedTuple):
    """What a forward cut into parts of its batch keeps: the parts and each one's kept."""

    cuts: list  # slices of the batch
    kept: list  # per part, what its route's forward kept


class Convolution(Op):
    """Cross-correlation of ``data`` (N, C, *spatial) with ``weight`` (F, C/G, *kernel).

    ``out[n, f] = sum_c data[n, c] (*) weight[f, c] + bias[f]`` over the channels of the
    filter's group, with zero padding ``pad``, ``stride`` and ``dilate`` per spatial axis
    (defaults 0, 1, 1). ``num_group`` G splits channels and filters into G independent
    convolutions. Output length per axis: ``(x + 2p - d(k-1) - 1) // s + 1``.

    Attributes
    ----------
    kernel, stride, dilate, pad : tuple of int
        One entry per spatial axis (1, 2 or 3 axes).
    num_filter, num_group : int
    no_bias : bool
        Default False; without bias the inputs are ``data, weight``.
    workspace, cudnn_tune, cudnn_off : accepted for MXNet compatibility, unused.
    layout : str or None
        Only the channel-first layout (NCW, NCHW, NCDHW) is supported.

    Backward keeps ``data`` and ``weight``; in training forward also saves the im2col buffer
    (when it has at most ``KEEP_COLS_MAX`` elements) so the weight gradient needs no rebuild.
    """

    name = "Convolution"
    params = dict(CONV_PARAMS)
    inputs = ("data", "weight", "bias")
    retain_inputs = (0, 1)
    writes_grad_out = True

    def check(self) -> None:
        check_conv_attrs(self)
        if self.num_filter % self.num_group:
            raise AttributeValueError(f"Convolution: num_filter={self.num_filter} must be a "
                                      f"multiple of num_group={self.num_group}")
        self._routes: dict[tuple, _Route] = {}
        # the padding that makes a stride-1 layer's data gradient a plain convolution
        self._full_pad = transposed_pad(self.kernel_, self.stride_, self.dilate_, self.pad_)

    def _route(self, xp, x_shape) -> _Route:
        """The paths this layer takes at input shape ``x_shape``, cached per shape: working
        them out costs a few microseconds a call, about 5 % of a small network's step."""
        compiled = xp is np and _depthwise_numba.available()
        key = (tuple(x_shape), xp is np, WINOGRAD, compiled)
        route = self._routes.get(key)
        if route is None:
            out = self._out_spatial(x_shape[2:])
            pointwise = (self.num_group == 1 and set(self.kernel_ + self.stride_) == {1}
                         and not any(self.pad_)
                         and math.prod(out) >= POINTWISE_MIN_POSITIONS)
            size = cols_size(x_shape[1], self.kernel_, x_shape[0], out)
            blocked = (xp is np and self.num_group == 1 and self._full_pad is not None
                       and self.num_filter <= x_shape[1] <= BLOCKED_BACKWARD_MAX_CHANNELS
                       and size >= BLOCKED_BACKWARD_MIN)
            winograd_forward = self._winograd(x_shape, out, forward=True)
            winograd_backward = self._winograd(x_shape, out, forward=False) and not blocked
            last = batch_last(out)
            shifted_forward = (not (blocked or pointwise or winograd_forward)
                               and self._shifted(xp, x_shape, forward=True))
            rows = self._depthwise_rows(xp, x_shape)
            dense = not rows and self._depthwise_dense(xp, x_shape, out)
            route = self._routes[key] = _Route(
                out, not (rows or dense) and self._depthwise(xp, x_shape), rows, dense,
                winograd_forward,
                winograd_backward, last, pointwise, blocked,
                blocked_forward=(xp is np and self.num_group == 1 and not last
                                 and size >= BLOCKED_FORWARD_MIN
                                 and BLOCKED_FORWARD_BUDGET * math.prod(out) * x_shape[0]
                                 >= BLOCKED_FORWARD_MIN_POSITIONS * size),
                shifted_blocks=(self._shifted_fits(xp) and max(x_shape[1], self.num_filter)
                                <= SHIFTED_BLOCKS_MAX_CHANNELS),
                keep_cols=size <= KEEP_COLS_MAX and not winograd_backward and not blocked,
                shifted_data_grad=shifted_forward or (not (blocked or pointwise) and self._shifted(
                    xp, x_shape, over_winograd=winograd_backward)),
                shifted_forward=shifted_forward,
                numba_depthwise=(compiled and self._one_filter_per_channel(x_shape)
                                 and _depthwise_numba.applies(x_shape, self.kernel_,
                                                              self.stride_, self.dilate_,
                                                              self.pad_)))
        return route

    def _shifted_fits(self, xp) -> bool:
        """Whether this layer's geometry allows shifted GEMMs: numpy, 2-D, ungrouped, stride
        1, padded to keep its size, a kernel at most ``SHIFTED_MAX_KW`` wide."""
        return (xp is np and len(self.kernel_) == 2 and self.num_group == 1
                and self.stride_ == (1, 1) and self._full_pad == self.pad_
                and self.kernel_[1] <= SHIFTED_MAX_KW)

    def _shifted(self, xp, x_shape, forward: bool = False, over_winograd: bool = False) -> bool:
        """Whether this layer's data gradient (or forward and weight gradient) runs as
        shifted GEMMs (see :mod:`._shifted` and ``SHIFTED_MAX_WIDTH``); ``over_winograd``:
        the gradients would otherwise be Winograd's."""
        if not self._shifted_fits(xp):
            return False
        width, channels = x_shape[-1], max(x_shape[1], self.num_filter)
        if forward:
            return (SHIFTED_FORWARD_MIN_CHANNELS <= min(x_shape[1], self.num_filter)
                    and channels <= SHIFTED_FORWARD_MAX_CHANNELS
                    and width >= SHIFTED_FORWARD_MIN_WIDTH)
        if over_winograd and channels > SHIFTED_OVER_WINOGRAD_MAX_CHANNELS:
            return False
        if channels <= SHIFTED_ANY_WIDTH:
            return True
        most = SHIFTED_MAX_CHANNELS if width >= SHIFTED_WIDE_FROM else SHIFTED_NARROW_MAX_CHANNELS
        return SHIFTED_MIN_WIDTH <= width <= SHIFTED_MAX_WIDTH and channels <= most

    def list_arguments(self) -> list[str]:
        return ["data", "weight"] if self.no_bias else ["data", "weight", "bias"]

    def _out_spatial(self, spatial):
        return tuple(conv_out_size(*a) for a in zip(spatial, self.kernel_, self.stride_,
                                                     self.dilate_, self.pad_))

    def infer_shape(self, in_shapes, out_shapes):
        nd, g, f = len(self.kernel_), self.num_group, self.num_filter
        data, weight, out = in_shapes[0], in_shapes[1], out_shapes[0]
        batch, chans = data_batch_channels(self, data, out, (weight[1] * g if weight and weight[1] else 0))
        spatial = tuple(data[2:]) if data else (0,) * nd
        if data is None and not batch and not chans:
            new_data = None
        else:
            new_data = (batch, chans) + spatial
        shapes = [new_data, (f, chans // g) + self.kernel_] + ([] if self.no_bias else [(f,)])
        return shapes, [(batch, f) + self._out_spatial(spatial)], []

    def _winograd(self, x_shape, out, forward: bool) -> bool:
        """Whether this layer's forward (or gradients) run as Winograd F(2x2, 3x3) (see
        :mod:`._winograd` and ``WINOGRAD``)."""
        tiles = x_shape[0] * math.ceil(out[0] / 2) * math.ceil(out[1] / 2) if len(out) == 2 else 0
        if WINOGRAD == "1":
            least_tiles, least_channels = WINOGRAD_MIN_TILES, WINOGRAD_MIN_CHANNELS
        elif WINOGRAD == "backward" and not forward:
            least_tiles, least_channels = WINOGRAD_BACKWARD_MIN_TILES, WINOGRAD_BACKWARD_MIN_CHANNELS
            if min(x_shape[1], self.num_filter) >= WINOGRAD_BACKWARD_WIDE_CHANNELS:
                least_tiles = WINOGRAD_BACKWARD_WIDE_MIN_TILES
        else:
            return False
        return (self.kernel_ == (3, 3) and self.stride_ == (1, 1) and self.dilate_ == (1, 1)
                and self.num_group == 1 and tiles >= least_tiles
                and min(x_shape[1], self.num_filter) >= least_channels)

    def _one_filter_per_channel(self, x_shape) -> bool:
        """Whether the layer is depthwise at input shape ``x_shape``: a group per channel,
        one filter each."""
        return self.num_group > 1 and self.num_group == x_shape[1] == self.num_filter

    def _depthwise_rows(self, xp, x_shape) -> bool:
        """Whether this layer runs as :mod:`._depthwise_rows` (see
        ``DEPTHWISE_ROWS_MIN_WIDTH``)."""
        return (xp is np and self._one_filter_per_channel(x_shape)
                and _depthwise_rows.applies(self.kernel_, self.stride_, self.dilate_, self.pad_)
                and x_shape[-1] >= DEPTHWISE_ROWS_MIN_WIDTH
                and _depthwise_rows.columns_size(x_shape, self.kernel_, self.pad_)
                <= DEPTHWISE_ROWS_MAX_COLS)

    def _depthwise_dense(self, xp, x_shape, out) -> bool:
        """Whether this layer runs as :mod:`._depthwise_dense` (tiny maps)."""
        return (xp is np and len(self.kernel_) == 2 and self._one_filter_per_channel(x_shape)
                and _depthwise_dense.applies(x_shape, out))

    def _depthwise(self, xp, x_shape) -> bool:
        """Whether this layer runs as depthwise (one filter per channel, see
        :mod:`._depthwise`): on small maps with few channels the grouped GEMM's few large
        calls beat its per-offset ones (measured, numpy: 1.3x slower at 8x8, 1.5-2.6x faster
        from 28x28); with many channels its channels-last form wins at any size (1.3-2x,
        MobileNet's 16x16 to 2x2 maps). Small numpy column buffers go the grouped way, whose
        im2col and col2im are then one gather and one bincount: 1.1-2x faster than the
        depthwise path on MobileNet's layers, forward and backward (its tiniest maps run as
        :mod:`._depthwise_dense`)."""
        out = self._out_spatial(x_shape[2:])
        if not self._one_filter_per_channel(x_shape):
            return False
        if xp is np and cols_size(x_shape[1], self.kernel_, x_shape[0], out) <= \
                _im2col.IM2COL_TAKE_MAX:
            return False
        return (x_shape[0] * math.prod(out) >= DEPTHWISE_MIN_POSITIONS
                or _depthwise.channels_last(x_shape[1], out))

    def forward(self, xp, inputs, aux, is_train):
        x, w = inputs[0], inputs[1]
        bias = None if self.no_bias else inputs[2]
        parts = self._parts(xp, x.shape)
        if parts == 1:
            y, saved = self._route_forward(xp, x, w, bias, is_train)
            return [y], saved
        cuts = _batch_parts.bounds(x.shape[0], parts)
        y = xp.empty((x.shape[0], self.num_filter) + self._out_spatial(x.shape[2:]), x.dtype)

        def part(i):
            y[cuts[i]], kept = self._route_forward(xp, x[cuts[i]], w, bias, is_train)
            return kept

        return [y], _Parts(cuts, _batch_parts.run(part, parts))

    def _parts(self, xp, x_shape) -> int:
        """Into how many parts of its batch this layer's forward and backward are cut (see
        :mod:`.._batch_parts`): numpy only, by the multiply-adds of the whole batch. An
        unpadded layer with a kernel wider than 1 (LeNet's, AlexNet's) stays whole: LeNet's
        two 5x5 layers cut took its step from 16.2 to 20.8 ms at 2 threads, where the one
        im2col GEMM of each is OpenBLAS's to thread. ResNet-20's layers are all cut, its
        strided im2col ones too: alone those take 1.2-1.4x as long cut, but left whole
        between cut layers, the step took 188-222 ms against 168-177 all cut (2 threads)."""
        if xp is not np or (not any(self.pad_) and max(self.kernel_) > 1):
            return 1
        flops = (x_shape[0] * self.num_filter * (x_shape[1] // self.num_group)
                 * math.prod(self.kernel_) * math.prod(self._out_spatial(x_shape[2:])))
        return _batch_parts.count(x_shape[0], flops)

    def _biased(self, y, bias):
        """``y`` (N, F, *out) plus ``bias`` (in place), if there is one."""
        if bias is not None:
            y += bias.reshape((-1,) + (1,) * len(self.kernel_))
        return y

    def _route_forward(self, xp, x, w, bias, is_train):
        """``(N, F, *out)`` by this shape's route, and what backward keeps."""
        n, c, g = x.shape[0], x.shape[1], self.num_group
        route = self._route(xp, x.shape)
        out = route.out
        if route.numba_depthwise:
            y, padded = _depthwise_numba.forward(x, w)
            return self._biased(y, bias), (padded if is_train else None)
        if route.depthwise_rows:
            # nothing kept for backward: see _depthwise_rows
            y = _depthwise_rows.forward(x, w, self.dilate_, self.pad_)
            return self._biased(y, bias), None
        if route.depthwise_dense:
            y, m = _depthwise_dense.forward(x, w, out, self.kernel_, self.stride_, self.dilate_,
                                            self.pad_)
            return self._biased(y, bias), (m if is_train else None)
        if route.depthwise:
            return self._biased(_depthwise.forward(xp, x, w, out, self.kernel_, self.stride_,
                                                   self.dilate_, self.pad_), bias), None
        if route.pointwise:
            y = xp.matmul(w.reshape(self.num_filter, c), x.reshape(n, c, -1))
            return self._biased(y.reshape((n, self.num_filter) + out), bias), None
        if route.shifted_forward:
            y, rows = _shifted.forward(x, w, self.dilate_, self.pad_)
            return self._biased(y, bias), (rows if is_train else None)
        if route.winograd_forward:
            d = _winograd.transform_input(xp, x, self.pad_, out)
            wt = _winograd.transform_weight(xp, w)
            y = _winograd.inverse_output(xp, xp.matmul(wt, d), n, out)
            return self._biased(y, bias), ((d, wt) if is_train else None)
        last = route.batch_last
        keep = is_train and route.keep_cols
        if route.blocked_forward and not keep:
            if route.shifted_blocks:
                y = _shifted_blocks.forward(x, w, self.dilate_, self.pad_,
                                            BLOCKED_FORWARD_BUDGET)
            else:
                y = blocked_forward(x, w.reshape(self.num_filter, -1), out, self.kernel_,
                                    self.stride_, self.dilate_, self.pad_,
                                    BLOCKED_FORWARD_BUDGET)
            return self._biased(y, bias), None
        cols = im2col(xp, x, out, self.kernel_, self.stride_, self.dilate_, self.pad_, last)
        if g == 1:  # sliced when the maps have a few positions (see _skinny_gemm)
            y = _skinny_gemm.times_columns(xp, w.reshape(self.num_filter, -1),
                                           cols.reshape(-1, n * math.prod(out)))
        else:
            y = xp.matmul(grouped(w, g), cols.reshape(g, -1, n * math.prod(out)))
        y = y.reshape(self.num_filter, -1)
        if bias is not None:  # in the (F, N*L) layout, whose rows are long: an output row
            y += bias.reshape(-1, 1)  # can be a 2x2 map (4x the time at batch 32)
        # the gradients rebuild what Winograd needs from the data, not from these columns
        return batch_major(xp, y, n, out, last), (cols if keep else None)

    @staticmethod
    def _pointwise_backward(xp, gy, x, w, need_grad, into):
        """Data and weight gradients of a pointwise layer (``route.pointwise``), sample by
        sample in the data's layout; the weight's is summed into ``into`` when given."""
        n, c, f = x.shape[0], x.shape[1], w.shape[0]
        g3, w2 = gy.reshape(n, f, -1), w.reshape(f, c)
        dx = xp.matmul(w2.T, g3).reshape(x.shape) if need_grad[0] else None
        dw = None
        if need_grad[1]:
            x3 = x.reshape(n, c, -1)
            target = None if into is None else into.reshape(f, c)
            # a sum of per-sample products, each (C, F) = x g^T where that runs faster (few
            # filters, long maps: 0.65-0.89x the time; see swaps_product)
            swap = swaps_product(f, c, x3.shape[2])
            a, b = (x3, g3) if swap else (g3, x3)
            dw = xp.matmul(a[0], b[0].T, out=None if swap else target)
            term = xp.empty_like(dw) if n > 1 else None
            for i in range(1, n):
                dw += xp.matmul(a[i], b[i].T, out=term)
            if swap:
                if target is None:
                    dw = xp.ascontiguousarray(dw.T)
                else:
                    target[...] = dw.T
                    dw = target
            dw = dw.reshape(w.shape)
        return dx, dw

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad, grad_out=None):
        x, w, gy = inputs[0], inputs[1], out_grads[0]
        grads = [None] * len(inputs)
        # the weight's and bias's own grad arrays where the executor gives them: written in
        # place, they save it a copy of every parameter gradient per step
        into = grad_out or [None] * len(inputs)
        if not self.no_bias and need_grad[2]:
            # as BLAS products (see _channel_sums): 0.36-0.76x the time of numpy's sum over
            # the axes at (2, 32-160, 28x28 to 4x4), one thread
            grads[2] = channel_sums(xp, 1, gy, out=into[2])
        if not (need_grad[0] or need_grad[1]):
            return grads
        if isinstance(saved, _Parts):
            grads[0], grads[1] = self._backward_parts(xp, gy, x, w, saved, need_grad[:2],
                                                      into[1])
        else:
            grads[0], grads[1] = self._backward(xp, gy, x, w, saved, need_grad[:2], into[1])
        return grads

    def _backward_parts(self, xp, gy, x, w, saved, need_grad, into):
        """Data and weight gradients part by part of the batch, as forward cut it: each
        part's data gradient is its own rows, the weight's is the sum of the parts'."""
        cuts = saved.cuts
        dx = xp.empty_like(x) if need_grad[0] else None

        def part(i):
            s = cuts[i]
            dx_i, dw_i = self._backward(xp, gy[s], x[s], w, saved.kept[i], need_grad, None)
            if dx is not None:
                dx[s] = dx_i
            return dw_i

        dws = _batch_parts.run(part, len(cuts))
        if not need_grad[1]:
            return dx, None
        dw = xp.add(dws[0], dws[1], out=into)
        for more in dws[2:]:
            dw += more
        return dx, dw

    def _backward(self, xp, gy, x, w, saved, need_grad, into_w):
        """``(data gradient, weight gradient)`` of the whole batch ``x`` by this shape's
        route (None where ``need_grad`` says no); the weight's into ``into_w`` when given."""
        g = self.num_group
        grads = [None, None]
        into = [None, into_w]
        route = self._route(xp, x.shape)
        out = route.out
        if route.numba_depthwise:
            dx, dw = _depthwise_numba.backward(gy, x, w, need_grad[0], need_grad[1], saved)
            if dw is not None and into[1] is not None:
                into[1][...] = dw
                dw = into[1]
            return dx, dw
        if route.depthwise_rows:
            grads[0], grads[1] = _depthwise_rows.backward(
                gy, x, w, self.dilate_, self.pad_, need_grad[0], need_grad[1])
            return tuple(grads)
        if route.depthwise_dense:
            geometry = (self.kernel_, self.stride_, self.dilate_, self.pad_)
            m = saved
            if m is None:  # after an inference forward
                m = _depthwise_dense.forward(x, w, out, *geometry)[1]
            grads[0], grads[1] = _depthwise_dense.backward(gy, x, m, *geometry, need_grad[0],
                                                           need_grad[1])
            return tuple(grads)
        if route.depthwise:
            grads[0], grads[1] = _depthwise.backward(
                xp, gy, x, w, self.kernel_, self.stride_, self.dilate_, self.pad_,
                need_grad[0], need_grad[1], self._full_pad)
            return tuple(grads)
        if route.pointwise:
            grads[0], grads[1] = self._pointwise_backward(xp, gy, x, w, need_grad, into[1])
            return tuple(grads)
        if route.blocked_backward and route.shifted_blocks:
            budget = BLOCKED_FORWARD_BUDGET
            if need_grad[1]:
                grads[1] = _shifted_blocks.weight_grad(x, gy, self.kernel_, self.dilate_,
                                                       self.pad_, budget, out=into[1])
            if need_grad[0]:
                grads[0] = _shifted_blocks.data_grad(gy, w, self.dilate_, self._full_pad,
                                                     budget)
            return tuple(grads)
        if route.blocked_backward:
            budget = BLOCKED_FORWARD_BUDGET
            if need_grad[1]:
                grads[1] = blocked_weight_grad(
                    x, gy, self.kernel_, self.stride_, self.dilate_, self.pad_, budget,
                    out=None if into[1] is None else into[1].reshape(w.shape[0], -1),
                ).reshape(w.shape)
            if need_grad[0]:
                grads[0] = blocked_forward(gy, flipped_transpose(xp, w), x.shape[2:],
                                           self.kernel_, self.stride_, self.dilate_,
                                           self._full_pad, budget)
            return tuple(grads)
        if need_grad[0] and route.shifted_data_grad:
            grads[0] = _shifted.data_grad(gy, w, self.dilate_, self._full_pad)
            if not need_grad[1]:
                return tuple(grads)
            need_grad = (False,) + tuple(need_grad[1:])
        if route.shifted_forward:  # the weight gradient from the rows forward stacked
            rows = saved or _shifted.stacked_rows(x, self.kernel_, self.dilate_, self.pad_)
            grads[1] = _shifted.weight_grad(rows, gy, self.kernel_, self.dilate_, out=into[1])
            return tuple(grads)
        if route.winograd_backward:
            d, wt = saved if route.winograd_forward and saved else (
                _winograd.transform_input(xp, x, self.pad_, out),
                _winograd.transform_weight(xp, w) if need_grad[0] else None)
            gt = _winograd.transform_grad(xp, gy)
            if need_grad[1]:
                grads[1] = _winograd.weight_grad(xp, gt, d, w.shape)
            if need_grad[0]:
                grads[0] = _winograd.data_grad(xp, wt, gt, x.shape, self.pad_, out)
            return tuple(grads)
        last = route.batch_last
        gyt = channel_major(xp, gy, g, last)  # (G, F/G, N*L)
        if need_grad[1]:
            cols = saved
            if cols is None:
                cols = im2col(xp, x, gy.shape[2:], self.kernel_, self.stride_, self.dilate_,
                              self.pad_, last)
            cols = cols.reshape(g, -1, gyt.shape[-1])
            target = None if into[1] is None else into[1].reshape(g, -1, cols.shape[1])
            if g == 1 and _skinny_gemm.sliced(xp, gyt.shape[-1], w):
                # a few positions and a large weight: the sliced product of rows, with the
                # columns made contiguous (0.54-0.9x the product's time at 2x2 maps)
                grads[1] = _skinny_gemm.weight_grad(
                    xp, gyt[0].T, xp.ascontiguousarray(cols[0].T),
                    out=None if target is None else target[0]).reshape(w.shape)
            else:
                grads[1] = times_transposed(xp, gyt, cols, out=target).reshape(w.shape)
        full_pad = self._full_pad
        # as a convolution it copies F*K*N*L columns of the output gradient and the flipped
        # weight (F*C*K) instead of scatter-adding C*K*N*L: worth it when filters are no more
        # than channels and positions outnumber filters (measured, numpy)
        positions = x.shape[0] * math.prod(x.shape[2:])
        f = self.num_filter
        # one filter per group (depthwise) too: its col2im is a bincount of every column or
        # a strided add per offset, 2.5-4x the time of the grouped products (numpy, MobileNet)
        one_per_group = g > 1 and f == g
        if need_grad[0] and full_pad is not None and (one_per_group or (
                g == 1 and f <= x.shape[1]
                and positions >= AS_CONV_MIN_POSITIONS_PER_FILTER * f)):
            grads[0] = data_grad_as_conv(xp, gy, w, x.shape, self.kernel_, self.dilate_,
                                         full_pad, g)
        elif need_grad[0]:
            wt = grouped(w, g).swapaxes(1, 2)
            # one filter per group (depthwise): the product is an outer one, and a broadcast
            # multiply is 2.5-4.5x faster than matmul's per-group calls (numpy, one thread)
            dcols = wt * gyt if wt.shape[2] == 1 else xp.matmul(wt, gyt)
            grid = gy.shape[2:] + x.shape[:1] if last else x.shape[:1] + gy.shape[2:]
            dcols = dcols.reshape((x.shape[1],) + self.kernel_ + grid)
            grads[0] = col2im(xp, dcols, x.shape, self.kernel_, self.stride_, self.dilate_,
                              self.pad_, last)
        return tuple(grads)
