"""Row-sparse keys in the in-process store: pulls of some rows, pushes of touched rows, lazy
updates, and bad row ids refused before anything changes."""
import numpy as np
import pytest

import raymod as rm
from raymod.sparse import RowSparseArray

TABLE = np.arange(24, dtype=np.float32).reshape(8, 3)


def rows(ids, values, shape=(8, 3)):
    return RowSparseArray(np.asarray(values, np.float32), ids, shape)


@pytest.fixture
def store():
    kv = rm.kv.create("local")
    kv.init("w", TABLE)
    return kv


def test_row_sparse_pull_copies_only_the_rows_asked_for(store):
    out = RowSparseArray.empty((8, 3))
    store.row_sparse_pull("w", out=out, row_ids=np.array([5, 1, 5, 2]))
    np.testing.assert_array_equal(out.indices, [1, 2, 5])
    np.testing.assert_array_equal(out.data, TABLE[[1, 2, 5]])
    store.row_sparse_pull("w", out=out, row_ids=np.array([0]))
    np.testing.assert_array_equal(out.indices, [0])  # the earlier rows are gone


def test_row_sparse_pull_into_several_outs_with_their_own_ids(store):
    a, b = RowSparseArray.empty((8, 3)), RowSparseArray.empty((8, 3))
    store.row_sparse_pull("w", out=[a, b], row_ids=[np.array([3]), np.array([4, 6])])
    np.testing.assert_array_equal(a.indices, [3])
    np.testing.assert_array_equal(b.indices, [4, 6])


@pytest.mark.parametrize("bad", [np.array([8]), np.array([-1, 2]), np.array([1.5])])
def test_bad_row_ids_are_refused_before_any_copy(store, bad):
    a = RowSparseArray.empty((8, 3))
    b = RowSparseArray.empty((8, 3))
    with pytest.raises(ValueError, match="row"):
        store.row_sparse_pull("w", out=[a, b], row_ids=[np.array([1]), bad])
    assert a.indices.size == 0  # nothing was copied into the first out either


def test_push_of_row_sparse_values_sums_rows_then_assigns(store):
    store.push("w", [rows([1, 4], np.ones((2, 3))), rows([4], 2 * np.ones((1, 3)))])
    out = np.zeros((8, 3), np.float32)
    store.pull("w", out=out)
    want = np.zeros((8, 3), np.float32)
    want[1], want[4] = 1, 3
    np.testing.assert_array_equal(out, want)


def test_push_with_an_optimizer_updates_only_pushed_rows(store):
    store.set_optimizer(rm.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=0.1))
    store.push("w", rows([2, 7], np.ones((2, 3))))
    out = np.zeros((8, 3), np.float32)
    store.pull("w", out=out)
    untouched = [0, 1, 3, 4, 5, 6]
    np.testing.assert_array_equal(out[untouched], TABLE[untouched])
    # momentum starts at 0: w - lr * (g + wd * w)
    np.testing.assert_allclose(out[[2, 7]], TABLE[[2, 7]] - 0.5 * (1 + 0.1 * TABLE[[2, 7]]),
                               rtol=1e-6)


def test_pull_skips_row_sparse_outs_unless_asked(store):
    out = RowSparseArray.empty((8, 3))
    store.pull("w", out=out)
    assert out.indices.size == 0
    store.pull("w", out=out, ignore_sparse=False)
    np.testing.assert_array_equal(out.todense(), TABLE)


def test_compressed_stores_refuse_row_sparse_pushes():
    kv = rm.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init("w", TABLE)
    with pytest.raises(rm.base.MXNetError, match="compression"):
        kv.push("w", rows([1], np.ones((1, 3))))
