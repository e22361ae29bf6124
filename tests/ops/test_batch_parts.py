"""raymod.ops._batch_parts: how a batch is cut, and that the parts run at once on a
one-thread BLAS that is set back afterwards."""
import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from raymod import threads
from raymod.ops import _batch_parts


class FakePool:
    def __init__(self, size):
        self.size, self.sizes = size, []

    def resize(self, n):
        self.size = n
        self.sizes.append(n)


class FakeGovernor:
    def __init__(self, size):
        self.pool = FakePool(size)

    @property
    def threads(self):
        return self.pool.size


@pytest.mark.parametrize("batch,parts", [(7, 2), (7, 3), (2, 2), (32, 2), (5, 5)])
def test_bounds_cover_the_batch_in_near_equal_contiguous_parts(batch, parts):
    cuts = _batch_parts.bounds(batch, parts)
    assert len(cuts) == parts and cuts[0].start == 0 and cuts[-1].stop == batch
    assert all(a.stop == b.start for a, b in zip(cuts, cuts[1:]))
    sizes = [c.stop - c.start for c in cuts]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


def test_count_follows_the_pool_and_the_work(monkeypatch):
    monkeypatch.setattr(threads, "governor", lambda: FakeGovernor(2))
    big = 100 * _batch_parts.MIN_PART_FLOPS
    assert _batch_parts.count(32, big) == 2
    assert _batch_parts.count(1, big) == 1  # one sample: nothing to cut
    assert _batch_parts.count(32, 1.5 * _batch_parts.MIN_PART_FLOPS) == 1  # too little work
    monkeypatch.setattr(threads, "governor", lambda: FakeGovernor(4))
    assert _batch_parts.count(3, big) == 3  # no more parts than samples
    monkeypatch.setattr(threads, "governor", lambda: FakeGovernor(1))
    assert _batch_parts.count(32, big) == 1
    monkeypatch.setattr(threads, "governor", lambda: None)  # RAYMOD_THREADS=off
    assert _batch_parts.count(32, big) == 1


def test_parts_run_at_once_with_the_pool_at_one_thread_then_set_back(monkeypatch):
    fake = FakeGovernor(2)
    monkeypatch.setattr(threads, "governor", lambda: fake)
    both = threading.Barrier(2, timeout=10)  # passes only if the two parts run at once
    seen = []

    def part(i):
        seen.append((i, fake.pool.size, threading.current_thread().name))
        both.wait()
        return i * 10

    assert _batch_parts.run(part, 2) == [0, 10]
    assert sorted(s[:2] for s in seen) == [(0, 1), (1, 1)]  # BLAS at one thread inside
    assert fake.pool.sizes == [1, 2] and fake.pool.size == 2  # and set back after


def test_a_part_that_raises_still_waits_for_the_others_and_sets_the_pool_back(monkeypatch):
    fake = FakeGovernor(3)
    monkeypatch.setattr(threads, "governor", lambda: fake)
    finished = []

    def part(i):
        if i == 0:
            raise RuntimeError("part 0 failed")
        time.sleep(0.05)
        finished.append(i)

    with pytest.raises(RuntimeError, match="part 0 failed"):
        _batch_parts.run(part, 3)
    assert sorted(finished) == [1, 2] and fake.pool.size == 3


def test_the_real_blas_pool_is_one_thread_inside_the_parts(monkeypatch):
    pool = threads.BlasPool()
    if not pool._libs:
        pytest.skip("no BLAS library threadpoolctl can reach")
    before = pool.size
    try:
        g = threads.ThreadGovernor(fixed=2, pool=pool)
        if g.threads < 2:
            pytest.skip("fewer than 2 cores granted here")
        monkeypatch.setattr(threads, "governor", lambda: g)

        def blas_threads(_):
            return {lib["num_threads"] for lib in threadpool_info()
                    if lib["user_api"] == "blas"}

        assert _batch_parts.run(blas_threads, 2) == [{1}, {1}]
        assert blas_threads(0) == {2}
        a = np.ones((64, 64), np.float32)
        assert _batch_parts.run(lambda i: float((a @ a)[0, 0]), 2) == [64.0, 64.0]
    finally:
        pool.resize(before)


def _with_parts(monkeypatch, parts):
    monkeypatch.setattr(_batch_parts, "count",
                        lambda batch, work, least=None: min(parts, batch))


@pytest.mark.parametrize("fix_gamma", [True, False])
@pytest.mark.parametrize("is_train", [True, False])
def test_batch_norm_in_parts_equals_one_pass_to_the_bit(monkeypatch, fix_gamma, is_train):
    from raymod.ops.nn.batch_norm import BatchNorm

    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 5, 6, 6)).astype(np.float32)
    gamma, beta = rng.random(5).astype(np.float32) + 0.5, rng.random(5).astype(np.float32)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    runs = []
    for parts in (1, 3):
        _with_parts(monkeypatch, parts)
        op = BatchNorm(fix_gamma=fix_gamma)
        aux = [np.full(5, 0.1, np.float32), np.full(5, 2.0, np.float32)]
        outs, saved = op.forward(np, [x, gamma, beta], aux, is_train)
        grads = op.backward(np, [gy], [None, gamma, None], outs, saved, [True, True, True])
        runs.append(outs + aux + grads)
    for one, cut in zip(*runs):
        np.testing.assert_array_equal(cut, one)


def test_relu_in_parts_equals_one_pass_to_the_bit(monkeypatch):
    from raymod.ops.nn._relu import relu, relu_grad

    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 4, 4)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    _with_parts(monkeypatch, 1)
    y1, g1 = relu(np, x), relu_grad(np, g, relu(np, x))
    _with_parts(monkeypatch, 2)
    y2, g2 = relu(np, x), relu_grad(np, g, relu(np, x))
    np.testing.assert_array_equal(y2, y1)
    np.testing.assert_array_equal(g2, g1)
    np.testing.assert_array_equal(y1, np.maximum(x, 0))
    np.testing.assert_array_equal(g1, g * (x > 0))
