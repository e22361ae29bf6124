"""Pooling: max, average, sum and Lp pooling over 1, 2 or 3 spatial axes."""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ..padding import constant_pad
from ._channel_sums import ones_vector
from ._im2col import LAYOUTS, check_layout, spatial_attr

# Max pooling's gradient finds each window's first maximum from a bit code of its equal
# entries, summed in float32: exact up to 24 kernel offsets; larger windows take the loop.
MAX_CODED_WINDOW = 24
# Training forwards of such windows take their maxima from the window matrix and keep each
# window's first-maximum offset, so backward only scatters (see _coded_max): forward +
# backward 0.72-0.85x the time of the stride-1 maxima with the offsets found in backward, on
# 3x3 stride-2 layers from (2, 80, 28, 28) to (1, 64, 147, 147); inside the networks (one
# thread, alternating steps) GoogLeNet 0.966x a step, Inception-BN 0.988-0.992x, ResNet-18
# 0.993x, Inception-v3 1.000x.
CODED_FORWARD = True
# window matrices list small maps' output positions channels last (see _window_order)
CHANNELS_LAST_MAX_COLUMNS = 4


def _window_order(shape: tuple) -> tuple:
    """The order of the ``(N, C, *out)`` axes in which window matrices list output positions:
    channels last on maps of at most ``CHANNELS_LAST_MAX_COLUMNS`` columns, so that copies
    run along the longer axis (numpy's strided copies pay per run: on GoogLeNet's 3x3 maps
    of 512 channels the gradient takes 0.77x the time; from 7 columns on it gains nothing,
    and at 15 to 56 it costs 1.1-2x, the channel stride being a whole map)."""
    nd = len(shape)
    if shape[-1] <= CHANNELS_LAST_MAX_COLUMNS < shape[1]:
        return (0, *range(2, nd), 1)
    return tuple(range(nd))


def _window_matrix(xpad, geom, order):
    """Every pooling window of the padded numpy ``xpad`` as one ``(K, M)`` copy: a row per
    kernel offset in row-major order, the ``M = N*C*prod(out)`` output positions listed in
    ``order`` (see :func:`_window_order`)."""
    kernel, stride, _, out = geom
    sp = xpad.strides[2:]
    shape = xpad.shape[:2] + tuple(out)
    strides = xpad.strides[:2] + tuple(a * s for a, s in zip(sp, stride))
    view = np.lib.stride_tricks.as_strided(
        xpad, tuple(kernel) + tuple(shape[i] for i in order),
        tuple(sp) + tuple(strides[i] for i in order), writeable=False)
    matrix = np.empty(view.shape, dtype=xpad.dtype)
    np.copyto(matrix, view)  # reshape's copy of such a view is several times slower
    return matrix.reshape(math.prod(kernel), -1)


@functools.lru_cache(maxsize=64)
def _window_targets(padded: tuple, geom: tuple, order: tuple):
    """Flat indices into a padded ``(N, C, *spatial)`` array: each window's first element
    (one per output position, listed in ``order``) and each kernel offset's distance from
    it."""
    kernel, stride, _, out = geom
    strides = [math.prod(padded[i + 1:]) for i in range(len(padded))]
    corner = np.arange(padded[0] * padded[1], dtype=np.int64).reshape(padded[:2]) * strides[1]
    for n, s, st in zip(out, stride, strides[2:]):
        corner = corner[..., None] + np.arange(n, dtype=np.int64) * s * st
    offsets = np.zeros(1, dtype=np.int64)
    for k, st in zip(kernel, strides[2:]):
        offsets = (offsets[:, None] + np.arange(k, dtype=np.int64) * st).ravel()
    # past the last offset: windows with no equal entry (a NaN maximum) send it to the first
    return corner.transpose(order).ravel(), np.append(offsets, 0)


def _first_offsets(windows, y_ordered):
    """Per output position, the kernel offset of its window's first maximum: the window
    matrix's entries equal to their output ``y_ordered`` (listed as the matrix's columns) are
    coded as bits (the first offset highest) and summed by one product; the code's binary
    exponent gives the first one's offset. A window with no equal entry (a NaN maximum) gets
    ``K``, which :func:`_window_targets` sends to its first element."""
    k = windows.shape[0]
    bits = np.ldexp(np.float32(1), np.arange(k - 1, -1, -1)).astype(np.float32)
    equal = windows == y_ordered.reshape(1, -1)
    return k - np.frexp(bits @ equal.astype(np.float32))[1]


