"""Per-channel sums (BatchNorm's statistics, depthwise weight gradients) against the formula."""
import numpy as np
import pytest

from raymod.context import as_numpy
from raymod.ops.nn import _channel_sums
from raymod.ops.nn._channel_sums import channel_sums
from raymod.test_utils import assert_almost_equal

CASES = [  # shape, channel axis: every branch of channel_sums
    ((2, 3, 4, 5), 1),    # rows of 20: short (multiplied out, one product)
    ((1, 4, 21, 20), 1),  # one leading row of 420: a batched dot per row
    ((3, 2, 25, 17), 1),  # several leading rows of 425
    ((2, 5, 7), 2),       # channels last
    ((6, 4), 1),          # (N, C): channels last too
    ((4, 3, 6), 0),       # channels first: no leading axes
    ((2, 3, 20), 1),      # BatchNorm's (lead, C, L) rows, used as given: short
    ((1, 4, 420), 1),     # ... one leading row, long
    ((3, 2, 425), 1),     # ... several leading rows, long
    ((5, 3, 1), 1),       # ... rows of one position: channels last
]


@pytest.mark.parametrize("scale", [1.0, 0.375])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", CASES)
def test_channel_sums(ctx, rng, shape, axis, dtype, scale):
    """``scale * sum(a)`` and ``scale * sum(a * b)`` over every axis but ``axis``."""
    xp = ctx.xp
    a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    others = tuple(i for i in range(len(shape)) if i != axis)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    got = channel_sums(xp, axis, xp.asarray(a), scale=scale)
    assert got.shape == (shape[axis],) and got.dtype == dtype
    assert_almost_equal(as_numpy(got), scale * a.sum(others, dtype=np.float64), rtol=rtol,
                        atol=rtol)
    got = channel_sums(xp, axis, xp.asarray(a), xp.asarray(b), scale=scale)
    assert_almost_equal(as_numpy(got), scale * (a.astype(np.float64) * b).sum(others),
                        rtol=rtol, atol=rtol)


def test_long_and_short_rows_take_their_branches(monkeypatch):
    """Rows from ``ROW_DOT_MIN`` long take the batched dot; shorter ones the product."""
    a = np.ones((2, 3, 20), np.float32)
    for limit, batched in ((21, False), (20, True)):
        monkeypatch.setattr(_channel_sums, "ROW_DOT_MIN", limit)
        calls = []
        real = np.matmul

        def spy(x, y, *args, **kw):
            calls.append(x.ndim)
            return real(x, y, *args, **kw)
        monkeypatch.setattr(_channel_sums.np, "matmul", spy)
        assert_almost_equal(channel_sums(np, 1, a, a), np.full(3, 40.0, np.float32))
        monkeypatch.setattr(_channel_sums.np, "matmul", real)
        assert (4 in calls) == batched  # the batched dot multiplies (lead, C, 1, L) stacks


@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("scale", [1.0, 0.375])
def test_channel_sums_into_out(ctx, rng, shape, axis, scale):
    """With ``out`` the (scaled) sums are written there, and it is what comes back."""
    xp = ctx.xp
    a = rng.standard_normal(shape).astype(np.float32)
    out = xp.full((shape[axis],), np.nan, np.float32)
    got = channel_sums(xp, axis, xp.asarray(a), out=out, scale=scale)
    assert got is out
    others = tuple(i for i in range(len(shape)) if i != axis)
    assert_almost_equal(as_numpy(out), scale * a.sum(others, dtype=np.float64), rtol=1e-5,
                        atol=1e-5)


def test_filled_vectors_are_cached_read_only():
    """numpy's vectors of a value are made once per (length, dtype, value), read-only: a
    caller that wrote into one would change every later sum."""
    v = _channel_sums.filled_vector(np, 5, np.float32, 0.5)
    assert v is _channel_sums.filled_vector(np, 5, np.float32, 0.5)
    assert not v.flags.writeable and (v == 0.5).all() and v.dtype == np.float32
    assert _channel_sums.filled_vector(np, 5, np.float32, 0.25) is not v
    assert (_channel_sums.ones_vector(np, 5, np.float32) == 1).all()


def test_rows_times_a_factor_of_another_shape():
    """``b`` need only hold as many values as ``a``: given (lead, C, L) rows, a 4-D ``b`` of
    the same values is laid out as the rows."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 20)).astype(np.float32)
    b = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = channel_sums(np, 1, a, b)
    assert_almost_equal(got, (a.astype(np.float64) * b.reshape(a.shape)).sum((0, 2)),
                        rtol=1e-5, atol=1e-5)
