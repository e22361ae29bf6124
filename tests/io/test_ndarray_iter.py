"""NDArrayIter against MXNet 1.x's behaviour (spec section 10) and the row-source additions."""
import pickle

import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch, DataDesc, NDArrayIter, RowSampler


def _data(n=1000):
    """Rows whose every value equals the row's label (label = row % 10), as MXNet's test."""
    labels = np.arange(n) % 10
    data = np.broadcast_to(labels[:, None, None], (n, 2, 2)).astype(np.float32).copy()
    return data, labels.astype(np.float32)


def _rows(batch):
    return batch.index


def test_pad_gives_8_batches_last_wrapped_from_start():
    data, label = _data()
    it = NDArrayIter(data, label, 128, last_batch_handle="pad")
    batches = list(it)
    assert len(batches) == 8
    assert [b.pad for b in batches] == [0] * 7 + [24]
    last = batches[-1]
    np.testing.assert_array_equal(last.data[0][:104], data[896:])
    np.testing.assert_array_equal(last.data[0][104:], data[:24])
    np.testing.assert_array_equal(last.label[0], np.concatenate([label[896:], label[:24]]))
    # every batch keeps rows and labels paired
    for b in batches:
        assert b.data[0].shape == (128, 2, 2)
        np.testing.assert_array_equal(b.data[0][:, 0, 0], b.label[0])
    counts = np.bincount(np.concatenate([b.label[0] for b in batches]).astype(int))
    assert counts[0] == 103 and counts[8] == 102        # 100 each, plus rows 0..23 again


def test_discard_gives_7_batches():
    data, label = _data()
    batches = list(NDArrayIter(data, label, 128, last_batch_handle="discard"))
    assert len(batches) == 7
    assert all(b.pad == 0 for b in batches)
    np.testing.assert_array_equal(batches[-1].data[0], data[768:896])


def test_roll_over_leftover_opens_next_epoch():
    data, label = _data()
    pad_last = list(NDArrayIter(data, label, 128, last_batch_handle="pad"))[-1]
    it = NDArrayIter(data, label, 128, last_batch_handle="roll_over")
    first_epoch = list(it)
    assert len(first_epoch) == 7
    it.reset()
    first = it.next()
    np.testing.assert_array_equal(first.data[0], pad_last.data[0])   # rows 896..999, 0..23
    np.testing.assert_array_equal(first.label[0], pad_last.label[0])
    assert first.pad == 104                                          # MXNet: rolled-over count
    second = it.next()
    np.testing.assert_array_equal(second.data[0], data[24:152])
    rest = list(it)
    assert 1 + 1 + len(rest) == 8              # 104+24, then rows 24..919; 920..999 roll over
    it.reset()
    np.testing.assert_array_equal(it.next().index[:8], np.arange(920, 928))


def test_reset_mid_epoch_drops_roll_over_rows():
    data, label = _data(10)
    it = NDArrayIter(data, label, 4, last_batch_handle="roll_over")
    it.next()
    it.reset()
    np.testing.assert_array_equal(it.next().index, np.arange(4))