def _first_max_scatter(padded: tuple, first, gy, geom):
    """Each output's gradient ``gy`` sent to the first maximum of its window (``first``, from
    :func:`_first_offsets`) on the padded grid of shape ``padded``: one ``bincount`` adds
    them up where windows overlap."""
    order = _window_order(gy.shape)
    corner, offsets = _window_targets(padded, geom, order)
    weights = gy.transpose(order).ravel()
    grad = np.bincount(corner + offsets[first], weights=weights, minlength=math.prod(padded))
    return grad.astype(gy.dtype).reshape(padded)


def _coded_max(x_padded, geom):
    """Max pooling of the padded numpy ``x_padded`` through its window matrix: the output
    and each window's first-maximum offset (see :func:`_first_offsets`), which backward then
    only scatters (training forwards of overlapping windows)."""
    out_shape = x_padded.shape[:2] + tuple(geom[3])
    order = _window_order(out_shape)
    windows = _window_matrix(x_padded, geom, order)
    y = windows.max(axis=0)
    first = _first_offsets(windows, y)
    y = y.reshape(tuple(out_shape[i] for i in order))
    if order != tuple(range(len(order))):
        y = np.ascontiguousarray(y.transpose(np.argsort(order)))
    return y, first


def _first_max_grad(x_padded, y, gy, geom):
    """Max pooling's gradient on the padded grid, each output's gradient sent to the first
    maximum of its window in row-major order (from the window matrix: see
    :func:`_first_offsets`). Against one strided pass per kernel offset this is 1.6-2x faster
    on overlapping 3x3 windows (measured, numpy, one thread, GoogLeNet's and ResNet's pooling
    layers)."""
    order = _window_order(y.shape)
    windows = _window_matrix(x_padded, geom, order)
    first = _first_offsets(windows, y.transpose(order))
    return _first_max_scatter(x_padded.shape, first, gy, geom)


def _overlap(geom) -> bool:
    """Whether pooling windows overlap (a stride below the kernel on some axis)."""
    return any(s < k for s, k in zip(geom[1], geom[0]))


def _box_reduce(a, kernel, combine=np.add):
    """Every stride-1 ``kernel`` window of the numpy ``a`` (N, C, *spatial) reduced by
    ``combine`` (``np.add``: sums, ``np.maximum``: maxima), shape
    ``(N, C, *(spatial - kernel + 1))``.

    Separable: along the last axis on the flattened array (contiguous passes; each row's last
    entries straddle two rows and are cut at the end), then along each other axis, whose
    slices are runs of whole rows. For a 3x3 window that is 4 contiguous passes instead of 8
    strided ones with runs of one output row (3-6x faster on Inception's 8x8 to 35x35 maps:
    measured, numpy, one thread).
    """
    k = kernel[-1]
    flat = a.reshape(-1)
    n = flat.size - k + 1
    rows = np.empty(flat.size, dtype=a.dtype)
    if k > 1:
        combine(flat[:n], flat[1:n + 1], out=rows[:n])
    else:
        np.copyto(rows[:n], flat[:n])
    for i in range(2, k):
        combine(rows[:n], flat[i:i + n], out=rows[:n])
    rows[n:] = 0  # never combined into a kept result, but must not hold stray infinities
    result = rows.reshape(a.shape)
    for axis in range(a.ndim - 2, 1, -1):  # the other spatial axes, last to first
        size = kernel[axis - 2]
        keep = a.shape[axis] - size + 1
        window = [slice(None)] * a.ndim
        window[axis] = slice(0, keep)
        total = result[tuple(window)].copy()
        for i in range(1, size):
            window[axis] = slice(i, i + keep)
            combine(total, result[tuple(window)], out=total)
        result = total
    return np.ascontiguousarray(result[..., :a.shape[-1] - k + 1])


