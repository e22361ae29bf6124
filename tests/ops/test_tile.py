import numpy as np
import pytest

from raymod.base import AttributeValueError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def tiled(x, reps):
    """Reference: concatenate copies axis by axis (after aligning the ranks)."""
    n = max(x.ndim, len(reps))
    x = x.reshape((1,) * (n - x.ndim) + x.shape)
    for axis, r in enumerate((1,) * (n - len(reps)) + tuple(reps)):
        x = np.concatenate([x] * r, axis=axis)
    return x


@pytest.mark.parametrize("reps", [(2,), (2, 1, 3), (2, 1, 1, 2), ()])
def test_tile(ctx, rng, reps):
    x = rng.standard_normal((3, 1, 2))
    s = op_symbol("tile", ["data"], reps=reps)
    check_forward(s, {"data": x}, tiled(x, reps), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)}, tiled(x, reps).astype(np.float32), ctx)
    assert out[0].dtype == np.float32


def test_tile_bad_reps():
    with pytest.raises(AttributeValueError, match=r"tile: reps=\(2, 0\) must be >= 1"):
        op_symbol("tile", ["data"], reps=(2, 0))
