"""A Module's placement is chosen once from ``workers=``; both executor groups implement one
interface. (The placements' behaviour is covered by the module and cluster tests.)"""
import inspect
import pathlib
import re

import numpy as np
import pytest

import raymod as rm
from raymod.module.placement import InProcess, OnWorkers, Placement
from raymod.module.svrg_placement import SnapshotModule, SnapshotOnWorkers
from raymod.parallel import DataParallelExecutorGroup, ExecutorGroup


def _net():
    fc = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3, name="fc")
    return rm.sym.SoftmaxOutput(fc, name="softmax")


def test_in_process_module_gets_in_process_placement_and_group():
    mod = rm.mod.Module(_net())
    assert isinstance(mod._placement, InProcess) and mod._pool is None
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    assert isinstance(mod._exec_group, DataParallelExecutorGroup)
    assert isinstance(mod._exec_group, ExecutorGroup)
    mod.close()  # nothing to stop in process: still bound
    assert mod.binded


def test_workers_argument_gives_on_workers_placement_without_starting_ray():
    mod = rm.mod.Module(_net(), workers=2)
    assert isinstance(mod._placement, OnWorkers)
    assert mod._pool is None  # the pool starts at the first bind
    mod.close()  # before a bind: nothing to stop


def test_svrg_strategy_follows_the_placement():
    net = rm.sym.LinearRegressionOutput(
        rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=1, name="fc"), name="lro")
    local = rm.mod.SVRGModule(net, label_names=["lro_label"], update_freq=1)
    remote = rm.mod.SVRGModule(net, label_names=["lro_label"], update_freq=1, workers=2)
    assert isinstance(local._svrg, SnapshotModule)
    assert isinstance(remote._svrg, SnapshotOnWorkers)


def test_shared_module_must_share_the_placement():
    first = rm.mod.Module(_net())
    first.bind([("data", (4, 5))], [("softmax_label", (4,))])
    first.init_params()
    other = rm.mod.Module(_net(), workers=2)
    with pytest.raises(ValueError, match="must run where this module runs"):
        other.bind([("data", (4, 5))], [("softmax_label", (4,))], shared_module=first)
    assert not other.binded


def test_ray_group_implements_every_interface_method():
    from raymod.cluster.remote_group import RayExecutorGroup
    methods = [name for name, _ in inspect.getmembers(ExecutorGroup, inspect.isfunction)
               if not name.startswith("_")]
    assert "forward" in methods and "update_metric" in methods
    for cls in (DataParallelExecutorGroup, RayExecutorGroup):
        missing = [m for m in methods if not callable(getattr(cls, m, None))]
        assert not missing, f"{cls.__name__} lacks {missing}"


def test_placements_implement_every_placement_method():
    methods = [name for name, _ in inspect.getmembers(Placement, inspect.isfunction)
               if not name.startswith("_")]
    for cls in (InProcess, OnWorkers):
        for name in methods:
            assert callable(getattr(cls, name)), (cls, name)
    # the abstract ones are overridden by both
    for name in ("make_group", "create_kvstore", "setup_kvstore", "update", "updater_states",
                 "set_updater_states"):
        assert getattr(InProcess, name) is not getattr(Placement, name), name
        assert getattr(OnWorkers, name) is not getattr(Placement, name), name


def test_module_code_does_not_branch_on_remote():
    folder = pathlib.Path(rm.__file__).parent / "module"
    hits = [f"{path.name}:{n}" for path in sorted(folder.glob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if re.search(r"\b_remote\b", line)]
    assert not hits


def test_in_process_update_runs_locally():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.float32)
    it = rm.io.NDArrayIter(x, y, batch_size=4)
    mod = rm.mod.Module(_net(), context=[rm.cpu(0), rm.cpu(1)])
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params()
    mod.init_optimizer(kvstore="local", optimizer_params={"learning_rate": 0.5})
    before = mod.get_params()[0]["fc_weight"].copy()
    batch = next(iter(it))
    mod.forward_backward(batch)
    mod.update()
    assert not np.allclose(mod.get_params()[0]["fc_weight"], before)
    assert mod._owns_kvstore is False
