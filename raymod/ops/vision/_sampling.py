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


def _neighbours(xp, grid, height: int, width: int):
    """The four pixels around each grid point, as flat indices, weights and signs.

    Yields ``(index, weight, valid, wx, wy, sx, sy)`` per neighbour: ``index`` (N, P) into a
    flattened ``height*width`` map (0 where ``valid`` is false), ``weight = wx * wy * valid``,
    ``wx``/``wy`` the per-axis interpolation weights and ``sx``/``sy`` (+1 or -1) the sign of
    their derivative with respect to the pixel coordinate.
    """
    n = grid.shape[0]
    x = ((grid[:, 0] + 1) * (width - 1) / 2).reshape(n, -1)
    y = ((grid[:, 1] + 1) * (height - 1) / 2).reshape(n, -1)
    x0, y0 = xp.floor(x), xp.floor(y)
    fx, fy = x - x0, y - y0
    for dy in (0, 1):
        yi = y0 + dy
        wy, sy = (fy, 1) if dy else (1 - fy, -1)
        for dx in (0, 1):
            xi = x0 + dx
            wx, sx = (fx, 1) if dx else (1 - fx, -1)
            valid = (xi >= 0) & (xi <= width - 1) & (yi >= 0) & (yi <= height - 1)
            # invalid (and NaN) positions are sent to pixel 0 with weight 0; the flat index
            # is formed in integers (float32 is inexact past 2**24 pixels)
            index = (xp.where(valid, yi, 0).astype(xp.int64) * width
                     + xp.where(valid, xi, 0).astype(xp.int64))
            yield index, wx * wy * valid, valid, wx, wy, sx, sy


def _gather(xp, flat, index):
    """``flat[n, c, index[n, p]]`` for flat (N, C, L) and index (N, P): (N, C, P)."""
    n, c = flat.shape[:2]
    return flat[xp.arange(n)[:, None, None], xp.arange(c)[None, :, None], index[:, None, :]]


def bilinear_sample(xp, data, grid):
    """Sample ``data`` (N, C, H, W) at ``grid`` (N, 2, Ho, Wo): (N, C, Ho, Wo)."""
    n, c, h, w = data.shape
    flat = data.reshape(n, c, h * w)
    out = None
    for index, weight, *_ in _neighbours(xp, grid, h, w):
        term = _gather(xp, flat, index) * weight[:, None, :]
        out = term if out is None else out + term
    return out.reshape((n, c) + grid.shape[2:])


def bilinear_sample_grad(xp, grad, data, grid, need_data: bool, need_grid: bool):
    """Gradients of :func:`bilinear_sample` for ``data`` and ``grid`` (None where not needed).

    The data gradient scatters ``grad * weight`` back onto the four neighbours with one
    ``bincount`` per neighbour: it works alike on numpy and CuPy (``xp.add.at`` is missing
    from older CuPy) and sums repeated indices in float64.
    """
    n, c, h, w = data.shape
    flat = data.reshape(n, c, h * w)
    g = grad.reshape(n, c, -1)
    gdata = gx = gy = None
    base = (xp.arange(n * c) * (h * w)).reshape(n, c, 1)
    for index, weight, valid, wx, wy, sx, sy in _neighbours(xp, grid, h, w):
        if need_data:
            part = xp.bincount((base + index[:, None, :]).ravel(),
                               weights=(g * weight[:, None, :]).ravel(), minlength=n * c * h * w)
            gdata = part if gdata is None else gdata + part
        if need_grid:
            # d out / d x_pixel = sum over neighbours of value * wy * sx (and alike for y)
            gv = (g * _gather(xp, flat, index)).sum(axis=1) * valid
            gx = sx * gv * wy if gx is None else gx + sx * gv * wy
            gy = sy * gv * wx if gy is None else gy + sy * gv * wx
    if need_data:
        gdata = gdata.astype(data.dtype, copy=False).reshape(data.shape)
    ggrid = None
    if need_grid:
        ggrid = xp.stack([gx * ((w - 1) / 2), gy * ((h - 1) / 2)], axis=1).reshape(grid.shape)
        ggrid = ggrid.astype(grid.dtype, copy=False)
    return gdata, ggrid
