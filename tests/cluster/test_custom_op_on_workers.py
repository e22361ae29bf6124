"""A network with Python custom ops (rm.operator) trains on Ray workers as in one process.

The ops are defined here, in a module the workers cannot import: their classes travel by
value with the network's definition.
"""
import numpy as np
import pytest

import raymod as rm

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


class SoftplusOp(rm.operator.CustomOp):
    """log(1 + exp(x)), gradient sigmoid(x) times the head gradient."""

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], np.logaddexp(0, in_data[0]))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] / (1 + np.exp(-in_data[0])))


@rm.operator.register("workers_test_softplus")
class SoftplusProp(rm.operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return SoftplusOp()


class SoftmaxLossOp(rm.operator.CustomOp):
    """Softmax over the classes; backward is softmax minus the one-hot label (a loss head)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0]
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.assign(out_data[0], req[0], e / e.sum(axis=1, keepdims=True))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        grad = out_data[0].copy()
        grad[np.arange(grad.shape[0]), in_data[1].astype(np.int64)] -= 1
        self.assign(in_grad[0], req[0], grad)
        self.assign(in_grad[1], req[1], 0)


@rm.operator.register("workers_test_softmax_loss")
class SoftmaxLossProp(rm.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0][:1]], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return SoftmaxLossOp()


def net():
    h = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=16, name="fc1")
    h = rm.sym.Custom(h, op_type="workers_test_softplus", name="act")
    out = rm.sym.FullyConnected(h, num_hidden=10, name="fc2")
    return rm.sym.Custom(out, rm.sym.Variable("softmax_label"),
                         op_type="workers_test_softmax_loss", name="softmax")


def train(workers, close):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((180, 20)).astype(np.float32)
    y = x[:, :10].argmax(axis=1).astype(np.float32)
    rm.random.seed(7)
    it = rm.io.NDArrayIter(x, y, batch_size=60, shuffle=True, seed=11)   # 3 steps
    mod = rm.mod.Module(net(), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(it, num_epoch=1, initializer=rm.init.Xavier(),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    return {k: v.copy() for k, v in mod.get_params()[0].items()}


def test_custom_ops_train_on_workers_as_in_one_process(close_modules):
    ref = train(None, close_modules)
    got = train(2, close_modules)
    assert set(ref) == set(got) == {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}
    for name in ref:
        scale = max(np.abs(ref[name]).max(), 1e-3)
        err = np.abs(ref[name] - got[name]).max() / scale
        assert err < 1e-5, f"{name}: max relative difference {err:.2e}"
    assert np.abs(ref["fc1_bias"]).max() > 0   # the three steps did train
