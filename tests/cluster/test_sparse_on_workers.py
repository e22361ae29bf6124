"""Sparse models on Ray workers: csr batches, row_sparse tables split over two KVServer
shards by row range, each worker pulling only the rows its slices read and pushing only the
rows they touched. The trajectory is the one-process run's, with a worker and a server
killed too."""
import numpy as np
import pytest
import ray

import raymod as rm
from raymod.sparse import CSRArray, RowSparseArray, cast_storage

from actors import wait_until_dead

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

ROWS, WIDTH, BATCH, FACTORS = 160, 60, 16, 3
STEPS_PER_EPOCH = ROWS // BATCH


def data():
    rng = np.random.default_rng(4)
    x = (rng.random((ROWS, WIDTH)) < 0.08) * rng.standard_normal((ROWS, WIDTH))
    x[:, -6:] = 0  # features no row has: their table rows must never move
    return cast_storage(x.astype(np.float32), "csr"), \
        (rng.random((ROWS, 1)) < 0.5).astype(np.float32)


def factorization_machine():
    """MXNet's example/sparse factorization machine, at a small width."""
    x = rm.sym.Variable("data", stype="csr")
    v = rm.sym.Variable("v", shape=(WIDTH, FACTORS), stype="row_sparse",
                        init=rm.init.Normal(0.1))
    w = rm.sym.Variable("w", shape=(WIDTH, 1), stype="row_sparse", init=rm.init.Normal(0.1))
    w0 = rm.sym.Variable("w0", shape=(1,), init=rm.init.Normal(0.1))
    w1 = rm.sym.broadcast_add(rm.sym.dot(x, w), w0)
    bd_sum = rm.sym.dot(rm.sym.square(x), rm.sym._square_sum(v, axis=1, keepdims=True))
    w_all = rm.sym.Concat(w1, 0.5 * rm.sym.square(rm.sym.dot(x, v)), dim=1)
    model = rm.sym.sum(w_all, axis=1, keepdims=True) - 0.5 * bd_sum
    return rm.sym.LogisticRegressionOutput(model, rm.sym.Variable("softmax_label"))


def fit(close=None, workers=None, kvstore=None, on_batch=None, epochs=2):
    x, y = data()
    rm.random.seed(3)
    mod = rm.mod.Module(factorization_machine(), workers=workers)
    if close is not None:
        close(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=1), num_epoch=epochs,
            optimizer="adam", optimizer_params={"learning_rate": 0.05, "wd": 1e-3},
            kvstore=kvstore, batch_end_callback=on_batch, eval_metric="mse")
    return mod, {k: np.array(v) for k, v in mod.get_params()[0].items()}


@pytest.fixture(scope="module")
def reference():
    mod, params = fit()
    return params


def assert_close(a, b, tol=1e-5):
    for name in a:
        err = np.abs(a[name] - b[name]).max() / max(np.abs(a[name]).max(), 1e-3)
        assert err < tol, f"{name}: max relative difference {err:.2e}"


def test_two_workers_two_shards_follow_the_one_process_run(close_modules, reference):
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    mod, got = fit(close_modules, workers=2, kvstore=kv)
    assert kv.layout.is_table("v") and kv.layout.is_table("w")
    assert [s for s, _, _ in kv.layout.table_ranges("v")] == [0, 1]
    assert_close(reference, got)
    # lazy updates: rows of features no batch holds keep their initial values
    rm.random.seed(3)
    start = rm.mod.Module(factorization_machine())
    start.bind([("data", (BATCH, WIDTH))], [("softmax_label", (BATCH, 1))])
    start.init_params()
    np.testing.assert_array_equal(got["v"][-6:], start.get_params()[0]["v"][-6:])


def test_a_worker_and_a_server_killed_keep_the_trajectory(close_modules, reference):
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    killed = []

    def on_batch(param):
        step = param.epoch * STEPS_PER_EPOCH + param.nbatch
        pool = param.locals["self"]._pool
        if step == 4:  # a worker, between steps
            rank = sorted(pool.workers)[0]
            ray.kill(pool.workers[rank], no_restart=True)
            killed.append(("worker", rank))
        if step == 12:  # a server shard: restored from the snapshot, steps replayed
            server = kv.servers[1]
            ray.kill(server, no_restart=True)
            wait_until_dead(server)
            killed.append(("server", 1))

    mod, got = fit(close_modules, workers=rm.Workers(2, 3), kvstore=kv, on_batch=on_batch)
    assert [k for k, _ in killed] == ["worker", "server"]
    events = [e["event"] for e in mod._pool.events]
    assert "lost" in events
    assert_close(reference, got)


def test_workers_pull_only_the_rows_their_slices_read(close_modules):
    """A table of 200,000 rows of which a batch reads a few: the worker's copy holds those
    rows only, and the step's pushes carry only them."""
    rows = 200_000
    ids = rm.sym.Variable("ids")
    table = rm.sym.Variable("table", shape=(rows, 8), stype="row_sparse",
                            init=rm.init.Normal(0.1))
    net = rm.sym.LinearRegressionOutput(
        rm.sym.sum(rm.sym.Embedding(ids, table, input_dim=rows, output_dim=8,
                                    sparse_grad=True), axis=1), name="out")
    rng = np.random.default_rng(0)
    x = rng.integers(0, rows, (64, 5)).astype(np.float32)
    y = rng.standard_normal((64, 8)).astype(np.float32)
    mod = rm.mod.Module(net, data_names=["ids"], label_names=["out_label"], workers=2)
    close_modules(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=32, data_name="ids", label_name="out_label"),
            num_epoch=1, optimizer="sgd", kvstore="dist_sync")
    held = ray.get([w.__ray_call__.remote(
        lambda self: [len(a[0].indices) for n, a in zip(self.root.param_names,
                                                        self.root.param_arrays)
                      if n == "table"][0]) for w in mod._pool.workers.values()])
    assert all(0 < h <= 5 * 16 for h in held), held  # one slice of 16 rows x 5 ids


