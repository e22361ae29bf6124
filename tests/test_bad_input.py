"""Bad input that used to get through (issue 25, item 5): each is refused with an error that
names the argument, what was expected and what was given, before anything changes."""
import json
import math
import struct

import numpy as np
import pytest

import raymod as rm
from raymod import lr_scheduler as lrs
from raymod import ndarray_io
from raymod import optimizer as opt
from raymod.base import MXNetError
from raymod.io import DataBatch, NDArrayIter
from raymod.module import Module
from raymod.optimizer.svrg import _SVRGOptimizer
from raymod.parallel import DataParallelExecutorGroup


def _mlp():
    x = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=4, name="fc1")
    x = rm.sym.Activation(x, act_type="relu", name="relu1")
    x = rm.sym.FullyConnected(x, num_hidden=3, name="fc2")
    return rm.sym.SoftmaxOutput(x, name="softmax")


def _xy(rows=8):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 5)).astype(np.float32)
    return x, x[:, :3].argmax(axis=1).astype(np.float32)


def _trained(batch=4):
    """A module after one epoch of training, and a copy of its parameters."""
    x, y = _xy()
    mod = Module(_mlp())
    mod.fit(NDArrayIter(x, y, batch_size=batch), num_epoch=1,
            optimizer_params={"learning_rate": 0.1})
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


def _unchanged(mod, before):
    after = mod.get_params()[0]
    return all(np.array_equal(after[k], v) for k, v in before.items())


# ---- 1. string / object data --------------------------------------------------------------

@pytest.mark.parametrize("data,kind", [
    (np.array([["a", "b", "c", "d", "e"]] * 8), r"<U1 \(str\)"),
    (np.ones((8, 5)).astype(object), r"object \(Python objects\)"),
    (np.ones((8, 5), dtype=np.complex64), r"complex64 \(complex\)"),
])
def test_fit_refuses_non_numeric_data_before_binding(data, kind):
    mod = Module(_mlp())
    with pytest.raises(TypeError, match=rf"data input 'data' has dtype {kind}.*expected a "
                                        "bool, int, uint or float dtype"):
        mod.fit(NDArrayIter(data, np.zeros(8), batch_size=4), num_epoch=1)
    assert not mod.binded


def test_bind_refuses_string_labels_but_not_labels_the_symbol_does_not_take():
    x, _ = _xy()
    names = np.array(["cat", "dog"] * 4)
    mod = Module(_mlp())
    it = NDArrayIter(x, names, batch_size=4)
    with pytest.raises(TypeError, match=r"label input 'softmax_label' has dtype <U3"):
        mod.bind(it.provide_data, it.provide_label)
    assert not mod.binded
    # a network without a label input drops the iterator's labels: nothing to refuse
    plain = Module(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2),
                   label_names=None)
    with pytest.warns(UserWarning, match="label_names"):
        plain.bind(it.provide_data, it.provide_label, for_training=False)
    assert plain.binded


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.uint8, np.bool_])
def test_numeric_input_dtypes_still_bind(dtype):
    mod = Module(rm.sym.Embedding(rm.sym.Variable("data"), input_dim=4, output_dim=2),
                 label_names=None)
    mod.bind([rm.io.DataDesc("data", (2, 3), dtype)], for_training=False)
    assert mod.binded


@pytest.mark.parametrize("rows", [4, 6])  # the bound batch size, and one forcing a reshape
def test_forward_refuses_a_string_batch_before_loading_or_reshaping(rows):
    mod, before = _trained(batch=4)
    x, y = _xy(rows)
    bad = DataBatch([x.astype(str)], [y])
    with pytest.raises(TypeError, match=r"data input 'data' has dtype <U\d+ \(str\)"):
        mod.forward(bad, is_train=True)
    assert mod.data_shapes[0].shape == (4, 5)  # no implicit reshape happened
    with pytest.raises(TypeError, match=r"label input 'softmax_label' has dtype object"):
        mod.forward(DataBatch([x], [y.astype(object)]), is_train=True)
    assert _unchanged(mod, before)
    mod.forward(DataBatch([x], [y]), is_train=False)  # good batches still run


