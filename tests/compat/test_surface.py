"""raymod.compat.mxnet's own surface: NDArray methods, mx.nd, mx.test_utils, mx.base, the
stand-ins for left-out features, and NDArray results from modules and iterators."""
import os

import numpy as np
import pytest

import raymod as rm
import raymod.compat.mxnet as mx
from raymod.compat import NotSupportedError


def test_ndarray_methods():
    a = mx.nd.array([[1, 2], [3, 4]])
    assert isinstance(a, mx.nd.NDArray) and isinstance(a, np.ndarray)
    assert a.dtype == np.float32 and a.context == mx.cpu() and a.ctx == mx.cpu(0)
    host = a.asnumpy()
    assert type(host) is np.ndarray
    host[0, 0] = 9  # a copy
    assert a[0, 0] == 1
    assert (a * 2).sum().asscalar() == 20  # numpy keeps the subclass through arithmetic
    assert a.astype("float32", copy=False) is a
    assert a.astype("float64").dtype == np.float64
    assert a.as_in_context(mx.cpu()) is a
    b = mx.nd.zeros((2, 2))
    assert a.copyto(b) is b and np.array_equal(b, a)
    c = a.copyto(mx.cpu())
    assert c is not a and np.array_equal(c, a)
    assert a.stype == "default" and a.tostype("default") is a
    a.wait_to_read()
    csr = a.tostype("csr")  # sparse storage: see test_sparse_ndarray.py
    assert csr.stype == "csr" and isinstance(csr, mx.nd.NDArray) and np.array_equal(csr.asnumpy(), a)
    with pytest.raises(NotSupportedError, match="NDArray.attach_grad: autograd"):
        a.attach_grad()
    with pytest.raises(ValueError, match="exactly one element"):
        a.asscalar()


def test_nd_creation_and_numpy_functions():
    # as MXNet: a numpy source becomes float32, an NDArray source keeps its dtype
    assert mx.nd.array(np.arange(3, dtype=np.int64)).dtype == np.float32
    assert mx.nd.array(mx.nd.array([1, 2], dtype="int64")).dtype == np.int64
    assert mx.nd.array([1, 2]).dtype == np.float32  # lists: float32
    np.testing.assert_array_equal(mx.nd.ones((2, 3), dtype="int32"), np.ones((2, 3)))
    np.testing.assert_array_equal(mx.nd.full((2,), 7), [7, 7])
    np.testing.assert_array_equal(mx.nd.arange(0, 3, repeat=2), [0, 0, 1, 1, 2, 2])
    assert mx.nd.empty((2, 5)).shape == (2, 5)
    x, y = mx.nd.ones((2, 3)), mx.nd.zeros((2, 1))
    assert mx.nd.concat(x, y).shape == (2, 4)  # MXNet's default dim=1
    assert mx.nd.concat(x, x, dim=0).shape == (4, 3)
    s = mx.nd.sum(x, axis=0)
    assert isinstance(s, mx.nd.NDArray) and np.array_equal(s, [2, 2, 2])
    np.testing.assert_array_equal(mx.nd.broadcast_add(x, y), x)
    np.testing.assert_array_equal(mx.nd.one_hot(mx.nd.array([0, 2, 5]), 3),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    parts = mx.nd.split(mx.nd.arange(0, 6).reshape(2, 3), num_outputs=3, axis=1)
    assert len(parts) == 3 and parts[2].shape == (2, 1)
    fc = mx.nd.FullyConnected(mx.nd.ones((2, 3)), mx.nd.ones((4, 3)), mx.nd.zeros(4),
                              num_hidden=4)
    assert isinstance(fc, mx.nd.NDArray) and np.array_equal(fc, np.full((2, 4), 3.0))
    z = mx.nd.zeros((2, 2), stype="csr")
    assert z.stype == "csr" and z.nnz == 0 and np.array_equal(z.asnumpy(), np.zeros((2, 2)))
    with pytest.raises(TypeError, match="ctx must be a Context"):
        mx.nd.zeros((2,), ctx="cpu")


def test_nd_save_load_round_trip(tmp_path):
    path = str(tmp_path / "a.params")
    mx.nd.save(path, {"w": mx.nd.array([[1, 2]]), "b": mx.nd.zeros((3,), dtype="float64")})
    back = mx.nd.load(path)
    assert set(back) == {"w", "b"} and isinstance(back["w"], mx.nd.NDArray)
    np.testing.assert_array_equal(back["w"], [[1, 2]])
    assert back["b"].dtype == np.float64
    mx.nd.save(path, mx.nd.ones((2,)))  # one array: a list of one
    assert [a.tolist() for a in mx.nd.load(path)] == [[1.0, 1.0]]


def test_test_utils_and_base():
    tu = mx.test_utils
    tu.assert_almost_equal(np.float32(1.0), np.float32(1.00005))  # float32: rtol 1e-4
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.float64(1.0), np.float64(1.0001))  # float64: rtol 1e-5
    assert tu.same(mx.nd.ones(2), np.ones(2)) and not tu.same(np.ones(2), np.ones(3))
    assert tu.almost_equal(np.ones(2), np.ones(2) + 1e-9)
    r = tu.rand_ndarray((3, 4))
    assert isinstance(r, mx.nd.NDArray) and r.shape == (3, 4) and r.dtype == np.float32
    rsp = tu.rand_ndarray((3, 4), "row_sparse", density=1)
    assert rsp.stype == "row_sparse" and rsp.shape == (3, 4) and rsp.indices.shape == (3,)
    assert all(1 <= d <= 5 for d in tu.rand_shape_nd(4, 5))
    assert tu.default_context() == mx.cpu()
    try:
        tu.set_default_context(mx.cpu(3))
        assert tu.default_context() == mx.cpu(3) and mx.nd.zeros(1).context == mx.cpu(0)
        with mx.cpu(1):
            assert tu.default_context() == mx.cpu(1)
        tu.set_default_context(mx.cpu(0))
        assert rm.current_context() == mx.cpu(0)
    finally:
        from raymod.context import _entered_stack
        _entered_stack().clear()
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError, match="did not raise"):
        tu.assert_exception(lambda: 1, ZeroDivisionError)
    with tu.environment("RAYMOD_COMPAT_PROBE", "1"):
        assert os.environ["RAYMOD_COMPAT_PROBE"] == "1"
    assert "RAYMOD_COMPAT_PROBE" not in os.environ
    assert mx.base._as_list(3) == [3] and mx.base._as_list((1, 2)) == (1, 2)
    assert mx.base.MXNetError is rm.MXNetError and mx.__version__ == "1.9.1"