def test_batch_bigger_than_data_tiles_with_pad():
    data = np.arange(3, dtype=np.float32)[:, None]
    it = NDArrayIter(data, batch_size=10)
    (batch,) = list(it)
    np.testing.assert_array_equal(batch.data[0][:, 0], [0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    assert batch.pad == 7
    assert list(NDArrayIter(data, batch_size=10, last_batch_handle="discard")) == []


def test_shuffle_keeps_rows_paired_and_idx_is_the_order():
    data, label = _data(100)
    data = data + np.arange(100, dtype=np.float32)[:, None, None] * 10   # make rows distinct
    it = NDArrayIter(data, label, 10, shuffle=True, seed=3)
    order = it.idx.copy()
    assert sorted(order.tolist()) == list(range(100)) and not np.array_equal(order, np.arange(100))
    seen = []
    for k, b in enumerate(it):
        np.testing.assert_array_equal(b.data[0], data[order[k * 10:(k + 1) * 10]])
        np.testing.assert_array_equal(b.label[0], label[order[k * 10:(k + 1) * 10]])
        seen.append(b.index)
    np.testing.assert_array_equal(np.concatenate(seen), order)
    it.reset()
    assert not np.array_equal(it.idx, order)                  # a new order each epoch
    np.testing.assert_array_equal(it.idx, it.epoch_order(1))
    np.testing.assert_array_equal(order, it.epoch_order(0))


def test_shuffle_follows_global_seed():
    data, label = _data(50)
    rm.random.seed(11)
    a = NDArrayIter(data, label, 5, shuffle=True).idx
    rm.random.seed(11)
    b = NDArrayIter(data, label, 5, shuffle=True).idx
    np.testing.assert_array_equal(a, b)


def test_dict_and_list_inputs_are_named_and_sorted_like_mxnet():
    x, y = np.zeros((6, 3), np.float32), np.ones((6, 2), np.float32)
    it = NDArrayIter({"b": x, "a": y}, {"lab": np.arange(6)}, 2)
    assert [d.name for d in it.provide_data] == ["a", "b"]
    assert it.provide_data[0] == DataDesc("a", (2, 2))
    assert [d.name for d in it.provide_label] == ["lab"]
    batch = it.next()
    assert len(batch.data) == 2 and batch.data[0].shape == (2, 2)
    it = NDArrayIter([x, y], [np.arange(6)], 3)
    assert [d.name for d in it.provide_data] == ["_0_data", "_1_data"]
    assert [d.name for d in it.provide_label] == ["softmax_label"]
    assert it.provide_data[1].shape == (3, 2) and it.provide_data[1].dtype == np.float32


@pytest.mark.parametrize("label", [None, []])
def test_no_label_gives_empty_list(label):
    it = NDArrayIter(np.zeros((5, 2)), label, 2)
    assert it.provide_label == []
    assert all(b.label == [] for b in it)


def test_take_returns_original_rows_regardless_of_shuffle():
    data, label = _data(40)
    data = data + np.arange(40, dtype=np.float32)[:, None, None]
    it = NDArrayIter({"x": data}, label, 8, shuffle=True, seed=0)
    rows = np.array([5, 0, 39, 5])
    (d,), (lab,) = it.take(rows)
    np.testing.assert_array_equal(d, data[rows])
    np.testing.assert_array_equal(lab, label[rows])
    assert it.num_rows == len(it) == 40
    (view,), _ = it.take(np.arange(8, 16))
    assert np.shares_memory(view, data)                        # contiguous rows: a view
    with pytest.raises(IndexError, match="40"):
        it.take([40])


def test_next_rows_lets_a_driver_plan_without_reading():
    data, label = _data(10)
    driver = NDArrayIter(data, label, 4, shuffle=True, seed=5)
    worker = pickle.loads(pickle.dumps(driver))
    for batch in NDArrayIter(data, label, 4, shuffle=True, seed=5):
        rows, pad = driver.next_rows()
        np.testing.assert_array_equal(rows, batch.index)
        assert pad == batch.pad
        d, lab = worker.take(rows)
        np.testing.assert_array_equal(d[0], batch.data[0])
    with pytest.raises(StopIteration):
        driver.next_rows()


def test_sampler_state_round_trip():
    s = RowSampler(10, 4, shuffle=True, last_batch_handle="roll_over", seed=1)
    s.next_rows(); s.next_rows()
    with pytest.raises(StopIteration):
        s.next_rows()
    s.reset()
    state = s.get_state()
    t = RowSampler(10, 4, shuffle=True, last_batch_handle="roll_over", seed=99)
    t.set_state(state)
    for _ in range(2):
        np.testing.assert_array_equal(s.next_rows()[0], t.next_rows()[0])
    assert s.batches_per_epoch() == 2


def test_mxnet_style_loop_with_iter_next_and_getters():
    data, label = _data(10)
    it = NDArrayIter(data, label, 4)
    pads = []
    while it.iter_next():
        assert it.getdata()[0].shape == (4, 2, 2)
        assert it.getlabel()[0].shape == (4,)
        pads.append(it.getpad())
    assert pads == [0, 0, 2]
    it.reset()
    assert isinstance(it.next(), DataBatch)


def test_errors():
    with pytest.raises(ValueError, match=r"'data' has 5 rows but 'softmax_label' has 4"):
        NDArrayIter(np.zeros((5, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="batch_size"):
        NDArrayIter(np.zeros((5, 2)), batch_size=0)
    with pytest.raises(ValueError, match="empty"):
        NDArrayIter(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="empty"):
        NDArrayIter([])
    with pytest.raises(ValueError, match="pad, discard, roll_over"):
        NDArrayIter(np.zeros((5, 2)), last_batch_handle="keep")


def test_data_desc_is_a_name_shape_tuple():
    d = DataDesc("data", (4, 3), np.float64, "NC")
    name, shape = d
    assert (name, shape) == ("data", (4, 3)) and d.dtype == np.float64 and d.layout == "NC"
    assert dict([d]) == {"data": (4, 3)}
    e = pickle.loads(pickle.dumps(d))
    assert e == d and e.dtype == np.float64 and e.layout == "NC"
    assert DataDesc.get_batch_axis("TNC") == 1 and DataDesc.get_batch_axis(None) == 0
    descs = DataDesc.get_list([("a", (1,)), ("b", (2,))], [("a", np.int32), ("b", np.float16)])
    assert [x.dtype for x in descs] == [np.int32, np.float16]
    assert DataDesc.get_list([("a", (1,))], None)[0].dtype == np.float32
    assert "DataDesc[data,(4, 3)" in repr(d)
