"""Row_sparse tables on the KVServer shards: split by row range, pushed and pulled by rows."""
import time

import numpy as np
import pytest
import ray

import raymod as rm
from raymod import optimizer as opt
from raymod.base import MXNetError
from raymod.kvstore.dist import DistKVStore
from raymod.sparse import RowSparseArray

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

ROWS, DIM = 10, 3


@pytest.fixture
def kv():
    store = DistKVStore("dist_sync", num_servers=2)
    yield store
    store.close()


def table(seed=0, rows=ROWS):
    return np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)


def grad(ids, seed):
    ids = np.asarray(ids, np.int64)
    data = np.random.default_rng(seed).standard_normal((ids.size, DIM)).astype(np.float32)
    return RowSparseArray(data, ids, (ROWS, DIM))


def kill(server):
    """Kill a server actor and wait until calls on it fail (``ray.kill`` is asynchronous)."""
    ray.kill(server, no_restart=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ray.get(server.ping.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("a killed server still answers after 60 s")


def every_row(store, key):
    out = np.zeros((ROWS, DIM), np.float32)
    store.pull(key, out=out)
    return out


def test_table_is_split_by_rows_and_pulled_by_rows(kv):
    w = table()
    kv.init("w", RowSparseArray.full(w))
    kv.init("p", RowSparseArray(w[[2, 7]], [2, 7], w.shape))  # rows not given are zero
    assert kv.layout.is_table("w") and kv.layout.table_ranges("w") == [(0, 0, 5), (1, 5, 10)]
    assert not kv.layout.shards[0] and not kv.layout.shards[1]  # no pieces: no flat buffers
    out = RowSparseArray.empty(w.shape)
    kv.row_sparse_pull("w", out=out, row_ids=np.array([8, 1, 4, 5, 1]))
    np.testing.assert_array_equal(out.indices, [1, 4, 5, 8])
    np.testing.assert_array_equal(out.data, w[[1, 4, 5, 8]])
    sparse_out = RowSparseArray.empty(w.shape)
    kv.pull("p", out=sparse_out)  # ignore_sparse: rows come from row_sparse_pull
    assert sparse_out.indices.size == 0
    kv.pull("p", out=sparse_out, ignore_sparse=False)
    expected = np.zeros_like(w)
    expected[[2, 7]] = w[[2, 7]]
    np.testing.assert_array_equal(sparse_out.todense(), expected)
    np.testing.assert_array_equal(every_row(kv, "p"), expected)
    kv.init("p", RowSparseArray.full(w))  # a known table is overwritten
    np.testing.assert_array_equal(every_row(kv, "p"), w)


@pytest.mark.parametrize("make", [
    lambda: opt.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01),
    lambda: opt.create("adam", learning_rate=0.01, wd=0.001),
], ids=["sgd_momentum_wd", "adam"])
def test_sparse_pushes_equal_the_local_store(kv, make):
    w = table(1)
    local = rm.kv.create("local")
    # the first pushes touch one shard only: the other still counts them (Adam's t)
    pushes = [[grad([1, 3], 1)], [grad([0, 4], 2), grad([4, 6], 3)], [grad([2, 5, 9], 4)]]
    for store in (kv, local):
        store.init("w", RowSparseArray.full(w))
        store.set_optimizer(make())
        for values in pushes:
            store.push("w", values)
    got = every_row(kv, "w")
    np.testing.assert_array_equal(got, every_row(local, "w"))
    np.testing.assert_array_equal(got[[7, 8]], w[[7, 8]])  # rows never pushed: unchanged
    # the shards' states join into the local store's, and split back onto the shards
    joined = opt.Updater(make())
    joined.set_states(kv.get_optimizer_states())
    mine = opt.Updater(make())
    mine.set_states(local.get_optimizer_states())
    for a, b in zip(np.atleast_1d(joined.states["w"]), np.atleast_1d(mine.states["w"])):
        np.testing.assert_array_equal(a, b)
    kv.set_optimizer_states(local.get_optimizer_states())
    for store in (kv, local):
        store.push("w", grad([3, 8], 5))
    np.testing.assert_array_equal(every_row(kv, "w"), every_row(local, "w"))


def test_push_without_optimizer_replaces_and_custom_updater_gets_rows(kv):
    w = table(2)
    kv.init("w", RowSparseArray.full(w))
    kv.push("w", [grad([1, 2], 6), grad([2], 7)])  # rows on shard 0 only
    expected = np.zeros_like(w)
    expected[[1, 2]] = grad([1, 2], 6).todense()[[1, 2]] + grad([2], 7).todense()[[1, 2]]
    np.testing.assert_array_equal(every_row(kv, "w"), expected)  # shard 1 zeroed too

    def add(key, received, stored):
        assert isinstance(received, RowSparseArray) and received.shape == stored.shape
        stored[received.indices] += received.data

    kv.init("w", RowSparseArray.full(w))
    kv._set_updater(add)
    kv.push("w", grad([3, 6, 9], 8))
    np.testing.assert_array_equal(every_row(kv, "w"), w + grad([3, 6, 9], 8).todense())


def test_bad_row_ids_and_outs_are_refused_before_any_copy(kv):
    w = table(3)
    kv.init("w", RowSparseArray.full(w))
    first = RowSparseArray(w[[0]], [0], w.shape)
    for bad in ([1, ROWS], [-1, 2], np.array([1.5])):
        with pytest.raises(ValueError, match="row_ids|row id"):
            kv.row_sparse_pull("w", out=[first, RowSparseArray.empty(w.shape)],
                               row_ids=[np.array([5, 6]), np.asarray(bad)])
        np.testing.assert_array_equal(first.indices, [0])  # untouched
    with pytest.raises(TypeError, match="row_sparse"):
        kv.row_sparse_pull("w", out=np.zeros_like(w), row_ids=np.array([1]))
    with pytest.raises(MXNetError, match="not been initialized"):
        kv.row_sparse_pull("x", out=RowSparseArray.empty(w.shape), row_ids=np.array([1]))
    with pytest.raises(MXNetError, match="shape"):  # checked before any key is pushed
        kv.push(["w", "w"], [grad([1], 9), RowSparseArray.empty((ROWS + 1, DIM))])
    np.testing.assert_array_equal(every_row(kv, "w"), w)


def test_dense_and_table_keys_share_one_store(kv):
    w, d = table(4), table(5)[:4]
    local = rm.kv.create("local")
    for store in (kv, local):
        store.init(["d", "w"], [d, RowSparseArray.full(w)])
        store.set_optimizer(opt.create("sgd", learning_rate=0.1, momentum=0.9))
        store.push(["d", "w"], [np.ones_like(d), grad([0, 9], 10)])
    outs, want = [np.zeros_like(d), np.zeros_like(w)], [np.zeros_like(d), np.zeros_like(w)]
    kv.pull(["d", "w"], out=outs)
    local.pull(["d", "w"], out=want)
    for a, b in zip(outs, want):
        np.testing.assert_array_equal(a, b)
    assert set(kv.read_all()) == {"d", "w"}
    rows = RowSparseArray.empty(d.shape)
    kv.row_sparse_pull("d", out=rows, row_ids=np.array([2]))  # a dense key's rows too
    np.testing.assert_array_equal(rows.data, outs[0][[2]])


def test_restore_brings_table_rows_and_optimizer_states_back(kv):
    w = table(6)
    local = rm.kv.create("local")
    for store in (kv, local):
        store.init("w", RowSparseArray.full(w))
        store.set_optimizer(opt.create("adam", learning_rate=0.01))
        store.push("w", grad([1, 8], 11))
    snap = kv.snapshot()
    kv.push("w", grad([2, 7], 12))  # lost with the server: not in the snapshot
    kill(kv.servers[1])
    assert kv.restore(snap) == [1]
    np.testing.assert_array_equal(every_row(kv, "w"), every_row(local, "w"))
    for store in (kv, local):
        store.push("w", grad([0, 9], 13))
    np.testing.assert_array_equal(every_row(kv, "w"), every_row(local, "w"))


def test_a_promoted_standby_holds_the_table():
    w = table(7)
    kv = DistKVStore("dist_sync", num_servers=1, standby=True)
    local = rm.kv.create("local")
    try:
        for store in (kv, local):
            store.init("w", RowSparseArray.full(w))
            store.set_optimizer(opt.create("adam", learning_rate=0.01))
        deadline = time.monotonic() + 60
        while 0 not in kv.standbys.attached:
            assert time.monotonic() < deadline, "no standby attached within 60 s"
            kv.tend_standbys()
            time.sleep(0.05)
        for store in (kv, local):
            store.push("w", grad([2, 6], 14))  # copied to the standby with its Adam states
        kill(kv.servers[0])
        assert kv.promote_standbys() == [0]
        for store in (kv, local):
            store.push("w", grad([2, 3], 15))
        np.testing.assert_array_equal(every_row(kv, "w"), every_row(local, "w"))
    finally:
        kv.close()


def test_traffic_follows_the_rows_pushed_not_the_table_size():
    rows = 1_000_000
    kv = DistKVStore("dist_sync", num_servers=2)
    try:
        kv.init("big", RowSparseArray.full(np.zeros((rows, 2), np.float32)))
        kv.set_optimizer(opt.create("sgd", learning_rate=0.1))
        kv.row_traffic(reset=True)
        ids = np.sort(np.random.default_rng(7).choice(rows, 100, replace=False))
        kv.push("big", RowSparseArray(np.ones((100, 2), np.float32), ids, (rows, 2)))
        per_row = 8 + 2 * 4  # an int64 id and two float32 values
        assert kv.row_traffic() == {"pushed": 100 * per_row, "pulled": 0}
        out = RowSparseArray.empty((rows, 2))
        kv.row_sparse_pull("big", out=out, row_ids=ids)
        np.testing.assert_array_equal(out.data, np.float32(-0.1))
        assert kv.row_traffic(reset=True) == {"pushed": 100 * per_row, "pulled": 100 * per_row}
        assert kv.bytes_pushed == kv.bytes_pulled == 0
    finally:
        kv.close()