def test_download_only_finds_files_already_there(tmp_path):
    (tmp_path / "f.zip").write_bytes(b"x")
    got = mx.test_utils.download("http://example.invalid/f.zip", dirname=str(tmp_path))
    assert got == str(tmp_path / "f.zip")
    with pytest.raises(NotSupportedError, match="downloading"):
        mx.test_utils.download("http://example.invalid/g.zip", dirname=str(tmp_path))


def test_names_map_onto_raymod_and_left_out_features_name_the_call():
    assert mx.sym is rm.sym and mx.symbol is rm.symbol and mx.metric is rm.metric
    assert mx.optimizer is rm.optimizer and mx.init is rm.initializer and mx.kv is rm.kvstore
    assert issubclass(mx.mod.Module, rm.mod.Module) and mx.mod.Module.__name__ == "Module"
    assert issubclass(mx.io.NDArrayIter, rm.io.NDArrayIter)
    assert mx.contrib.svrg_optimization.svrg_module.SVRGModule.__mro__[2] is rm.mod.SVRGModule
    with pytest.raises(NotSupportedError, match=r"mxnet.gluon.Trainer: Gluon"):
        mx.gluon.Trainer
    with pytest.raises(NotSupportedError, match=r"mxnet.autograd.record: autograd"):
        mx.autograd.record()
    assert mx.nd.sparse.csr_matrix((2, 3)).stype == "csr"  # sparse storage is provided
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        mx.nonexistent


def test_module_and_iterator_results_are_ndarrays_sharing_memory():
    x = np.random.RandomState(0).rand(8, 3).astype(np.float32)
    it = mx.io.NDArrayIter(x, np.zeros(8, np.float32), batch_size=4)
    batch = next(it)
    assert isinstance(batch.data[0], mx.nd.NDArray) and isinstance(batch.label[0], mx.nd.NDArray)
    np.testing.assert_array_equal(batch.data[0].asnumpy(), x[:4])
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(net, label_names=None)
    mod.bind(data_shapes=it.provide_data)
    mod.init_params(mx.init.One())
    mod.forward(batch, is_train=False)
    out = mod.get_outputs()[0]
    assert isinstance(out, mx.nd.NDArray)
    assert np.shares_memory(out, rm.mod.Module.get_outputs(mod)[0])  # a view, not a copy
    expected = np.repeat(x[:4].sum(1, keepdims=True), 2, 1)  # weights 1, bias 0
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-6)
    args, _ = mod.get_params()
    assert isinstance(args["fc_weight"], mx.nd.NDArray)
    assert all(isinstance(p, mx.nd.NDArray) for p in mod.predict(it, merge_batches=False)[0])
    for outs, _, b in mod.iter_predict(it):
        assert isinstance(outs[0], mx.nd.NDArray) and isinstance(b.data[0], mx.nd.NDArray)


def test_random_samplers_mxnet_tests_use():
    # mx.nd.random.randn(*shape), mx.random.poisson(lam, shape), exponential(scale, shape):
    # seeded, NDArrays, and with the moments of their distributions
    mx.random.seed(3)
    first = mx.nd.random.randn(400, 50)
    mx.random.seed(3)
    np.testing.assert_array_equal(first, mx.nd.random.randn(400, 50))
    assert isinstance(first, mx.nd.NDArray) and first.dtype == np.float32
    assert abs(float(first.mean())) < 0.02 and abs(float(first.std()) - 1) < 0.02
    counts = mx.random.poisson(lam=4, shape=(20000, 1))
    assert counts.shape == (20000, 1) and np.all(counts == np.round(counts))
    assert abs(float(counts.mean()) - 4) < 0.06 and abs(float(counts.var()) - 4) < 0.2
    waits = mx.nd.random.exponential(2.0, shape=(20000,))
    assert abs(float(waits.mean()) - 2) < 0.06 and float(waits.min()) >= 0
    out = mx.nd.zeros((3,))
    assert mx.random.poisson(lam=1, out=out) is out