def test_executor_group_checks_dtypes_at_bind_and_per_batch():
    group = DataParallelExecutorGroup(
        _mlp(), [rm.cpu()], None, [("data", (4, 5))], [("softmax_label", (4,))],
        ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"], True, False)
    with pytest.raises(TypeError, match="data input 'data' has dtype object"):
        group.bind_exec([("data", (4, 5), np.dtype(object), "NC")], [("softmax_label", (4,))])
    x, y = _xy(4)
    data = group.data_arrays[0][0][1]
    data[...] = 7.0
    with pytest.raises(TypeError, match="label input 'softmax_label' has dtype <U"):
        group.forward(DataBatch([x], [y.astype(str)]))
    assert (data == 7.0).all()  # nothing was loaded: the check comes first
    with pytest.raises(TypeError, match="data input 'data' has dtype object"):
        group.forward([DataBatch([x.astype(object)], [y])])


# ---- 2. fit's epochs ------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,error,match", [
    ({"num_epoch": -1}, ValueError, r"fit: num_epoch must be an int >= 0, got -1"),
    ({"num_epoch": 2.5}, TypeError, r"fit: num_epoch must be an int >= 0, got float 2.5"),
    ({"num_epoch": True}, TypeError, r"num_epoch must be an int >= 0, got bool True"),
    ({"num_epoch": 2, "begin_epoch": -1}, ValueError,
     r"fit: begin_epoch must be an int >= 0, got -1"),
    ({"num_epoch": 2, "begin_epoch": 3}, ValueError,
     r"begin_epoch must be <= num_epoch .*got begin_epoch=3 and num_epoch=2"),
    ({}, ValueError, "fit needs num_epoch"),
])
def test_fit_refuses_a_bad_epoch_range_before_anything_changes(kwargs, error, match):
    mod, before = _trained()
    x, y = _xy()
    with pytest.raises(error, match=match):
        mod.fit(NDArrayIter(x, y, batch_size=4), force_init=True, force_rebind=True, **kwargs)
    assert _unchanged(mod, before)
    fresh = Module(_mlp())
    with pytest.raises(error, match=match):
        fresh.fit(NDArrayIter(x, y, batch_size=4), **kwargs)
    assert not fresh.binded


@pytest.mark.filterwarnings("ignore:Parameters already initialized")
def test_fit_with_begin_epoch_equal_to_num_epoch_trains_nothing():
    mod, before = _trained()
    x, y = _xy()
    mod.fit(NDArrayIter(x, y, batch_size=4), begin_epoch=3, num_epoch=3)
    assert _unchanged(mod, before)


# ---- 3. optimizer settings ------------------------------------------------------------------

@pytest.mark.parametrize("name,kwargs,error,match", [
    ("sgd", {"learning_rate": -1}, ValueError,
     r"SGD: learning_rate must be a finite number >= 0 or None, got -1"),
    ("sgd", {"learning_rate": math.inf}, ValueError, r"SGD: learning_rate .* got inf"),
    ("sgd", {"learning_rate": "0.1"}, TypeError, r"SGD: learning_rate .* got str '0.1'"),
    ("sgd", {"wd": -0.1}, ValueError, r"SGD: wd must be a finite number >= 0, got -0.1"),
    ("sgd", {"momentum": 1.0}, ValueError, r"SGD: momentum must be a finite number in \[0, 1\)"),
    ("sgd", {"momentum": -0.5}, ValueError, r"SGD: momentum .* got -0.5"),
    ("sgd", {"rescale_grad": math.nan}, ValueError, r"SGD: rescale_grad .* got nan"),
    ("sgd", {"clip_gradient": math.inf}, ValueError, r"SGD: clip_gradient .* or None, got inf"),
    ("sgd", {"begin_num_update": -3}, ValueError, r"SGD: begin_num_update must be an int >= 0"),
    ("nag", {"momentum": 1.5}, ValueError, r"NAG: momentum"),
    ("signum", {"wd_lh": -1}, ValueError, r"Signum: wd_lh must be a finite number >= 0"),
    ("adam", {"beta1": 1.0}, ValueError, r"Adam: beta1 must be a finite number in \[0, 1\)"),
    ("adam", {"beta2": -0.1}, ValueError, r"Adam: beta2"),
    ("adam", {"epsilon": 0}, ValueError, r"Adam: epsilon must be a finite number > 0, got 0"),
    ("adamax", {"beta2": 1.0}, ValueError, r"Adamax: beta2"),
    ("nadam", {"schedule_decay": -1}, ValueError, r"Nadam: schedule_decay"),
    ("ftml", {"epsilon": -1e-8}, ValueError, r"FTML: epsilon"),
    ("adagrad", {"eps": 0.0}, ValueError, r"AdaGrad: eps must be a finite number > 0"),
    ("rmsprop", {"gamma1": 1.5}, ValueError, r"RMSProp: gamma1"),
    ("rmsprop", {"clip_weights": math.nan}, ValueError, r"RMSProp: clip_weights"),
    ("adadelta", {"rho": 1.0}, ValueError, r"AdaDelta: rho"),
    ("ftrl", {"lamda1": -0.01}, ValueError, r"Ftrl: lamda1"),
    ("lamb", {"beta1": 2}, ValueError, r"LAMB: beta1"),
])
def test_optimizer_settings_out_of_range_are_refused(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        opt.create(name, **kwargs)


def test_valid_edge_settings_are_kept():
    # MXNet's update ops read a clip_gradient <= 0 as "no clipping"
    assert opt.SGD(clip_gradient=-1.0).clip_gradient == -1.0
    assert opt.SGD(learning_rate=0.0, momentum=0.0, wd=0).lr == 0.0
    assert opt.Adam(beta1=0.0, epsilon=np.float32(1e-7)).beta1 == 0.0
    assert opt.LAMB(lower_bound=-1, upper_bound=None).lower_bound == -1


def test_set_learning_rate_refuses_a_negative_rate_and_keeps_the_old_one():
    sgd = opt.SGD(learning_rate=0.1)
    with pytest.raises(ValueError, match=r"SGD.set_learning_rate: lr must be a finite number "
                                         r">= 0, got -0.5"):
        sgd.set_learning_rate(-0.5)
    assert sgd.learning_rate == 0.1


def test_svrg_wrapper_alone_passes_any_learning_rate_sign_through():
    # MXNet 1.9.1's test_svrg_optimizer_constructor builds one with learning_rate=-1.0
    assert _SVRGOptimizer(default_optimizer="sgd", learning_rate=-1.0).lr == -1.0
    with pytest.raises(ValueError, match="SGD: momentum"):
        _SVRGOptimizer(default_optimizer="sgd", learning_rate=-1.0, momentum=2)
    with pytest.raises(ValueError, match="SGD: learning_rate"):  # only inside the wrapper
        opt.SGD(learning_rate=-1.0)


def test_init_optimizer_with_a_bad_rate_leaves_the_module_as_it_was():
    mod, before = _trained()
    mod_opt = mod._optimizer
    with pytest.raises(ValueError, match="SGD: learning_rate .* got -1"):
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": -1},
                           force_init=True)
    assert mod._optimizer is mod_opt and mod.optimizer_initialized
    assert _unchanged(mod, before)
    fresh = Module(_mlp())
    x, y = _xy()
    with pytest.raises(ValueError, match="SGD: learning_rate"):
        fresh.fit(NDArrayIter(x, y, batch_size=4), num_epoch=1,
                  optimizer_params={"learning_rate": -1})
    assert not fresh.optimizer_initialized


