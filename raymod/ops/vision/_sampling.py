"""Helpers shared by GridGenerator, BilinearSampler and SpatialTransformer (not an op module).

Coordinates follow MXNet: a sampling grid holds, per output pixel, the source position
``(x, y)`` normalised to ``[-1, 1]``, where -1 and 1 are the centres of the first and last
pixel (``x_pixel = (x + 1) * (W - 1) / 2``). Neighbours outside the image read as zero.
"""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError


def check_target_shape(op: str, target: tuple) -> tuple[int, int]:
    """``target_shape`` as (H, W), each at least 2 (MXNet divides by ``size - 1``)."""
    if len(target) != 2 or any(t is None or t < 2 for t in target):
        raise AttributeValueError(f"{op}: target_shape must be the output (H, W), each >= 2 "
                                  f"(a size-1 axis has no normalised coordinates), "
                                  f"got {target}")
    return tuple(target)


def check_grid_axes(what: str, shape: tuple) -> None:
    """Warp fields need at least two pixels per spatial axis to normalise coordinates."""
    if any(0 < d < 2 for d in shape[2:]):
        raise ShapeError(f"{what} {shape} needs height and width >= 2 to normalise its "
                         f"coordinates to [-1, 1]")


def affine_target_grid(xp, height: int, width: int, dtype):
    """(3, height*width): normalised x and y of every target pixel (row-major), and ones."""
    grid = xp.ones((3, height, width), dtype)
    grid[0] = (-1 + xp.arange(width, dtype=dtype) * (2 / (width - 1)))[None, :]
    grid[1] = (-1 + xp.arange(height, dtype=dtype) * (2 / (height - 1)))[:, None]
    return grid.reshape(3, height * width)


def corners(xp, grid, height: int, width: int):
    """The four pixels around each point of ``grid`` (N, 2, ...), all at once.

    Returns ``(index, weight, axis_weight, inside)``: ``index`` (2, 2, N, P), indexed
    [row step, column step], the flat pixel of each neighbour in a ``height*width`` map (0
    where outside; formed in integers, as float32 is inexact past 2**24 pixels); ``weight``
    (2, 2, N, P) its bilinear weight, zero outside the image; and per step and axis (2, N,
    2, P; axis 0 is x) the one-axis weight (zeroed outside) and whether the position is
    inside, which the grid gradient needs.
    """
    n = grid.shape[0]
    dtype = grid.dtype
    half = xp.asarray([[(width - 1) / 2], [(height - 1) / 2]], dtype=dtype)
    coord = (grid.reshape(n, 2, -1) + 1) * half  # pixel x and y
    low = xp.floor(coord)
    frac = coord - low
    # the lower (step 0) and upper (step 1) neighbour on each axis, by broadcasting against
    # (2, 1, 1, 1) step arrays (cheaper than stacking two arrays)
    step = xp.asarray([0, 1], dtype=dtype).reshape(2, 1, 1, 1)
    pos = low + step
    inside = (pos >= 0) & (pos <= 2 * half)
    axis_weight = frac * (2 * step - 1) + (1 - step)  # 1 - frac, frac
    axis_weight *= inside
    whole = xp.where(inside, pos, 0).astype(xp.int64)
    index = whole[:, None, :, 1] * width + whole[None, :, :, 0]
    weight = axis_weight[:, None, :, 1] * axis_weight[None, :, :, 0]
    return index, weight, axis_weight, inside


def _offsets(xp, n: int, c: int, size: int):
    """(N, C, 1) start of each (sample, channel) map in a flattened (N, C, size) array."""
    return (xp.arange(n * c, dtype=xp.int64) * size).reshape(n, c, 1)


def _flat_index(xp, shape, index):
    """Flat indices into raveled data of ``shape`` (N, C, H, W) of the pixels ``index``
    (2, 2, N, P) in every channel: (2, 2, N, C, P)."""
    n, c, h, w = shape
    return _offsets(xp, n, c, h * w) + index[:, :, :, None, :]


def _gather(xp, data, index):
    """``data[n, c, index[..., n, p]]``: (2, 2, N, C, P), one ``take`` on flat indices (about
    3x faster with numpy than broadcast fancy indexing); and those indices."""
    flat = _flat_index(xp, data.shape, index)
    return xp.take(data.reshape(-1), flat), flat


def bilinear_sample(xp, data, grid):
    """Sample ``data`` (N, C, H, W) at ``grid`` (N, 2, Ho, Wo): (N, C, Ho, Wo), and the
    :func:`corners` that the gradient reuses."""
    n, c, h, w = data.shape
    near = corners(xp, grid, h, w)
    values, _ = _gather(xp, data, near[0])
    values *= near[1][:, :, :, None, :]
    out = values.sum(axis=(0, 1))
    return out.reshape((n, c) + grid.shape[2:]), near


def bilinear_sample_grad(xp, grad, data, grid_shape, near, need_data: bool, need_grid: bool):
    """Gradients of :func:`bilinear_sample` for ``data`` and the grid (of ``grid_shape``;
    None where not needed), from the ``near`` :func:`corners` it used.

    The data gradient scatters ``grad * weight`` onto the four neighbours with one
    ``xp.add.at``, which sums repeated indices (CuPy has it since version 12; raymod needs
    13). The grid gradient is that of the piecewise-bilinear forward, one-sided at whole
    pixel positions, as MXNet's.
    """
    n, c, h, w = data.shape
    index, weight, axis_weight, inside = near
    g = grad.reshape(n, c, -1)
    gdata = ggrid = None
    values, flat = _gather(xp, data, index) if need_grid else (None, None)
    if need_data:
        if flat is None:
            flat = _flat_index(xp, data.shape, index)
        gdata = xp.zeros(data.size, data.dtype)
        xp.add.at(gdata, flat.ravel(), (g * weight[:, :, :, None, :]).ravel())
        gdata = gdata.reshape(data.shape)
    if need_grid:
        # d out / d x = sum over the in-image neighbours of value * wy * (-1 or +1 per
        # column step); alike for y
        gv = (values * g).sum(axis=3)  # (2, 2, N, P)
        sign = xp.asarray([-1, 1], dtype=axis_weight.dtype).reshape(2, 1, 1)
        slope = inside * sign[:, :, None]  # (2, N, 2, P)
        gx = ((gv * axis_weight[:, None, :, 1]).sum(axis=0) * slope[:, :, 0]).sum(axis=0)
        gy = ((gv * axis_weight[None, :, :, 0]).sum(axis=1) * slope[:, :, 1]).sum(axis=0)
        ggrid = xp.stack([gx * ((w - 1) / 2), gy * ((h - 1) / 2)], axis=1).reshape(grid_shape)
        ggrid = ggrid.astype(axis_weight.dtype, copy=False)
    return gdata, ggrid
