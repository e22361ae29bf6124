import numpy as np
import pytest

from raymod.context import as_numpy
from raymod.ops.padding import constant_pad


@pytest.mark.parametrize("widths,value", [([(0, 0), (1, 2), (3, 0)], 0),
                                          ([(0, 0), (0, 0), (0, 0)], 0),
                                          ([(2, 1), (0, 0), (1, 1)], -np.inf)])
def test_constant_pad_matches_numpy_pad(ctx, rng, widths, value):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out = constant_pad(ctx.xp, ctx.xp.asarray(x), widths, value)
    expected = np.pad(x, widths, constant_values=value)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(as_numpy(out), expected)


def test_constant_pad_bad_widths():
    with pytest.raises(ValueError, match="widths must be 2 non-negative"):
        constant_pad(np, np.zeros((2, 2)), [(1, 1)])
    with pytest.raises(ValueError, match="non-negative"):
        constant_pad(np, np.zeros((2, 2)), [(1, 1), (-1, 0)])
