"""Under the compatibility layer, every array raymod hands to user code is an NDArray view:
executors, executor groups, modules (inner ones too), CustomOps, metrics, optimizer states.

Each test installs the layer (as ``raymod run`` does) and removes it afterwards, so the rest
of the suite sees plain arrays again.
"""
import numpy as np
import pytest

import raymod as rm
import raymod.compat
from raymod.compat import NDArray
from raymod.io import DataBatch


@pytest.fixture
def mx():
    raymod.compat.install()
    import mxnet
    yield mxnet
    raymod.compat.uninstall()


def _is_view(array):
    return isinstance(array, NDArray) and array.stype == "default"


def _mlp(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=4, name="fc1")
    net = mx.sym.BatchNorm(net, name="bn")
    return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=3, name="fc2"),
                                name="softmax")


def test_executor_arrays_are_views_of_the_memory_it_computes_on(mx):
    exe = _mlp(mx).simple_bind(mx.cpu(), data=(5, 6))
    arrays = (list(exe.arg_dict.values()) + list(exe.grad_dict.values())
              + list(exe.aux_dict.values()) + exe.arg_arrays + exe.outputs)
    assert all(_is_view(a) for a in arrays)
    assert exe.arg_dict["fc1_weight"] is exe.arg_arrays[1]  # one view per array, kept
    exe.arg_dict["data"][:] = np.arange(30).reshape(5, 6) % 7  # writes through the views
    exe.arg_dict["bn_gamma"][:] = 1  # reach the computation
    exe.arg_dict["fc1_weight"][:] = 0.5
    exe.arg_dict["fc2_weight"][:] = 0.1
    out = exe.forward(is_train=True)[0]
    assert _is_view(out) and np.allclose(out.asnumpy().sum(axis=1), 1)
    exe.backward()
    assert exe.grad_dict["fc2_weight"].asnumpy().any()
    assert exe.outputs[0].context == mx.cpu(0)


def test_arrays_report_the_context_of_their_ctx_group(mx):
    # MXNet 1.9.1's test_module_ctx_group: the input gradients live on their group's device
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a") * 2
    with mx.AttrScope(ctx_group="dev2"):
        b = mx.sym.Variable("b")
    mod = mx.mod.Module(a + b, context=[mx.cpu(0)], data_names=["a", "b"], label_names=None,
                        group2ctxs={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    mod.bind([("a", (4, 2)), ("b", (4, 2))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(DataBatch([mx.nd.ones((4, 2)), mx.nd.ones((4, 2))]), is_train=True)
    mod.backward([mx.nd.ones((4, 2))])
    grads = mod.get_input_grads(merge_multi_context=False)
    assert [g[0].context for g in grads] == [mx.cpu(1), mx.cpu(2)]
    assert grads[0][0][1:].context == mx.cpu(1)  # slices keep it


def test_modules_executor_groups_and_updater_states_hand_out_views(mx):
    mod = mx.mod.Module(_mlp(mx), context=[mx.cpu(0), mx.cpu(1)])
    mod.bind([("data", (4, 6))], [("softmax_label", (4,))])
    mod.init_params()
    mod.init_optimizer(kvstore=None, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    rows = np.random.default_rng(0).standard_normal((4, 6))
    batch = DataBatch([mx.nd.array(rows)], [mx.nd.array([0, 1, 2, 0])])
    mod.forward_backward(batch)
    mod.update()
    group = mod._exec_group
    for blocks in (group.param_arrays, group.grad_arrays, group.aux_arrays):
        assert all(_is_view(a) for block in blocks for a in block)
    assert [a.context for a in group.param_arrays[0]] == [mx.cpu(0), mx.cpu(1)]
    args, auxs = mod.get_params()
    assert all(_is_view(v) for v in [*args.values(), *auxs.values()])
    assert _is_view(mod.get_outputs()[0])
    assert all(_is_view(o) for per_device in mod.get_outputs(False) for o in per_device)
    states = mod._updater.states
    assert states and all(_is_view(s) for s in states.values())
    # fc1_weight's momentum after one step (rows that differ: BatchNorm passes a gradient)
    assert float(abs(states[0].asnumpy()).sum()) > 0
    assert _is_view(mod.predict(mx.nd.ones((4, 6))))


def test_inner_modules_of_bucketing_and_sequential_modules_hand_out_views(mx):
    def sym_gen(key):
        return _mlp(mx), ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=6)
    mod.bind([("data", (4, 6))], [("softmax_label", (4,))])
    mod.init_params()
    inner = mod._curr_module
    assert all(_is_view(v) for v in inner.get_params()[0].values())
    seq = mx.mod.SequentialModule().add(mx.mod.Module(_mlp(mx)))
    seq.bind([("data", (4, 6))], [("softmax_label", (4,))])
    seq.init_params()
    assert all(_is_view(v) for v in seq._modules[0].get_params()[0].values())


def test_custom_ops_and_metrics_receive_ndarrays(mx):
    seen = {}

    class Double(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            seen["forward"] = [type(a) for a in in_data + out_data]
            self.assign(out_data[0], req[0], in_data[0].asnumpy() * 2)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            seen["backward"] = [type(a) for a in out_grad + in_grad]
            self.assign(in_grad[0], req[0], out_grad[0].asnumpy() * 2)

    @mx.operator.register("ndarray_surface_double")
    class DoubleProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return Double()

    class Mean(mx.metric.EvalMetric):
        def __init__(self):
            super().__init__("mean")

        def update(self, labels, preds):
            seen["metric"] = [type(a) for a in labels + preds]
            self.sum_metric += float(preds[0].asnumpy().mean())
            self.num_inst += 1

    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    net = mx.sym.Custom(net, op_type="ndarray_surface_double")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"))
    mod.bind([("data", (2, 3))], [("softmax_label", (2,))])
    mod.init_params()
    batch = DataBatch([mx.nd.ones((2, 3))], [mx.nd.zeros((2,))])
    mod.forward_backward(batch)
    metric = Mean()
    mod.update_metric(metric, batch.label)
    assert set(seen) == {"forward", "backward", "metric"}
    assert all(issubclass(t, NDArray) for types in seen.values() for t in types)
    assert metric.get() == ("mean", pytest.approx(1 / 3))


def test_uninstall_gives_plain_arrays_back():
    raymod.compat.install()
    raymod.compat.uninstall()
    exe = rm.sym.FullyConnected(rm.sym.Variable("x"), num_hidden=2).simple_bind(
        rm.cpu(), x=(3, 4))
    assert type(exe.arg_dict["x"]) is np.ndarray
    assert type(exe.forward()[0]) is np.ndarray
