"""mx.gluon.utils' array helpers (split_data, split_and_load, clip_global_norm) on NDArrays,
with MXNet 1.9.1's behaviour; the expected values are written out here."""
import warnings

import numpy as np
import pytest

import raymod as rm
from raymod.compat import NDArray
from raymod.compat.mxnet import gluon_utils as gu
from raymod.compat.mxnet import ndarray as nd
from raymod.context import gpu_available


def _arrays(rng, dtype=np.float32):
    return [nd.array(rng.standard_normal(s), dtype=dtype) for s in [(3, 4), (5,), (2, 2, 2)]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_global_norm_scales_by_max_norm_over_the_joint_norm(rng, dtype):
    arrays = _arrays(rng, dtype)
    before = [a.asnumpy() for a in arrays]
    norm = np.sqrt(sum((b.astype(np.float64) ** 2).sum() for b in before))
    total = gu.clip_global_norm(arrays, 0.5)
    assert type(total) is np.dtype(dtype).type  # asscalar() of the norm, as MXNet
    assert total == pytest.approx(norm, rel=1e-6)
    for a, b in zip(arrays, before):
        assert isinstance(a, NDArray) and a.dtype == dtype
        np.testing.assert_allclose(a.asnumpy(), b * 0.5 / (norm + 1e-8), rtol=1e-6)
    clipped = np.sqrt(sum((a.asnumpy().astype(np.float64) ** 2).sum() for a in arrays))
    assert clipped == pytest.approx(0.5, rel=1e-6)


def test_clip_global_norm_leaves_arrays_under_max_norm_alone(rng):
    arrays = _arrays(rng)
    before = [a.asnumpy() for a in arrays]
    norm = np.sqrt(sum((b.astype(np.float64) ** 2).sum() for b in before))
    total = gu.clip_global_norm(arrays, norm * 2, check_isfinite=False)
    assert isinstance(total, NDArray) and total.shape == (1,) and total.dtype == np.float32
    assert total.context == rm.cpu(0)
    np.testing.assert_allclose(total.asnumpy(), [norm], rtol=1e-6)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a.asnumpy(), b)


def test_clip_global_norm_3_4_12():
    a, b = nd.array([[3.0, 4.0]]), nd.array([12.0])  # norm 13
    assert gu.clip_global_norm([a, b], 1.0) == 13.0
    np.testing.assert_allclose(a.asnumpy(), [[3 / 13, 4 / 13]], rtol=1e-6)
    np.testing.assert_allclose(b.asnumpy(), [12 / 13], rtol=1e-6)


def test_clip_global_norm_warns_on_nan_and_inf():
    a, b = nd.array([[3.0, np.nan]]), nd.array([12.0])
    with pytest.warns(UserWarning, match="nan or inf") as record:
        total = gu.clip_global_norm([a, b], 1.0)
    assert record[0].filename == __file__  # points at the caller
    assert np.isnan(total) and np.isnan(a.asnumpy()).all() and np.isnan(b.asnumpy()).all()
    a, b = nd.array([[3.0, np.inf]]), nd.array([12.0])
    with pytest.warns(UserWarning, match="nan or inf"):
        assert gu.clip_global_norm([a, b], 1.0) == np.inf
    np.testing.assert_array_equal(b.asnumpy(), [0.0])  # scaled by 1 / inf, as MXNet
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no check: no warning (and no numpy RuntimeWarning)
        total = gu.clip_global_norm([nd.array([np.nan, 1.0])], 1.0, check_isfinite=False)
    assert np.isnan(total.asnumpy()).all()


@pytest.mark.parametrize("call,message", [
    (lambda: gu.clip_global_norm([], 1.0), r"arrays must be a non-empty list.*empty list"),
    (lambda: gu.clip_global_norm([nd.ones(2), 3.0], 1.0), r"arrays\[1\] must be an NDArray.*float"),
    (lambda: gu.clip_global_norm([nd.ones(2)], -1.0), r"max_norm must be a positive.*-1\.0"),
    (lambda: gu.clip_global_norm(nd.ones(2), 1.0), r"arrays must be a non-empty list.*NDArray"),
])
def test_clip_global_norm_bad_input(call, message):
    with pytest.raises((ValueError, TypeError), match=rf"clip_global_norm: {message}"):
        call()