@pytest.mark.parametrize("make,match", [
    (lambda: lrs.LRScheduler(base_lr=-0.1), r"LRScheduler: base_lr must be a finite number >= 0"),
    (lambda: lrs.FactorScheduler(step=2, base_lr=math.inf), r"FactorScheduler: base_lr .* inf"),
    (lambda: lrs.FactorScheduler(step=2, factor=-0.5), r"FactorScheduler: factor .* -0.5"),
    (lambda: lrs.FactorScheduler(step=2, stop_factor_lr=-1), r"stop_factor_lr"),
    (lambda: lrs.MultiFactorScheduler(step=[2], factor=-1), r"MultiFactorScheduler: factor"),
    (lambda: lrs.PolyScheduler(max_update=10, pwr=-1), r"PolyScheduler: pwr"),
    (lambda: lrs.CosineScheduler(max_update=10, final_lr=-0.01), r"CosineScheduler: final_lr"),
    (lambda: lrs.LRScheduler(warmup_begin_lr=-1), r"warmup_begin_lr"),
])
def test_lr_scheduler_values_out_of_range_are_refused(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---- 4. initializer arguments ---------------------------------------------------------------

@pytest.mark.parametrize("make,error,match", [
    (lambda: rm.init.Xavier(magnitude=-1), ValueError,
     r"Xavier: magnitude must be a finite number > 0, got -1"),
    (lambda: rm.init.Xavier(magnitude=0), ValueError, r"Xavier: magnitude .* got 0"),
    (lambda: rm.init.Xavier(magnitude="big"), TypeError, r"Xavier: magnitude .* str 'big'"),
    (lambda: rm.init.Xavier(rnd_type="cauchy"), ValueError,
     r"Xavier: rnd_type must be one of 'uniform', 'gaussian', got 'cauchy'"),
    (lambda: rm.init.MSRAPrelu(factor_type="sum"), ValueError, r"MSRAPrelu: factor_type"),
    (lambda: rm.init.MSRAPrelu(slope=math.nan), ValueError, r"MSRAPrelu: slope"),
    (lambda: rm.init.Uniform(-0.1), ValueError, r"Uniform: scale must be a finite number >= 0"),
    (lambda: rm.init.Normal(sigma=-1), ValueError, r"Normal: sigma .* got -1"),
    (lambda: rm.init.Orthogonal(scale=math.inf), ValueError, r"Orthogonal: scale"),
    (lambda: rm.init.Orthogonal(rand_type="gaussian"), ValueError, r"Orthogonal: rand_type"),
    (lambda: rm.init.LSTMBias(forget_bias=math.nan), ValueError, r"LSTMBias: forget_bias"),
    (lambda: rm.init.FusedRNN(None, 0, 1, "lstm"), ValueError, r"FusedRNN: num_hidden"),
    (lambda: rm.init.FusedRNN(None, 4, 1, "lstn"), ValueError, r"FusedRNN: mode"),
    (lambda: rm.init.create('["xavier", {"magnitude": -2}]'), ValueError, r"Xavier: magnitude"),
])
def test_initializer_arguments_are_checked_at_construction(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_valid_initializer_edge_values_are_kept():
    assert rm.init.Xavier(magnitude="2").magnitude == 2.0  # MXNet keeps float(magnitude)
    assert rm.init.Uniform(0).scale == 0
    assert rm.init.MSRAPrelu(slope=-0.5).magnitude == pytest.approx(1.6)
    assert rm.init.Orthogonal(scale=-1.0).scale == -1.0


# ---- 5. .params headers whose sizes cannot be ----------------------------------------------

def _params_with_dims(dims, tmp_path):
    """A one-array .params file whose header claims ``dims`` (the data stays 6 floats)."""
    blob = bytearray(ndarray_io.dumps({"w": np.ones((2, 3), np.float32)}))
    struct.pack_into("<qq", blob, 24 + 12, *dims)  # list header, then magic/stype/ndim
    path = tmp_path / "bad.params"
    path.write_bytes(bytes(blob))
    return path


@pytest.mark.parametrize("dims", [(2 ** 40, 2 ** 40), (2 ** 62, 4), (1000, 1000)])
def test_params_header_sizes_are_checked_against_the_bytes_left(dims, tmp_path):
    path = _params_with_dims(dims, tmp_path)
    need = dims[0] * dims[1] * 4
    with pytest.raises(MXNetError, match=rf"bad.params.*array 0 has shape \({dims[0]}, "
                                         rf"{dims[1]}\) of float32, which needs {need} bytes"
                                         r" of data, but only \d+ bytes are left"):
        ndarray_io.load(path)
    with pytest.raises(MXNetError, match=rf"needs {need} bytes"):
        ndarray_io.load_frombuffer(path.read_bytes())


# ---- 6. cycles in symbol JSON -------------------------------------------------------------

def _graph():
    net = rm.sym.Activation(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3,
                                                  name="fc"), act_type="relu", name="relu")
    return net, json.loads(net.tojson())  # nodes: data, fc_weight, fc_bias, fc, relu


def test_symbol_json_self_loop_is_named_a_cycle():
    _, graph = _graph()
    graph["nodes"][3]["inputs"][0] = [3, 0, 0]
    with pytest.raises(MXNetError, match=r"cycle: 'fc' \(node 3\) -> 'fc' \(node 3\)"):
        rm.sym.load_json(json.dumps(graph))


def test_symbol_json_loop_through_a_later_node_is_named_a_cycle():
    _, graph = _graph()
    graph["nodes"][3]["inputs"][0] = [4, 0, 0]  # fc takes relu, which takes fc
    with pytest.raises(MXNetError, match=r"cycle: 'fc' \(node 3\) -> 'relu' \(node 4\) -> "
                                         r"'fc' \(node 3\)"):
        rm.sym.load_json(json.dumps(graph))


def test_symbol_json_reference_past_the_end_is_named():
    _, graph = _graph()
    graph["nodes"][4]["inputs"][0] = [9, 0, 0]
    with pytest.raises(MXNetError, match=r"'relu' \(node 4\) has input \[9, 0, 0\], which does "
                                         r"not refer to one of the 5 nodes"):
        rm.sym.load_json(json.dumps(graph))
    _, graph = _graph()
    graph["heads"] = [[5, 0, 0]]
    with pytest.raises(MXNetError, match=r"head \[5, 0, 0\] does not name one of the 5 nodes"):
        rm.sym.load_json(json.dumps(graph))


def test_symbol_json_with_inputs_listed_after_their_users_loads_as_mxnet_does():
    net, graph = _graph()
    order = [4, 3, 2, 1, 0]  # reversed: every input comes later in the file
    where = {old: new for new, old in enumerate(order)}
    graph["nodes"] = [graph["nodes"][old] for old in order]
    for node in graph["nodes"]:
        node["inputs"] = [[where[i], k, v] for i, k, v in node["inputs"]]
    graph["heads"] = [[where[i], k, v] for i, k, v in graph["heads"]]
    graph["arg_nodes"] = [where[i] for i in graph["arg_nodes"]]
    loaded = rm.sym.load_json(json.dumps(graph))
    assert loaded.tojson() == net.tojson()