def _tiles(x, kernel):
    """``x`` (N, C, *spatial) seen as (N, C, o1, k1, o2, k2, ...): its disjoint ``kernel``
    tiles (a view; the spatial sizes are multiples of the kernel)."""
    shape = list(x.shape[:2])
    for n, k in zip(x.shape[2:], kernel):
        shape += [n // k, k]
    return x.reshape(shape)


def _tile_offset(offsets):
    """The index of one kernel offset in every tile of a :func:`_tiles` view."""
    return (slice(None), slice(None)) + sum(((slice(None), i) for i in offsets), ())


def _tile_max(xp, x, kernel):
    """Max pooling over disjoint tiles (stride = kernel, no padding), one kernel axis at a
    time from the outermost, so that the first passes read whole rows."""
    y = _tiles(x, kernel)
    for d, k in enumerate(kernel):
        axis = 3 + d  # where this kernel axis sits once the ones before it are reduced
        first = (slice(None),) * axis
        m = xp.maximum(y[first + (0,)], y[first + (1,)]) if k > 1 else y[first + (0,)].copy()
        for i in range(2, k):
            xp.maximum(m, y[first + (i,)], out=m)
        y = m
    return y


def _first_maxima(xp, candidates, y):
    """For each of ``candidates`` (a window's entries, one array per kernel offset in
    row-major order), where it holds its window's first maximum ``y``: max pooling's gradient
    goes there, as in MXNet."""
    taken = None
    last = len(candidates) - 1
    for i, candidate in enumerate(candidates):
        first = candidate == y
        if taken is not None:
            first = xp.greater(first, taken)  # boolean ops: far cheaper than where
        if i < last:
            taken = first if taken is None else xp.logical_or(taken, first, out=taken)
        yield first


def _tile_max_grad(xp, x, y, gy, kernel):
    """The gradient of :func:`_tile_max`, written offset by offset into the tiles of the
    data gradient (no zeroed buffer and no scatter: each input cell belongs to one tile)."""
    tiles = _tiles(x, kernel)
    grad = xp.empty(tiles.shape, gy.dtype)
    index = [_tile_offset(offs) for offs in itertools.product(*map(range, kernel))]
    for i, first in zip(index, _first_maxima(xp, [tiles[i] for i in index], y)):
        xp.multiply(gy, first, out=grad[i])
    return grad.reshape(x.shape)


class Pooling(Op):
    """Pool each ``kernel`` window of ``data`` (N, C, *spatial) into one value.

    ``pool_type`` is ``max``, ``avg``, ``sum`` or ``lp`` (``(sum x^p)^(1/p)`` for ``p_value``
    1, 2 or 3). Windows move by ``stride`` (default 1) over data padded by ``pad`` (default 0;
    padding never wins a max and adds zero to sums). Output length per axis is
    ``floor((x + 2p - k) / s) + 1`` for ``pooling_convention='valid'`` and ``ceil(...) + 1``
    for ``'full'``, whose last window may run past the padded border and is clipped there.
    ``avg`` divides by the window size clipped to the padded border when ``count_include_pad``
    (default True), else by the number of real elements it covers. ``global_pool`` pools the
    whole spatial extent (kernel, stride and pad ignored).

    Max pooling sends each gradient to the first maximum of its window in row-major order,
    as MXNet does. Backward keeps the input and output for ``max`` and ``lp`` (and, after a
    training forward of overlapping max windows, each window's first-maximum offset); ``avg``
    and ``sum`` keep nothing but the input shape.

    Attributes
    ----------
    kernel, stride, pad : tuple of int
    pool_type : {'max', 'avg', 'sum', 'lp'}
    global_pool : bool
    pooling_convention : {'valid', 'full'}
        ``'same'`` is accepted by the parser but rejected: MXNet 1.9 cannot run it either.
    p_value : int or None
    count_include_pad : bool or None
    cudnn_off : accepted for MXNet compatibility, unused.
    layout : str or None
        Only the channel-first layout (NCW, NCHW, NCDHW) is supported.
    """

    name = "Pooling"
    params = {
        "kernel": Param("shape", (), doc="window size: (w,), (h, w) or (d, h, w)"),
        "pool_type": Param("str", "max", choices=("avg", "lp", "max", "sum")),
        "global_pool": Param("bool", False),
        "cudnn_off": Param("bool", False, doc="accepted for MXNet compatibility; unused"),
        "pooling_convention": Param("str", "valid", choices=("full", "same", "valid")),
        "stride": Param("shape", (), doc="window step per axis; default 1"),
        "pad": Param("shape", (), doc="padding per axis; default 0"),
        "p_value": Param("int", None, optional=True, doc="p of Lp pooling: 1, 2 or 3"),
        "count_include_pad": Param("bool", None, optional=True,
                                   doc="avg: count padding in the divisor (default True)"),
        "layout": Param("str", None, choices=("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", "NWC"),
                        optional=True, doc="only the channel-first layout"),
    }

    def check(self) -> None:
        if self.pooling_convention == "same":
            raise AttributeValueError("Pooling: pooling_convention='same' is not supported "
                                      "(use 'valid' or 'full')")
        if self.pool_type == "lp" and self.p_value not in (1, 2, 3):
            raise AttributeValueError(f"Pooling: pool_type='lp' needs p_value 1, 2 or 3, got "
                                      f"{self.p_value}")
        self._inv_counts: dict[tuple, np.ndarray] = {}  # see _inv_count
        self._geometries: dict[tuple, tuple] = {}  # see _geometry
        self._paddings: dict[tuple, tuple] = {}  # see _padding
        nd = len(self.kernel)
        if not self.global_pool:
            if nd not in LAYOUTS:
                raise AttributeValueError(f"Pooling: kernel={self.kernel} must have 1, 2 or 3 "
                                          f"entries (or set global_pool=True)")
            self.kernel_ = spatial_attr(self.name, "kernel", self.kernel, nd, 1, 1)
            self.stride_ = spatial_attr(self.name, "stride", self.stride, nd, 1, 1)
            self.pad_ = spatial_attr(self.name, "pad", self.pad, nd, 0, 0)
            check_layout(self.name, self.layout, nd)
        if self.pool_type in ("max", "lp"):
            self.retain_inputs, self.retain_outputs = (0,), (0,)

    def _geometry(self, spatial):
        """(kernel, stride, pad, output spatial shape) for input spatial shape ``spatial``;
        kept per shape (small maps' pooling takes about 10 us, of which this took 3)."""
        spatial = tuple(spatial)
        geom = self._geometries.get(spatial)
        if geom is None:
            geom = self._geometries[spatial] = self._make_geometry(spatial)
        return geom

    def _make_geometry(self, spatial):
        if self.global_pool:
            return tuple(spatial), (1,) * len(spatial), (0,) * len(spatial), (1,) * len(spatial)
        full = self.pooling_convention == "full"
        out = []
        for x, k, s, p in zip(spatial, self.kernel_, self.stride_, self.pad_):
            if x and k > x + 2 * p:
                raise ShapeError(f"kernel {self.kernel_} exceeds the input spatial shape "
                                 f"{tuple(spatial)} padded by {self.pad_}")
            out.append(((x + 2 * p - k + (s - 1 if full else 0)) // s + 1) if x else 0)
        return self.kernel_, self.stride_, self.pad_, tuple(out)

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None:
            return [None], [None if out is None else tuple(out[:2]) + (0,) * (len(out) - 2)], []
        nd = len(data) - 2
        if (self.global_pool and nd not in LAYOUTS) or (not self.global_pool
                                                        and nd != len(self.kernel_)):
            want = f"{len(self.kernel_) + 2}" if not self.global_pool else "3, 4 or 5"
            raise ShapeError(f"data {tuple(data)} must have {want} dims (batch, channel, "
                             f"spatial) for kernel {self.kernel}")
        check_layout(self.name, self.layout, nd)
        lead = tuple(d or (o if out else 0) for d, o in zip(data[:2], out or (0, 0)))
        return [lead + tuple(data[2:])], [lead + self._geometry(data[2:])[3]], []

    # --- compute -------------------------------------------------------------------------------
    def _padding(self, spatial) -> tuple:
        """(low, high) padding per axis so that every (possibly clipped) window fits, or None
        where none is needed, and the padded spatial shape; kept per shape, as
        :meth:`_geometry` is (forward and backward each need them every step)."""
        spatial = tuple(spatial)
        padding = self._paddings.get(spatial)
        if padding is None:
            kernel, stride, pad, out = self._geometry(spatial)
            widths = [(p, max(0, (o - 1) * s + k - p - n))
                      for n, k, s, p, o in zip(spatial, kernel, stride, pad, out)]
            padding = self._paddings[spatial] = (
                widths if any(lo or hi for lo, hi in widths) else None,
                tuple(n + lo + hi for n, (lo, hi) in zip(spatial, widths)))
        return padding

    def _padded(self, xp, x, fill):
        """``x`` padded with ``fill`` so that every window lies inside it."""
        widths = self._padding(x.shape[2:])[0]
        if widths is None:
            return x
        return constant_pad(xp, x, [(0, 0), (0, 0)] + widths, fill)

    @staticmethod
    def _windows(geom):
        """Per kernel offset, the strided slices reading it for every output position."""
        kernel, stride, _, out = geom
        return [(slice(None), slice(None)) + tuple(slice(i, i + s * (o - 1) + 1, s)
                                                   for i, s, o in zip(offs, stride, out))
                for offs in itertools.product(*map(range, kernel))]

    def _inv_count(self, xp, spatial, geom, dtype):
        """1 / divisor of average pooling, broadcastable to the output; numpy's are made
        once per input shape (a few small array ops a call otherwise)."""
        if xp is not np:
            return self._make_inv_count(xp, spatial, geom, dtype)
        key = (tuple(spatial), np.dtype(dtype))
        inv = self._inv_counts.get(key)
        if inv is None:
            inv = self._inv_counts[key] = self._make_inv_count(xp, spatial, geom, dtype)
            inv.flags.writeable = False
        return inv

    def _make_inv_count(self, xp, spatial, geom, dtype):
        kernel, stride, pad, out = geom
        inv = 1.0
        for axis, (n, k, s, p, o) in enumerate(zip(spatial, kernel, stride, pad, out)):
            start = xp.arange(o) * s - p
            end = xp.minimum(start + k, n + p)
            if not (self.count_include_pad is None or self.count_include_pad):
                start, end = xp.maximum(start, 0), xp.minimum(end, n)
            shape = [1] * (len(out) + 2)
            shape[axis + 2] = o
            inv = inv / (end - start).reshape(shape)
        return inv.astype(dtype)

    def _root(self, xp, s):
        p = self.p_value
        return s if p == 1 else xp.sqrt(s) if p == 2 else xp.cbrt(s)

    def _whole(self, spatial, geom) -> bool:
        """Whether one window covers the whole unpadded map: pooled as ``global_pool``."""
        return self.global_pool or (not any(geom[2]) and tuple(geom[0]) == tuple(spatial))

    @staticmethod
    def _tiled(spatial, geom) -> bool:
        """Whether the windows tile the map exactly: stride = kernel, no padding, and sizes
        that are multiples of the kernel (:func:`_tile_max`: 0.4-0.8x the time of the
        strided loop forward, 0.65-0.9x backward, 2x2 windows on LeNet's to VGG's maps)."""
        kernel, stride, pad, _ = geom
        return (tuple(stride) == tuple(kernel) and not any(pad)
                and all(n % k == 0 for n, k in zip(spatial, kernel)))

    def _box(self, xp, geom) -> bool:
        """Whether average or sum pooling runs as :func:`_box_reduce` (numpy, stride 1)."""
        return xp is np and self.pool_type in ("avg", "sum") and set(geom[1]) == {1}

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        geom = self._geometry(x.shape[2:])
        kind = self.pool_type
        if self._whole(x.shape[2:], geom):
            r = x.reshape(x.shape[0], x.shape[1], -1)
            if kind in ("avg", "sum") and x.dtype in (np.float32, np.float64):
                # one matrix-vector product: numpy's sum or mean over a short last axis pays
                # per row (7-15x the time at (2, 1024, 2x2 to 7x7) and (32, 2048, 7x7))
                y = r @ ones_vector(xp, r.shape[2], x.dtype)
                if kind == "avg":
                    y /= r.shape[2]
            else:
                y = (r.max(-1) if kind == "max" else r.mean(-1) if kind == "avg" else
                     r.sum(-1) if kind == "sum" else
                     self._root(xp, (r ** self.p_value).sum(-1)))
            y = y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))
        elif self._box(xp, geom):
            y = _box_reduce(self._padded(xp, x, 0), geom[0])
            if kind == "avg":
                y *= self._inv_count(xp, x.shape[2:], geom, y.dtype)
        elif kind == "max" and self._tiled(x.shape[2:], geom):
            y = _tile_max(xp, x, geom[0])
        elif xp is np and kind == "max" and _overlap(geom) and is_train and CODED_FORWARD \
                and math.prod(geom[0]) <= MAX_CODED_WINDOW:
            y, first = _coded_max(self._padded(xp, x, -np.inf), geom)
            return [y], first
        elif xp is np and kind == "max" and _overlap(geom):
            # the stride-1 maxima, then every stride-th: 1.1-2.6x faster than the loop for
            # overlapping windows, slower for disjoint ones (1.1-1.4x at 2x2 stride 2)
            y = _box_reduce(self._padded(xp, x, -np.inf), geom[0], np.maximum)
            if set(geom[1]) != {1}:
                y = np.ascontiguousarray(y[(slice(None), slice(None)) + tuple(
                    slice(0, (o - 1) * st + 1, st) for o, st in zip(geom[3], geom[1]))])
        else:
            xpad = self._padded(xp, x, -xp.inf if kind == "max" else 0)
            windows = self._windows(geom)
            first, *rest = windows
            power = self.p_value if kind == "lp" else 1
            y = xpad[first] ** power if power > 1 else xpad[first].copy()
            for w in rest:
                if kind == "max":
                    xp.maximum(y, xpad[w], out=y)
                else:
                    y += xpad[w] ** power if power > 1 else xpad[w]
            if kind == "avg":
                y *= self._inv_count(xp, x.shape[2:], geom, y.dtype)
            elif kind == "lp":
                y = self._root(xp, y)
        return [y], (None if kind in ("max", "lp") else x.shape)

    def _lp_scale(self, xp, gy, y):
        """``gy / y^(p-1)``, zero where the output is zero (as MXNet)."""
        nonzero = y != 0
        return gy * nonzero / xp.where(nonzero, y, 1) ** (self.p_value - 1)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:
            return [None]
        gy, kind = out_grads[0], self.pool_type
        x, y = inputs[0], outputs[0]
        shape = saved if x is None else x.shape
        geom = self._geometry(shape[2:])
        if self._whole(shape[2:], geom):
            return [self._global_backward(xp, gy, x, y, shape)]
        if kind == "avg":
            gy = gy * self._inv_count(xp, shape[2:], geom, gy.dtype)
        if self._box(xp, geom):  # the adjoint of a box sum: the box sums of gy padded by k-1
            spread = constant_pad(xp, gy, [(0, 0), (0, 0)] + [(k - 1, k - 1) for k in geom[0]])
            return [self._cropped(xp, _box_reduce(spread, geom[0]), shape, geom)]
        elif kind == "lp" and self.p_value > 1:
            gy = self._lp_scale(xp, gy, y)
        if kind == "max" and self._tiled(shape[2:], geom):
            return [_tile_max_grad(xp, x, y, gy, geom[0])]
        padded = self._padding(shape[2:])[1]
        if kind == "max" and saved is not None:  # the offsets a training forward found
            grad = _first_max_scatter(tuple(shape[:2]) + padded, saved, gy, geom)
            return [self._cropped(xp, grad, shape, geom)]
        if kind in ("max", "lp"):
            xpad = self._padded(xp, x, -xp.inf if kind == "max" else 0)
        if xp is np and kind == "max" and _overlap(geom) and \
                math.prod(geom[0]) <= MAX_CODED_WINDOW:
            return [self._cropped(xp, _first_max_grad(xpad, y, gy, geom), shape, geom)]
        gpad = xp.zeros(tuple(shape[:2]) + padded, dtype=gy.dtype)
        windows = self._windows(geom)
        # disjoint windows write each input cell once: store straight into the slice
        disjoint = not _overlap(geom)
        firsts = _first_maxima(xp, [xpad[w] for w in windows], y) if kind == "max" else None
        for w in windows:
            factor = None
            if kind == "max":
                factor = next(firsts)
            elif kind == "lp" and self.p_value > 1:
                factor = xpad[w] ** (self.p_value - 1)
            if not disjoint:
                gpad[w] += gy if factor is None else gy * factor
            elif factor is None:
                gpad[w] = gy
            else:
                xp.multiply(gy, factor, out=gpad[w])
        return [self._cropped(xp, gpad, shape, geom)]

    @staticmethod
    def _cropped(xp, gpad, shape, geom):
        """The gradient on the padded grid cut back to the input's ``shape``."""
        if gpad.shape == tuple(shape):
            return gpad
        return xp.ascontiguousarray(gpad[(slice(None), slice(None)) + tuple(
            slice(p, p + n) for p, n in zip(geom[2], shape[2:]))])

    def _global_backward(self, xp, gy, x, y, shape):
        n, c = shape[:2]
        g = gy.reshape(n, c, 1)
        kind = self.pool_type
        if kind == "max":
            r = x.reshape(n, c, -1)
            first = r.argmax(-1)[..., None]
            return (g * (xp.arange(r.shape[-1]) == first)).reshape(shape)
        if kind == "lp" and self.p_value > 1:
            r = x.reshape(n, c, -1)
            return (self._lp_scale(xp, g, y.reshape(n, c, 1)) * r ** (self.p_value - 1)
                    ).reshape(shape)
        size = math.prod(shape[2:])
        # repeat: a broadcast assignment pays per short row (1.2-1.3x the time)
        return xp.repeat(g / size if kind == "avg" else g, size, axis=2).reshape(shape)