def test_split_data_even_and_uneven():
    data = nd.array(np.arange(24).reshape(6, 4))
    parts = gu.split_data(data, 3)
    assert [p.shape for p in parts] == [(2, 4)] * 3 and all(isinstance(p, NDArray) for p in parts)
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), data.asnumpy())
    parts[0][0, 0] = -1  # axis-0 slices are views, as MXNet's
    assert data.asnumpy()[0, 0] == -1
    uneven = gu.split_data(data, 4, even_split=False)  # the first 6 % 4 slices get one more
    assert [p.shape[0] for p in uneven] == [2, 2, 1, 1]
    np.testing.assert_array_equal(uneven[2].asnumpy(), data.asnumpy()[4:5])
    cols = gu.split_data(data, 2, batch_axis=1)
    assert [c.shape for c in cols] == [(6, 2), (6, 2)]
    np.testing.assert_array_equal(cols[1].asnumpy(), data.asnumpy()[:, 2:])
    assert [c.shape for c in gu.split_data(data, 4, batch_axis=-1)] == [(6, 1)] * 4
    assert len(gu.split_data(data, 1)) == 1
    # more slices than entries: empty ones at the end, as MXNet 1.9.1
    assert [p.shape[0] for p in gu.split_data(data, 8, even_split=False)] == [1] * 6 + [0] * 2


@pytest.mark.parametrize("kwargs,message", [
    ({"num_slice": 4}, r"shape \(6, 4\) has 6 entries along batch_axis 0, not a multiple of "
                       r"num_slice=4.*even_split=False"),
    ({"num_slice": 8}, r"has 6 entries along batch_axis 0, smaller than num_slice=8"),
    ({"num_slice": 3, "batch_axis": 1}, r"4 entries along batch_axis 1, not a multiple of "
                                         r"num_slice=3"),
    ({"num_slice": 0}, r"num_slice must be a positive integer, got 0"),
    ({"num_slice": 2, "batch_axis": 2}, r"batch_axis must be an axis of data of shape "
                                         r"\(6, 4\).*\[-2, 2\).*got 2"),
])
def test_split_data_errors(kwargs, message):
    with pytest.raises(ValueError, match=rf"split_data: .*{message}"):
        gu.split_data(nd.zeros((6, 4)), **kwargs)


def test_split_and_load_one_slice_per_context():
    data = nd.array(np.arange(12.0).reshape(4, 3))
    assert gu.split_and_load(data, [rm.cpu(0)])[0] is data  # one context: the whole array
    parts = gu.split_and_load(data, [rm.cpu(0), rm.cpu(1)])
    assert [p.context for p in parts] == [rm.cpu(0), rm.cpu(1)]
    assert [p.shape for p in parts] == [(2, 3), (2, 3)]
    np.testing.assert_array_equal(parts[1].asnumpy(), data.asnumpy()[2:])
    loaded = gu.split_and_load(np.ones((3, 2), np.float32), [rm.cpu(1)])  # not yet an NDArray
    assert isinstance(loaded[0], NDArray) and loaded[0].context == rm.cpu(1)
    three = gu.split_and_load(data, [rm.cpu(0)] * 3, batch_axis=1)
    assert [p.shape for p in three] == [(4, 1)] * 3
    with pytest.raises(ValueError, match=r"split_data: .*4 entries.*num_slice=3"):
        gu.split_and_load(data, [rm.cpu(0)] * 3)


@pytest.mark.parametrize("ctx_list", [rm.cpu(0), [], ["cpu"]])
def test_split_and_load_needs_a_list_of_contexts(ctx_list):
    with pytest.raises(TypeError, match=r"split_and_load: ctx_list must be a non-empty list "
                                        r"of Contexts.*got"):
        gu.split_and_load(nd.zeros((4, 2)), ctx_list)


@pytest.mark.skipif(not gpu_available(), reason="no CuPy (or stand-in) GPU")
def test_gpu_arrays(rng):
    # on the CuPy stand-in here (it refuses silent host/device mixing), on a GPU for real
    host = rng.standard_normal((4, 3)).astype(np.float32)
    parts = gu.split_and_load(nd.array(host), [rm.gpu(0), rm.cpu(0)])
    assert [p.context for p in parts] == [rm.gpu(0), rm.cpu(0)]
    np.testing.assert_array_equal(parts[0].asnumpy(), host[:2])
    arrays = [nd.array(host, ctx=rm.gpu(0)), nd.array(host[0])]
    norm = np.sqrt((host.astype(np.float64) ** 2).sum() + (host[0].astype(np.float64) ** 2).sum())
    assert gu.clip_global_norm(arrays, 1.0) == pytest.approx(norm, rel=1e-6)
    np.testing.assert_allclose(arrays[0].asnumpy(), host / (norm + 1e-8), rtol=1e-6)
    np.testing.assert_allclose(arrays[1].asnumpy(), host[0] / (norm + 1e-8), rtol=1e-6)
    total = gu.clip_global_norm(arrays, 1.0, check_isfinite=False)
    assert total.context == rm.gpu(0) and total.shape == (1,)
