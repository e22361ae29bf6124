"""Helpers shared by Convolution and Deconvolution: attribute checks, im2col / col2im, GEMMs.

Column buffers are kept channel-major, ``(C, *kernel, N, *out)`` or ``(C, *kernel, *out, N)``,
so a whole batch is one GEMM per group: ``(F, C*k) @ (C*k, N*L)``. Building or scattering a
buffer loops only over kernel offsets, each step one strided slice copy (or add) covering every
sample and channel.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import Param
from ..padding import constant_pad

LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
# col2im of numpy column buffers up to this many elements is one bincount (see col2im)
COL2IM_BINCOUNT_MAX = 1 << 18
# im2col of small numpy maps (batch last, see batch_last) up to this many column elements
# is one take over the same cached indices
IM2COL_TAKE_MAX = 1 << 18
# where times_transposed swaps its product (see there): K at least this, and at least
# M * M / TRANSPOSED_PRODUCT_K_PER_M2
TRANSPOSED_PRODUCT_MIN_K = 64
TRANSPOSED_PRODUCT_K_PER_M2 = 24

CONV_PARAMS = {
    "kernel": Param("shape", doc="kernel size: (w,), (h, w) or (d, h, w)"),
    "stride": Param("shape", (), doc="stride per spatial axis; default 1"),
    "dilate": Param("shape", (), doc="dilation per spatial axis; default 1"),
    "pad": Param("shape", (), doc="zero padding per spatial axis; default 0"),
    "num_filter": Param("int", doc="number of output channels"),
    "num_group": Param("int", 1, doc="number of channel groups"),
    "workspace": Param("int", 1024, doc="accepted for MXNet compatibility; unused"),
    "no_bias": Param("bool", False),
    "cudnn_tune": Param("str", None, choices=("fastest", "limited_workspace", "off"),
                        optional=True, doc="accepted for MXNet compatibility; unused"),
    "cudnn_off": Param("bool", False, doc="accepted for MXNet compatibility; unused"),
    "layout": Param("str", None, choices=("NCW", "NCHW", "NCDHW", "NHWC", "NDHWC", "NWC"),
                    optional=True, doc="only the channel-first layout of the kernel's rank"),
}


def spatial_attr(op: str, key: str, value: tuple, nd: int, default: int, least: int) -> tuple:
    """``value`` expanded to ``nd`` entries (empty means ``default``), each at least ``least``."""
    if not value:
        return (default,) * nd
    if len(value) != nd:
        raise AttributeValueError(f"{op}: attribute {key!r}={value} must have {nd} entries, "
                                  f"one per kernel axis (kernel has {nd})")
    if any(v is None or v < least for v in value):
        raise AttributeValueError(f"{op}: attribute {key!r}={value} entries must be >= {least}")
    return tuple(value)


def check_layout(op: str, layout: str | None, nd: int) -> None:
    """Only channel-first data of the kernel's rank is supported."""
    if layout is not None and layout != LAYOUTS.get(nd):
        raise AttributeValueError(f"{op}: layout={layout!r} is not supported for a {nd}-D "
                                  f"kernel; use {LAYOUTS.get(nd)!r} (channel-first) or None")


def check_conv_attrs(op) -> None:
    """Validate and expand the attributes Convolution and Deconvolution share."""
    nd = len(op.kernel)
    if nd not in LAYOUTS:
        raise AttributeValueError(f"{op.name}: kernel={op.kernel} must have 1, 2 or 3 entries")
    op.kernel_ = spatial_attr(op.name, "kernel", op.kernel, nd, 1, 1)
    op.stride_ = spatial_attr(op.name, "stride", op.stride, nd, 1, 1)
    op.dilate_ = spatial_attr(op.name, "dilate", op.dilate, nd, 1, 1)
    op.pad_ = spatial_attr(op.name, "pad", op.pad, nd, 0, 0)
    if op.num_filter < 1 or op.num_group < 1:
        raise AttributeValueError(f"{op.name}: num_filter={op.num_filter} and "
                                  f"num_group={op.num_group} must be >= 1")
    check_layout(op.name, op.layout, nd)


