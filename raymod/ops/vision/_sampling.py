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


def _axis_neighbours(xp, coord, size: int):
    """The lower and upper whole positions around ``coord`` along one axis of ``size``.

    Returns two ``(position, weight, inside, sign)``: the position as an integer index (0 when
    outside the axis, or NaN), the interpolation weight, zeroed outside, the inside mask,
    and the sign of the weight's derivative with respect to ``coord``.
    """
    low = xp.floor(coord)
    frac = coord - low
    out = []
    for step, weight, sign in ((0, 1 - frac, -1), (1, frac, 1)):
        pos = low + step
        inside = (pos >= 0) & (pos <= size - 1)
        out.append((xp.where(inside, pos, 0).astype(xp.int64), weight * inside, inside, sign))
    return out


def _neighbours(xp, grid, height: int, width: int):
    """The four pixels around each grid point of ``grid`` (N, 2, ...), with their weights.

    Yields per neighbour ``(index, weight, x_terms, y_terms)``: ``index`` (N, P) into a
    flattened ``height*width`` map (pixel 0 where outside), ``weight`` its bilinear weight
    (zero outside the image), and the ``(weight, inside, sign)`` of each axis from
    :func:`_axis_neighbours`, which the grid gradient needs. Indices are formed in integers
    (float32 is inexact past 2**24 pixels).
    """
    n = grid.shape[0]
    x = ((grid[:, 0] + 1) * (width - 1) / 2).reshape(n, -1)
    y = ((grid[:, 1] + 1) * (height - 1) / 2).reshape(n, -1)
    columns = _axis_neighbours(xp, x, width)
    for row, wy, in_y, sy in _axis_neighbours(xp, y, height):
        row = row * width
        for col, wx, in_x, sx in columns:
            yield row + col, wy * wx, (wx, in_x, sx), (wy, in_y, sy)


def _offsets(xp, n: int, c: int, size: int):
    """(N, C, 1) start of each (sample, channel) map in a flattened (N, C, size) array."""
    return (xp.arange(n * c, dtype=xp.int64) * size).reshape(n, c, 1)


def _gather(xp, flat, base, index):
    """``data[n, c, index[n, p]]`` from the raveled data: (N, C, P).

    One ``take`` on flat indices (``base`` from :func:`_offsets`); about 3x faster with numpy
    than broadcast fancy indexing over three axes.
    """
    return xp.take(flat, base + index[:, None, :])


def bilinear_sample(xp, data, grid):
    """Sample ``data`` (N, C, H, W) at ``grid`` (N, 2, Ho, Wo): (N, C, Ho, Wo)."""
    n, c, h, w = data.shape
    flat, base = data.reshape(-1), _offsets(xp, n, c, h * w)
    out = None
    for index, weight, _, _ in _neighbours(xp, grid, h, w):
        term = _gather(xp, flat, base, index) * weight[:, None, :]
        out = term if out is None else out + term
    return out.reshape((n, c) + grid.shape[2:])


def bilinear_sample_grad(xp, grad, data, grid, need_data: bool, need_grid: bool):
    """Gradients of :func:`bilinear_sample` for ``data`` and ``grid`` (None where not needed).

    The data gradient scatters ``grad * weight`` back onto the four neighbours with
    ``xp.add.at``, which sums repeated indices; CuPy has it since version 12 (raymod needs
    13), and with numpy >= 1.25 it is about three times faster than a ``bincount``.
    """
    n, c, h, w = data.shape
    flat, base = data.reshape(-1), _offsets(xp, n, c, h * w)
    g = grad.reshape(n, c, -1)
    gdata = xp.zeros(data.size, data.dtype) if need_data else None
    gx = gy = 0
    for index, weight, (wx, in_x, sx), (wy, in_y, sy) in _neighbours(xp, grid, h, w):
        if need_data:
            xp.add.at(gdata, (base + index[:, None, :]).ravel(), (g * weight[:, None, :]).ravel())
        if need_grid:
            # d out / d x = sum over the in-image neighbours of value * wy * sx; alike for y
            gv = (g * _gather(xp, flat, base, index)).sum(axis=1)
            gx = gx + (sx * gv * in_x) * wy
            gy = gy + (sy * gv * in_y) * wx
    ggrid = None
    if need_data:
        gdata = gdata.reshape(data.shape)
    if need_grid:
        ggrid = xp.stack([gx * ((w - 1) / 2), gy * ((h - 1) / 2)], axis=1).reshape(grid.shape)
        ggrid = ggrid.astype(grid.dtype, copy=False)
    return gdata, ggrid
