"""A sparse linear model trained by Module: csr batches and a row_sparse weight give the dense
model's trajectory; a kvstore that runs the optimizer serves the rows prepare() asks for."""
import warnings

import numpy as np
import pytest

import raymod as rm
from raymod.sparse import CSRArray, RowSparseArray, cast_storage

ROWS, WIDTH, BATCH = 96, 40, 16


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = ((rng.random((ROWS, WIDTH)) < 0.1) * rng.standard_normal((ROWS, WIDTH)))
    return x.astype(np.float32), (rng.random(ROWS) < 0.5).astype(np.float32)


def linear(data_stype="default", weight_stype="default"):
    x = rm.sym.Variable("data", stype=data_stype)
    w = rm.sym.Variable("weight", shape=(WIDTH, 2), stype=weight_stype,
                        init=rm.init.Normal(0.1))
    b = rm.sym.Variable("bias", shape=(2,))
    return rm.sym.SoftmaxOutput(rm.sym.broadcast_add(rm.sym.dot(x, w), b), name="softmax")


def batch_rows(batch):
    return {"weight": batch.data[0].indices}


def train(data, sparse, kvstore=None, optimizer=("sgd", {"learning_rate": 0.5}), epochs=2):
    x, y = data
    rm.random.seed(11)
    mod = rm.mod.Module(linear("csr", "row_sparse") if sparse else linear())
    it = rm.io.NDArrayIter(cast_storage(x, "csr") if sparse else x, y, batch_size=BATCH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # prepare() without a kvstore says it is not needed
        mod.fit(it, num_epoch=epochs, optimizer=optimizer[0], optimizer_params=optimizer[1],
                kvstore=kvstore, sparse_row_id_fn=batch_rows if sparse else None)
    return mod


def weight(mod):
    w = mod.get_params()[0]["weight"]
    return w.todense() if isinstance(w, RowSparseArray) else np.asarray(w)


def test_sparse_storage_follows_the_dense_trajectory(data):
    dense, sparse = train(data, False), train(data, True)
    group = sparse._exec_group
    assert isinstance(group.grad_arrays[group.param_names.index("weight")][0], RowSparseArray)
    np.testing.assert_allclose(weight(sparse), weight(dense), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kvstore", ["local", "device"])
def test_a_kvstore_that_updates_serves_prepared_rows(data, kvstore):
    plain = train(data, True)
    kv = rm.kv.create(kvstore)  # a store object: the optimizer runs in it (update_on_kvstore)
    served = train(data, True, kvstore=kv)
    assert served._update_on_kvstore
    np.testing.assert_allclose(weight(served), weight(plain), rtol=1e-5, atol=1e-6)


def test_lazy_adam_touches_only_the_batches_columns(data):
    x, y = data
    x = x.copy()
    x[:, -5:] = 0  # features no row has: their weights must never move
    mod = train((x, y), True, optimizer=("adam", {"learning_rate": 0.01, "wd": 0.1}),
                epochs=1)
    rm.random.seed(11)
    start = rm.mod.Module(linear("csr", "row_sparse"))
    start.bind([("data", (BATCH, WIDTH))], [("softmax_label", (BATCH,))])
    start.init_params()
    np.testing.assert_array_equal(weight(mod)[-5:], weight(start)[-5:])
    assert not np.array_equal(weight(mod)[:5], weight(start)[:5])


def prepared_module():
    mod = rm.mod.Module(linear("csr", "row_sparse"))
    mod.bind([("data", (BATCH, WIDTH))], [("softmax_label", (BATCH,))])
    mod.init_params()
    mod.init_optimizer(kvstore=rm.kv.create("local"))
    return mod


def test_prepare_pulls_only_the_rows_named(data):
    x, y = data
    mod = prepared_module()
    batch = rm.io.DataBatch([cast_storage(x[:BATCH], "csr")], [y[:BATCH]])
    mod.prepare(batch, sparse_row_id_fn=batch_rows)
    held = mod._exec_group.param_arrays[mod._param_names.index("weight")][0]
    np.testing.assert_array_equal(held.indices, np.unique(batch.data[0].indices))


@pytest.mark.parametrize("returned,error,match", [
    ({"wieght": np.arange(3)}, ValueError, "wieght"),
    ([np.arange(3)], TypeError, "dict"),
    ({"weight": np.array([WIDTH + 3])}, ValueError, f"row id {WIDTH + 3}"),
])
def test_a_bad_sparse_row_id_fn_is_refused_before_any_pull(data, returned, error, match):
    mod = prepared_module()
    held = mod._exec_group.param_arrays[mod._param_names.index("weight")][0]
    before = held.indices.copy()
    with pytest.raises(error, match=match):
        mod.prepare(None, sparse_row_id_fn=lambda batch: returned)
    np.testing.assert_array_equal(held.indices, before)


def test_checkpoint_of_a_row_sparse_model_resumes(tmp_path, data):
    mod = train(data, True, epochs=1)
    prefix = str(tmp_path / "lin")
    mod.save_checkpoint(prefix, 1)
    loaded = rm.mod.Module.load(prefix, 1)
    loaded.bind([("data", (BATCH, WIDTH))], [("softmax_label", (BATCH,))])
    np.testing.assert_allclose(weight(loaded), weight(mod))
    # stored as MXNet stores a row_sparse parameter: a row_sparse record of every row
    saved = rm.ndarray_io.load(prefix + "-0001.params")
    assert isinstance(saved["arg:weight"], RowSparseArray)
    np.testing.assert_array_equal(saved["arg:weight"].indices, np.arange(WIDTH))
    assert isinstance(saved["arg:bias"], np.ndarray)


def test_csr_batches_refuse_bad_indices():
    with pytest.raises(ValueError, match="indices must lie in"):
        CSRArray(np.ones(2), [0, WIDTH], [0, 1, 2], (2, WIDTH))
    with pytest.raises(ValueError, match="ascending"):
        CSRArray(np.ones(2), [3, 1], [0, 2], (1, WIDTH))