def data_batch_channels(op, data, out, weight_channels: int) -> tuple[int, int]:
    """Batch and channel counts of a convolution-like op's input (0 where unknown).

    Checks the data has batch, channel and one axis per kernel dim, and that the channels
    split into ``op.num_group`` groups; ``weight_channels`` fills them in when data is unknown.
    """
    nd, g = len(op.kernel_), op.num_group
    if data is not None and len(data) != nd + 2:
        raise ShapeError(f"data {tuple(data)} must have {nd + 2} dims (batch, channel and "
                         f"{nd} spatial) for kernel {op.kernel_}")
    batch = (data[0] if data else 0) or (out[0] if out else 0)
    chans = (data[1] if data else 0) or weight_channels
    if chans % g:
        raise ShapeError(f"data {tuple(data)} has {chans} channels, not a multiple of "
                         f"num_group={g}")
    return batch, chans


def conv_out_size(size: int, k: int, s: int, d: int, p: int) -> int:
    """Output length of a convolution along one axis (0 when ``size`` is unknown)."""
    if not size:
        return 0
    extent = d * (k - 1) + 1
    if extent > size + 2 * p:
        raise ShapeError(f"dilated kernel extent {extent} exceeds the padded input "
                         f"{size} + 2*{p}")
    return (size + 2 * p - extent) // s + 1


def batch_last(out: tuple) -> bool:
    """Whether column buffers should put the batch axis last, ``(C, *kernel, *out, N)``.

    Each kernel offset copies (or adds) one strided slice whose contiguous runs are output
    rows when the batch comes first: for small maps (rows of at most 12) that is slow, and
    putting the batch last makes the runs ``out[-1] * N`` long at the price of transposing
    the input and output (measured with numpy on LeNet- and ResNet-sized layers).
    """
    return bool(out) and out[-1] <= 12


def window(offsets, out, stride, dilate):
    """The strided slices reading kernel position ``offsets`` for every output position."""
    return tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                 for o, n, s, d in zip(offsets, out, stride, dilate))


def im2col(xp, x, out, kernel, stride, dilate, pad, last: bool):
    """Columns of ``x`` (N, C, *spatial) zero-padded by ``pad``.

    Shape ``(C, *kernel, *out, N)`` when ``last`` (see :func:`batch_last`), else
    ``(C, *kernel, N, *out)``.
    """
    n, c = x.shape[:2]
    grid = tuple(out) + (n,) if last else (n,) + tuple(out)
    cols_shape = (c,) + tuple(kernel) + grid
    if xp is np and last and math.prod(cols_shape) <= IM2COL_TAKE_MAX:
        # one gather by cached index: the strided copy's runs would be a few elements long
        # (3x faster at 8x8 outputs of 5x5 stride-2 kernels, 1.1x at 7x7 and 3x3 outputs;
        # slower from runs of 28: measured, numpy, one thread)
        targets = _column_sources(cols_shape, tuple(x.shape), tuple(kernel), tuple(stride),
                                  tuple(dilate), tuple(pad), last)
        flat = np.empty(x.size + 1, dtype=x.dtype)
        flat[:-1] = x.reshape(-1)
        flat[-1] = 0
        return flat.take(targets).reshape(cols_shape)
    widths = [(p, p) for p in pad]
    if last:  # (C, *spatial, N), contiguous so that slices have long runs
        xt = x.transpose(batch_to_end(x.ndim))
        xt = constant_pad(xp, xt, [(0, 0)] + widths + [(0, 0)]) if any(pad) else \
            xp.ascontiguousarray(xt)
        lead, tail = (slice(None),), (slice(None),)
    else:
        xt = (constant_pad(xp, x, [(0, 0), (0, 0)] + widths) if any(pad) else x).swapaxes(0, 1)
        lead, tail = (slice(None), slice(None)), ()
    cols = xp.empty(cols_shape, dtype=x.dtype)
    if xp is np:  # every kernel offset in one strided view, copied once
        np.copyto(cols, _windows_view(xt, kernel, out, stride, dilate, last))
        return cols
    for offsets in itertools.product(*map(range, kernel)):
        cols[(slice(None),) + offsets] = xt[lead + window(offsets, out, stride, dilate) + tail]
    return cols


