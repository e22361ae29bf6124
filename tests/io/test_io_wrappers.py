"""ResizeIter and PrefetchingIter."""
import gc
import threading

import numpy as np
import pytest

from raymod.base import MXNetError
from raymod.io import DataBatch, DataDesc, DataIter, NDArrayIter, PrefetchingIter, ResizeIter


def _iter(n=10, batch=4, name="data", label_name="softmax_label", offset=0):
    data = np.arange(n, dtype=np.float32)[:, None] + offset
    return NDArrayIter(data, np.arange(n), batch, data_name=name, label_name=label_name)


def test_resize_shorter_and_longer():
    it = ResizeIter(_iter(), 2)
    assert [b.data[0][0, 0] for b in it] == [0, 4]
    it.reset()
    assert len(list(it)) == 2
    long = ResizeIter(_iter(), 7)                  # inner has 3 batches: wraps around twice
    starts = [b.data[0][0, 0] for b in long]
    assert starts == [0, 4, 8, 0, 4, 8, 0]
    assert long.provide_data == _iter().provide_data and long.batch_size == 4


def test_resize_without_internal_reset_continues():
    it = ResizeIter(_iter(), 2, reset_internal=False)
    list(it)
    it.reset()
    assert [b.data[0][0, 0] for b in it] == [8, 0]


def test_prefetching_matches_inner_and_joins_several():
    a, b = _iter(), _iter(name="x", label_name="y", offset=100)
    with PrefetchingIter([a, b], rename_data=[{"data": "d0"}, {"x": "d1"}]) as it:
        assert [d.name for d in it.provide_data] == ["d0", "d1"]
        assert [d.name for d in it.provide_label] == ["softmax_label", "y"]
        assert it.batch_size == 4
        for epoch in range(2):
            batches = list(it)
            assert len(batches) == 3 and batches[-1].pad == 2
            for k, batch in enumerate(batches):
                np.testing.assert_array_equal(batch.data[0][:, 0], batch.data[1][:, 0] - 100)
                assert len(batch.label) == 2
            it.reset()


def test_prefetching_runs_ahead_on_another_thread():
    threads = set()

    class Spy(DataIter):
        def __init__(self):
            super().__init__(2)
            self.n = 0

        provide_data = [DataDesc("data", (2,))]
        provide_label = []

        def next(self):
            threads.add(threading.get_ident())
            self.n += 1
            if self.n > 3:
                raise StopIteration
            return DataBatch([np.full(2, self.n)], [], pad=0)

    spy = Spy()
    it = PrefetchingIter(spy)
    assert [b.data[0][0] for b in it] == [1, 2, 3]
    assert threading.get_ident() not in threads
    it.close()
    it.close()                                   # idempotent


def test_prefetching_errors_and_shutdown():
    class Broken(DataIter):
        provide_data = [DataDesc("data", (1,))]
        provide_label = []

        def next(self):
            raise OSError("disk gone")

    it = PrefetchingIter(Broken(1))
    with pytest.raises(OSError, match="disk gone"):
        it.next()
    it.close()
    with pytest.raises(MXNetError, match="ran out"):
        list(PrefetchingIter([_iter(12), _iter(20)]))
    before = threading.active_count()
    its = [PrefetchingIter(_iter()) for _ in range(5)]
    del its
    gc.collect()
    assert threading.active_count() <= before


def test_a_batch_whose_data_is_replaced_forgets_its_row_source():
    """Ray workers read a batch's rows from its source themselves: a batch that now holds
    other arrays (a chained module's outputs) must not send them there."""
    import copy
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    batch = next(iter(NDArrayIter(x, np.zeros(6), batch_size=3)))
    assert batch.source is not None
    chained = copy.copy(batch)
    chained.data = [np.zeros((3, 5), np.float32)]
    assert chained.source is None and batch.source is not None
    relabelled = copy.copy(batch)
    relabelled.label = [np.ones(3)]
    assert relabelled.source is None
