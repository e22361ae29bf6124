"""``rm.mod.default_workers``: the modules made inside the block without ``workers=`` run on
its workers (``raymod run --workers`` sets one around a whole script); classes that cannot
move keep training in process and say why once."""
import logging

import numpy as np
import pytest

import raymod as rm
from raymod.module import BucketingModule, Module, SVRGModule, default_workers
from raymod.module import placement
from raymod.module.placement import InProcess, OnWorkers

from test_user_subclasses import (DetModule, OldModule, assert_same, batches, convnet,
                                  reference, train)


def _net():
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"),
                                                      num_hidden=2, name="fc"),
                                name="softmax")


def _sym_gen(key):
    return _net(), ("data",), ("softmax_label",)


class UserModule(Module):
    """A user's subclass that keeps Module's bind: it follows the default."""


@pytest.fixture
def noted(monkeypatch):
    """A fresh record of the classes already told why they stay in process."""
    monkeypatch.setattr(placement, "_NOTED", set())


def test_modules_made_in_the_block_run_on_its_workers():
    with default_workers("2:3") as placed:
        mod, sub = Module(_net()), UserModule(_net())
        svrg = SVRGModule(_net(), update_freq=2)
        bucketing = BucketingModule(_sym_gen, default_bucket_key=4)
        explicit = Module(_net(), workers=4)
        with default_workers(None):  # nested: in process again
            inner = Module(_net())
    after = Module(_net())
    for m in (mod, sub, svrg):
        assert isinstance(m._placement, OnWorkers) and m._placement.by_default
        assert m._workers == rm.Workers(2, 3)
    assert bucketing._workers == rm.Workers(2, 3)  # its buckets' modules are made at bind
    assert isinstance(svrg._mod_aux._placement, InProcess)  # w~ lives on the workers
    assert explicit._workers == rm.Workers(4) and not explicit._placement.by_default
    assert isinstance(inner._placement, InProcess) and isinstance(after._placement, InProcess)
    assert set(placed.modules) == {mod, sub, svrg, bucketing}  # what the runner closes
    assert placement._DEFAULTS == []


def test_bad_default_is_refused_at_the_block():
    with pytest.raises(ValueError, match=r"workers='3:2'"):
        with default_workers("3:2"):
            pass
    assert placement._DEFAULTS == []


def test_a_class_built_on_base_module_stays_in_process_and_says_why_once(noted, caplog):
    want, acc_want = reference(epochs=1)
    with caplog.at_level(logging.WARNING, logger=placement.__name__):
        with default_workers(2) as placed:
            first = DetModule(convnet(), data_names=["data"], label_names=["softmax_label"])
            DetModule(convnet(), data_names=["data"], label_names=["softmax_label"])
            got, acc = train(first, batches(), epochs=1)
    said = [r.getMessage() for r in caplog.records if "DetModule" in r.getMessage()]
    assert len(said) == 1 and "built on BaseModule" in said[0] and "2 Ray workers" in said[0]
    assert not list(placed.modules)
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)


def test_a_subclass_whose_bind_builds_its_group_trains_in_process_by_default(noted, caplog):
    want, acc_want = reference(epochs=1)
    with caplog.at_level(logging.WARNING, logger=placement.__name__):
        with default_workers(2):
            mod = OldModule(convnet())
            got, acc = train(mod, batches(), epochs=1)
            again = OldModule(convnet())
            train(again, batches(), epochs=1)
    # the default could not be followed: in process (no pool ever started), said once
    assert isinstance(mod._placement, InProcess) and mod._pool is None
    said = [r.getMessage() for r in caplog.records if "OldModule" in r.getMessage()]
    assert len(said) == 1 and "DataParallelExecutorGroup" in said[0]
    assert_same(got, want)
    assert acc == pytest.approx(acc_want, abs=1e-12)


@pytest.mark.ray
def test_bucketing_and_svrg_modules_train_on_the_default_workers(ray_cluster, close_modules):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 1.5], np.float32) > 0).astype(np.float32)
    results = []
    for workers in (None, 2):
        with default_workers(workers) as placed:
            rm.random.seed(3)
            bucketing = BucketingModule(_sym_gen, default_bucket_key=4)
            bucketing.fit(rm.io.NDArrayIter(x, y, batch_size=20), num_epoch=2,
                          optimizer_params={"learning_rate": 0.5})
            svrg = SVRGModule(_net(), update_freq=1)
            svrg.fit(rm.io.NDArrayIter(x, y, batch_size=20), num_epoch=2,
                     optimizer_params={"learning_rate": 0.5})
        for m in placed.modules:
            close_modules(m)
        if workers:
            assert set(placed.modules) == {bucketing, svrg}
            assert bucketing._curr_module._pool is not None and svrg._pool is not None
            assert len(bucketing._curr_module._pool) == 2 == len(svrg._pool)
        results.append([m.get_params()[0] for m in (bucketing, svrg)])
    for here, there in zip(*results):
        for name, value in here.items():
            np.testing.assert_allclose(there[name], value, rtol=1e-4, atol=1e-5,
                                       err_msg=name)