def test_the_driver_never_holds_a_table_and_the_servers_draw_the_same_values(close_modules):
    """A 256 MB table on 2 workers and 2 shards: the driver draws it a block at a time (its
    resident memory grows by far less than the table) and the servers draw their rows again
    from the blocks' generator states: the values are the one-process init's, bit for bit."""
    import psutil

    rows, dim = 2_000_000, 32  # 256 MB of float32
    ids = rm.sym.Variable("ids")
    net = rm.sym.MakeLoss(rm.sym.sum(rm.sym.Embedding(
        ids, rm.sym.Variable("embed_weight", stype="row_sparse"), input_dim=rows,
        output_dim=dim, sparse_grad=True)))
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    mod = rm.mod.Module(net, data_names=["ids"], label_names=None, workers=2)
    close_modules(mod)
    mod.bind([("ids", (8, 3))])
    me = psutil.Process()
    before = me.memory_info().rss
    rm.random.seed(21)
    mod.init_params(rm.init.Uniform(0.5))
    mod.init_optimizer(kvstore=kv, optimizer="sgd")
    grown = me.memory_info().rss - before
    assert grown < 128 * 2**20, f"the driver's memory grew by {grown / 2**20:.0f} MB"
    assert [s for s, _, _ in kv.layout.table_ranges("embed_weight")] == [0, 1]

    rm.random.seed(21)
    expected = np.empty((rows, dim), np.float32)
    rm.init.Uniform(0.5)(rm.init.InitDesc("embed_weight"), expected)
    picked = np.array([0, 65_535, 65_536, 999_999, 1_000_000, rows - 1])  # blocks, shards
    out = RowSparseArray.empty((rows, dim))
    kv.row_sparse_pull("embed_weight", out=out, row_ids=picked)
    np.testing.assert_array_equal(out.data, expected[picked])
    np.testing.assert_array_equal(mod.get_params()[0]["embed_weight"], expected)


def test_a_planned_table_is_made_on_the_driver_when_asked_before_any_kvstore(close_modules):
    ids = rm.sym.Variable("ids")
    net = rm.sym.MakeLoss(rm.sym.sum(rm.sym.Embedding(
        ids, rm.sym.Variable("embed_weight", stype="row_sparse", init=rm.init.Normal(0.2)),
        input_dim=70_000, output_dim=4, sparse_grad=True)))
    mod = rm.mod.Module(net, data_names=["ids"], label_names=None, workers=2)
    close_modules(mod)
    mod.bind([("ids", (8, 3))])
    rm.random.seed(5)
    mod.init_params()
    got = mod.get_params()[0]["embed_weight"]
    rm.random.seed(5)
    expected = np.empty((70_000, 4), np.float32)
    rm.init.Normal(0.2)(rm.init.InitDesc("embed_weight"), expected)
    np.testing.assert_array_equal(got, expected)


def avazu_width_data(rows=2048, width=1_000_001, nnz=15):
    """Click-log-like csr rows at Avazu's width: ``nnz`` long-tailed feature ids a row."""
    rng = np.random.default_rng(8)
    ids = np.minimum(rng.zipf(1.2, (rows, nnz)), width) - 1
    ids = np.sort(ids, axis=1)
    keep = np.concatenate([np.ones((rows, 1), bool), np.diff(ids, axis=1) > 0], axis=1)
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    x = CSRArray(np.ones(int(keep.sum()), np.float32), ids[keep], indptr, (rows, width))
    y = (rng.random(rows) < 0.3).astype(np.float32)
    return x, y


def fit_avazu_width(close=None, workers=None, kvstore=None, on_batch=None):
    x, y = avazu_width_data()
    net = rm.sym.SoftmaxOutput(rm.sym.broadcast_add(
        rm.sym.dot(rm.sym.Variable("data", stype="csr"),
                   rm.sym.Variable("weight", shape=(x.shape[1], 2), stype="row_sparse",
                                   init=rm.init.Normal(0.01))),
        rm.sym.Variable("bias", shape=(2,))), name="softmax")
    rm.random.seed(9)
    mod = rm.mod.Module(net, workers=workers)
    if close is not None:
        close(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=256, shuffle=True, seed=4), num_epoch=1,
            optimizer="adam", optimizer_params={"learning_rate": 0.05}, kvstore=kvstore,
            batch_end_callback=on_batch, eval_metric="ce")
    return {k: np.array(v) for k, v in mod.get_params()[0].items()}


def test_avazu_width_on_workers_with_a_worker_and_a_server_killed(close_modules):
    """The linear model at Avazu's width (1,000,001 features) on 2 workers and 2 shards,
    a worker killed at step 2 and a server at step 5 of 8: the one-process parameters."""
    reference = fit_avazu_width()
    kv = rm.kv.DistKVStore("dist_sync", num_servers=2)
    killed = []

    def on_batch(param):
        pool = param.locals["self"]._pool
        if param.nbatch == 2:
            rank = sorted(pool.workers)[0]
            ray.kill(pool.workers[rank], no_restart=True)
            killed.append("worker")
        if param.nbatch == 5:
            server = kv.servers[0]
            ray.kill(server, no_restart=True)
            wait_until_dead(server)
            killed.append("server")

    got = fit_avazu_width(close_modules, rm.Workers(2, 3), kv, on_batch)
    assert killed == ["worker", "server"]
    assert_close(reference, got)