def _windows_view(xt, kernel, out, stride, dilate, last: bool):
    """The columns of the padded ``xt`` — ``(C, *spatial, N)`` when ``last``, else
    ``(C, N, *spatial)`` — as a read-only strided view shaped like :func:`im2col`'s result
    (no copy: one copy of it then replaces a strided copy per kernel offset, 1.1-3x faster
    at small batches, most with 5x5 kernels)."""
    nd = len(kernel)
    sc = xt.strides[0]
    sp = xt.strides[1:1 + nd] if last else xt.strides[2:]
    sn = xt.strides[-1] if last else xt.strides[1]
    n = xt.shape[-1] if last else xt.shape[1]
    ks = tuple(st * d for st, d in zip(sp, dilate))
    os_ = tuple(st * s for st, s in zip(sp, stride))
    if last:
        shape, strides = (xt.shape[0], *kernel, *out, n), (sc, *ks, *os_, sn)
    else:
        shape, strides = (xt.shape[0], *kernel, n, *out), (sc, *ks, sn, *os_)
    return np.lib.stride_tricks.as_strided(xt, shape, strides, writeable=False)


def _row_blocks(x, out, kernel, stride, dilate, pad, budget: int):
    """Per sample and block of output rows: ``(sample, first row, end row, columns)``, the
    columns (``(C*K, rows*prod(out[1:]))``) of at most ``budget`` elements (one row at
    least), built while the previous block's are still in the cache."""
    n, c = x.shape[:2]
    xt = constant_pad(np, x, [(0, 0), (0, 0)] + [(p, p) for p in pad]) if any(pad) else x
    per_row = c * math.prod(kernel) * math.prod(out[1:])
    rows = max(1, budget // per_row)
    for i in range(n):
        for r0 in range(0, out[0], rows):
            r1 = min(out[0], r0 + rows)
            block = xt[i:i + 1, :, r0 * stride[0]:]  # (1, C, rows from r0's first, ...)
            view = _windows_view(block.swapaxes(0, 1), kernel, (r1 - r0,) + tuple(out[1:]),
                                 stride, dilate, last=False)
            cols = np.empty(view.shape, dtype=x.dtype)
            np.copyto(cols, view)
            yield i, r0, r1, cols.reshape(c * math.prod(kernel), -1)


def blocked_forward(x, w2, out, kernel, stride, dilate, pad, budget: int):
    """``w2 @ im2col(x)`` laid out as ``(N, F, *out)``, for numpy, a block of output rows at
    a time (see :func:`_row_blocks`).

    The whole column buffer of a large map is written to memory and read back (122 MB for
    VGG-16's conv1_2 at 230x230): blocked, that layer's forward takes 0.73x the time, a
    115x115 one 0.85x (measured, numpy, one thread). Nothing is kept for backward.
    """
    f = w2.shape[0]
    y = np.empty((x.shape[0], f) + tuple(out), dtype=np.result_type(x, w2))
    for i, r0, r1, cols in _row_blocks(x, out, kernel, stride, dilate, pad, budget):
        y[i, :, r0:r1] = (w2 @ cols).reshape((f, r1 - r0) + tuple(out[1:]))
    return y


def blocked_weight_grad(x, gy, kernel, stride, dilate, pad, budget: int, out=None):
    """The weight gradient ``(F, C*K)`` of an ungrouped convolution, for numpy, summed over
    blocks of output rows (see :func:`_row_blocks`); written into ``out`` when given.

    Each block's product runs as ``cols @ gy_block^T`` with the (small) gradient block made
    contiguous: both operands then have their long axis in rows, which OpenBLAS runs at
    0.84x the time of ``gy_block @ cols^T`` (VGG-16's conv1_2: 49 against 58 ms)."""
    f = gy.shape[1]
    grad = None  # (C*K, F): transposed once at the end
    for i, r0, r1, cols in _row_blocks(x, gy.shape[2:], kernel, stride, dilate, pad, budget):
        term = cols @ np.ascontiguousarray(gy[i, :, r0:r1].reshape(f, -1).T)
        if grad is None:
            grad = term
        else:
            grad += term
    if out is None:
        return np.ascontiguousarray(grad.T)
    out[...] = grad.T
    return out


@functools.lru_cache(maxsize=64)  # entries up to 2 MiB (COL2IM_BINCOUNT_MAX indices)
def _column_sources(cols_shape: tuple, shape: tuple, kernel: tuple, stride: tuple,
                    dilate: tuple, pad: tuple, last: bool) -> np.ndarray:
    """For each element of a column buffer (laid out as :func:`im2col` makes them), the flat
    index of the input cell it reads in an ``(N, C, *spatial)`` array, or the array's size
    where it reads padding. im2col gathers by it and col2im adds up by it."""
    n, c, nd = shape[0], shape[1], len(kernel)
    out = cols_shape[1 + nd:-1] if last else cols_shape[2 + nd:]
    # axes of the buffer: C, the kernel's, then the batch after or before the output's
    k_axes = list(range(1, 1 + nd))
    n_axis = 1 + 2 * nd if last else 1 + nd
    o_axes = [1 + nd + i for i in range(nd)] if last else [2 + nd + i for i in range(nd)]

    def along(axis: int, values):
        dims = [1] * len(cols_shape)
        dims[axis] = len(values)
        return np.asarray(values, dtype=np.int64).reshape(dims)

    flat = along(n_axis, range(n)) * c + along(0, range(c))
    valid = True
    for a in range(nd):
        coord = (along(o_axes[a], range(out[a])) * stride[a]
                 + along(k_axes[a], range(kernel[a])) * dilate[a] - pad[a])
        valid = valid & (coord >= 0) & (coord < shape[2 + a])
        flat = flat * shape[2 + a] + coord
    return np.where(valid, flat, math.prod(shape)).astype(np.intp).ravel()


def col2im(xp, cols, shape, kernel, stride, dilate, pad, last: bool):
    """Scatter-add columns (laid out as :func:`im2col` makes them) into an (N, C, ...) array.

    Small numpy buffers are added up by one ``bincount`` over their cached target indices
    (padding goes to one extra bin), straight into the ``(N, C, ...)`` layout: one pass
    instead of a strided add per kernel offset, a crop and a transpose (measured, numpy, one
    thread: 2-4x faster on the 5x5 stride-2 layers of MXNet's VAE-GAN example).
    """
    n, c, nd = shape[0], shape[1], len(kernel)
    if xp is np and cols.size <= COL2IM_BINCOUNT_MAX:
        targets = _column_sources(tuple(cols.shape), tuple(shape), tuple(kernel),
                                  tuple(stride), tuple(dilate), tuple(pad), last)
        size = math.prod(shape)
        acc = np.bincount(targets, weights=cols.ravel(), minlength=size + 1)[:size]
        return acc.astype(cols.dtype).reshape(shape)
    padded = tuple(s + 2 * p for s, p in zip(shape[2:], pad))
    crop = tuple(slice(p, p + s) for s, p in zip(shape[2:], pad))
    if last:
        out = cols.shape[1 + nd:-1]
        acc = xp.zeros((c,) + padded + (n,), dtype=cols.dtype)
        lead, tail = (slice(None),), (slice(None),)
    else:
        out = cols.shape[2 + nd:]
        acc = xp.zeros((c, n) + padded, dtype=cols.dtype)
        lead, tail = (slice(None), slice(None)), ()
    for offsets in itertools.product(*map(range, kernel)):
        acc[lead + window(offsets, out, stride, dilate) + tail] += cols[(slice(None),) + offsets]
    acc = acc[lead + crop + tail]
    return xp.ascontiguousarray(acc.transpose(batch_to_front(acc.ndim)) if last
                                else acc.swapaxes(0, 1))


# axis orders for moving the batch axis last and back: ``transpose`` with them costs a tenth
# of ``moveaxis``, which checks and normalises its axes in Python on every call
@functools.lru_cache(maxsize=None)
def batch_to_end(ndim: int) -> tuple:
    return tuple(range(1, ndim)) + (0,)


@functools.lru_cache(maxsize=None)
def batch_to_front(ndim: int) -> tuple:
    return (ndim - 1,) + tuple(range(ndim - 1))


def channel_major(xp, a, groups: int, last: bool):
    """``a`` (N, C, *sp) as a contiguous ``(groups, C/groups, N*prod(sp))`` matrix stack.

    Columns are ordered ``(*sp, N)`` when ``last``, else ``(N, *sp)``.
    """
    t = a.transpose(batch_to_end(a.ndim)) if last else a.swapaxes(0, 1)
    return xp.ascontiguousarray(t).reshape(groups, a.shape[1] // groups, -1)


def batch_major(xp, y, n: int, spatial: tuple, last: bool):
    """A channel-major ``(..., N*L)`` result (columns as in :func:`channel_major`) as a
    contiguous ``(N, C, *spatial)`` array."""
    if last:
        y = y.reshape((-1,) + tuple(spatial) + (n,))
        return xp.ascontiguousarray(y.transpose(batch_to_front(y.ndim)))
    return xp.ascontiguousarray(y.reshape((-1, n) + tuple(spatial)).swapaxes(0, 1))


def grouped(w, groups: int):
    """A weight ``(A, B, *kernel)`` as the matrix stack ``(groups, A/groups, B*prod(kernel))``."""
    return w.reshape(groups, w.shape[0] // groups, -1)


def swaps_product(m: int, n: int, k: int) -> bool:
    """Whether ``a @ b^T`` of an ``(M, K)`` and an ``(N, K)`` matrix runs faster as
    ``(b @ a^T)^T`` (see :func:`times_transposed`)."""
    return m < n and k >= max(TRANSPOSED_PRODUCT_MIN_K, m * m / TRANSPOSED_PRODUCT_K_PER_M2)


def times_transposed(xp, a, b, out=None):
    """``a @ b^T`` for matrix stacks ``(G, M, K)`` and ``(G, N, K)`` (a weight gradient: K is
    the batch-times-positions axis), written into ``out`` (a contiguous ``(G, M, N)`` array)
    when it is given.

    With few rows in ``a`` and a long K it is computed as ``(b @ a^T)^T``, the larger matrix
    first, which OpenBLAS runs faster; the transpose copy of the result costs more than that
    saves once M is large against K. Measured (one thread, N 576-4608, K 32-1568): the swap
    takes 0.69-0.86x the time at M=32 from K=98, 0.82-0.94x at M=64 from K=392 (1.02-1.04x at
    98), 0.94x at M=128 and K=1568 (1.02-1.19x below); 1.1-7x at M=256-512 or K=32. With
    OpenBLAS's SkylakeX kernel (the host's overrides unset): 0.88x at M=80-96 and K=392,
    0.97x at M=128 and K=784, 1.02-1.04x at M=96 and K=196 or M=160 and K=392.
    """
    if swaps_product(a.shape[1], b.shape[1], a.shape[2]):
        product = xp.matmul(b, a.swapaxes(1, 2)).swapaxes(1, 2)
        if out is None:
            return xp.ascontiguousarray(product)
        out[...] = product
        return out
    return xp.matmul(a, b.swapaxes(1, 2), out=out)


def cols_size(c: int, kernel: tuple, n: int, out: tuple) -> int:
    """Number of elements of a column buffer."""
    return c * n * math.prod(kernel) * math.prod(out)


def transposed_pad(kernel: tuple, stride: tuple, dilate: tuple, pad: tuple):
    """The padding that turns a stride-1 layer's data gradient into a plain convolution of
    the output gradient with the flipped kernel, or None when there is none (a stride above
    1, or a pad beyond the dilated kernel's reach)."""
    if any(s != 1 for s in stride):
        return None
    full = tuple(d * (k - 1) - p for k, d, p in zip(kernel, dilate, pad))
    return full if all(q >= 0 for q in full) else None


def flipped_transpose(xp, w, groups: int = 1):
    """The weight ``(F, C/G, *kernel)`` of the transposed convolution, flipped, as a
    ``(C, F/G*K)`` matrix (group by group down the rows): a stride-1 layer's data gradient
    convolves the output gradient with it."""
    flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)]
    f, per_group = w.shape[:2]
    blocks = flipped.reshape(groups, f // groups, per_group, -1).swapaxes(1, 2)
    return xp.ascontiguousarray(blocks).reshape(groups * per_group, -1)


def data_grad_as_conv(xp, gy, w, x_shape, kernel, dilate, full_pad, groups: int = 1):
    """Data gradient of a stride-1 convolution as a forward one:
    ``dx = gy (*) flip(w)^T`` over ``gy`` padded by ``full_pad`` (see :func:`transposed_pad`),
    group by group.

    One im2col copy of ``gy`` and one GEMM (per group), where the GEMM-then-col2im route adds
    every kernel offset back into the data with a strided scatter.
    """
    nd = len(kernel)
    wt = flipped_transpose(xp, w, groups)
    spatial = tuple(x_shape[2:])
    last = batch_last(spatial)
    cols = im2col(xp, gy, spatial, kernel, (1,) * nd, dilate, full_pad, last)
    y = xp.matmul(wt.reshape(groups, -1, wt.shape[1]), cols.reshape(groups, wt.shape[1], -1))
    return batch_major(xp, y.reshape(wt.shape[0], -1), x_shape[0], spatial, last)
