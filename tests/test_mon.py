"""rm.mon.Monitor, after MXNet 1.9.1's test_module.py::test_monitor. Expected statistics were
recorded from MXNet 1.9.1 for the same network, weights and batch."""
import logging
from functools import reduce

import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch

ARG_PARAMS = {"fc_0_weight": np.array([[.15, .20], [.25, .30]], np.float32),
              "fc_0_bias": np.array([.35, .35], np.float32),
              "fc_1_weight": np.array([[.40, .45], [.50, .55]], np.float32),
              "fc_1_bias": np.array([.60, .60], np.float32)}
BATCH = DataBatch([np.array([[0.05, 0.10]], np.float32)], [np.array([[0.01, 0.99]], np.float32)])

# name -> mean |x| from MXNet 1.9.1 (names MXNet fills from unwritten buffers are left out)
MXNET_STATS = {
    "act_0_backward_output": 0.009362806, "act_0_output": 0.59507716,
    "act_1_backward_output": 0.088298395, "act_1_output": 0.7621468, "data": 0.075,
    "fc_0_backward_output1": 0.00070221035, "fc_0_backward_output2": 0.009362806,
    "fc_0_bias": 0.35, "fc_0_output": 0.385, "fc_0_weight": 0.22500001,
    "fc_1_backward_output0": 0.038860314, "fc_1_backward_output1": 0.05254436,
    "fc_1_backward_output2": 0.088298395, "fc_1_bias": 0.6, "fc_1_output": 1.1654137,
    "fc_1_weight": 0.475, "softmax_backward_output0": 0.4792183, "softmax_label": 0.5,
    "softmax_output": 0.7621468}


def _net():
    x = rm.sym.Variable("data")
    x = rm.sym.FullyConnected(name="fc_0", data=x, num_hidden=2)
    x = rm.sym.Activation(name="act_0", data=x, act_type="sigmoid")
    x = rm.sym.FullyConnected(name="fc_1", data=x, num_hidden=2)
    x = rm.sym.Activation(name="act_1", data=x, act_type="sigmoid")
    return rm.sym.LinearRegressionOutput(data=x, name="softmax", grad_scale=2)


def _mean_abs(x):
    return np.sum(np.abs(x)) / reduce(lambda a, b: a * b, x.shape)


def _module(mon):
    mod = rm.mod.Module(_net(), context=[rm.cpu()])
    mod.bind([("data", (1, 2))], label_shapes=[("softmax_label", (1, 2))], for_training=True)
    mod.install_monitor(mon)
    mod.init_params(arg_params=ARG_PARAMS)
    return mod


def test_monitor_records_outputs_gradients_and_arguments_like_mxnet():
    mon = rm.mon.Monitor(1, stat_func=_mean_abs, pattern=".*", sort=True)
    mod = _module(mon)
    mon.tic()
    mod.forward_backward(BATCH)
    res = mon.toc()
    assert len(res) == 21
    counts = {k: sum(name.startswith(k) for _, name, _ in res)
              for k in ("act_0", "act_1", "data", "fc_0", "fc_1", "softmax")}
    assert counts == {"act_0": 2, "act_1": 2, "data": 1, "fc_0": 6, "fc_1": 6, "softmax": 4}
    assert [name for _, name, _ in res] == sorted(name for _, name, _ in res)
    stats = {name: float(value) for _, name, value in res}
    assert all(value.endswith("\t") for _, _, value in res) and {s for s, _, _ in res} == {1}
    for name, expected in MXNET_STATS.items():
        assert stats[name] == pytest.approx(expected, rel=1e-5), name
    # data and label take no gradient here: raymod reports zeros
    assert stats["fc_0_backward_output0"] == 0 and stats["softmax_backward_output1"] == 0


def test_interval_pattern_and_default_statistic():
    mon = rm.mon.Monitor(2, pattern=".*_output$")
    mod = _module(mon)
    collected = []
    for _ in range(4):
        mon.tic()
        mod.forward(BATCH, is_train=False)
        collected.append(mon.toc())
    assert [len(r) for r in collected] == [5, 0, 5, 0]  # batches 1 and 3 of every 2
    assert [s for s, _, _ in collected[2]] == [3] * 5
    names = [name for _, name, _ in collected[0]]
    assert names == ["fc_0_output", "act_0_output", "fc_1_output", "act_1_output",
                     "softmax_output"]  # forward order when unsorted
    fc0 = np.array([[0.05, 0.10]]) @ ARG_PARAMS["fc_0_weight"].T + ARG_PARAMS["fc_0_bias"]
    rms = np.sqrt(np.mean(fc0 ** 2))  # norm(x) / sqrt(size)
    assert float(collected[0][0][2]) == pytest.approx(rms, rel=1e-6)


def test_toc_print_logs_one_line_per_record(caplog):
    mon = rm.mon.Monitor(1, pattern="fc_1_w")
    mod = _module(mon)
    mon.tic()
    mod.forward(BATCH, is_train=False)
    with caplog.at_level(logging.INFO):
        mon.toc_print()
    assert [r.getMessage() for r in caplog.records] == [
        "Batch:       1 fc_1_weight                    0.47827816\t"]


def test_fit_with_a_monitor_and_bucketing_modules_install_it_on_new_buckets():
    def sym_gen(key):
        data = rm.sym.Variable("data")
        net = rm.sym.FullyConnected(data, num_hidden=2, name="fc")
        return rm.sym.LinearRegressionOutput(net, name="lro"), ("data",), ("lro_label",)

    mod = rm.mod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind([("data", (2, 4))], [("lro_label", (2, 2))])
    mod.init_params()
    mon = rm.mon.Monitor(1, pattern="fc_output")
    mod.install_monitor(mon)
    mod.switch_bucket(3, [("data", (2, 3))], [("lro_label", (2, 2))])
    mon.tic()
    mod.forward(DataBatch([np.ones((2, 3), np.float32)], [np.zeros((2, 2), np.float32)],
                          bucket_key=3, provide_data=[("data", (2, 3))],
                          provide_label=[("lro_label", (2, 2))]), is_train=False)
    assert [name for _, name, _ in mon.toc()] == ["fc_output"]


def test_bad_interval_is_refused():
    with pytest.raises(ValueError, match="interval must be a positive int, got 0"):
        rm.mon.Monitor(0)


def test_fit_ticks_the_monitor_every_batch(caplog):
    x = np.random.default_rng(0).standard_normal((8, 2)).astype(np.float32)
    it = rm.io.NDArrayIter(x, np.zeros((8, 2), np.float32), batch_size=4)
    mon = rm.mon.Monitor(2, pattern="softmax_output")
    mod = rm.mod.Module(_net(), context=[rm.cpu()])
    with caplog.at_level(logging.INFO):
        mod.fit(it, num_epoch=2, monitor=mon, eval_metric="mse")
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Batch:")]
    assert [line.split()[1] for line in lines] == ["1", "3"]  # 4 batches, every 2nd

