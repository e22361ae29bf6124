"""PythonModule / PythonLossModule: losses and layers written in Python on numpy arrays."""
import numpy as np
import pytest

import raymod as rm
from raymod.io import DataBatch

BATCH = 25


def _data(rows=200, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 6)).astype(np.float32)
    y = (x[:, :3].argmax(axis=1)).astype(np.float32)
    return x, y


def _scores(hidden=12):
    data = rm.sym.Variable("data")
    net = rm.sym.Activation(rm.sym.FullyConnected(data, num_hidden=hidden, name="fc1"),
                            act_type="tanh")
    return rm.sym.FullyConnected(net, num_hidden=3, name="fc2")


def _start(seed=2):
    rng = np.random.default_rng(seed)
    shapes = {"fc1_weight": (12, 6), "fc1_bias": (12,), "fc2_weight": (3, 12), "fc2_bias": (3,)}
    return {k: (0.4 * rng.standard_normal(s)).astype(np.float32) for k, s in shapes.items()}


def softmax_ce_grad(scores, labels):
    """Gradient of the summed softmax cross-entropy: softmax(scores) - onehot(labels)."""
    assert isinstance(scores, np.ndarray) and isinstance(labels, np.ndarray)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(len(labels)), labels.astype(int)] -= 1.0
    return p


def hinge_grad(scores, labels):
    """Multi-class hinge, Crammer-Singer: d/ds of max_j (1 + s_j - s_y) over j != y, taken
    as +1 at the arg max j and -1 at y (computed even when the margin is met, as the
    python_loss example of MXNet does)."""
    rows = np.arange(len(labels))
    y = labels.astype(int)
    margin = 1.0 + scores - scores[rows, y][:, None]
    margin[rows, y] = 0.0
    grad = np.zeros_like(scores)
    grad[rows, y] -= 1.0
    grad[rows, margin.argmax(axis=1)] += 1.0
    return grad


def _fit(mod, epochs=2, rows=200):
    x, y = _data(rows)
    it = rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=4)
    metric = rm.metric.create("acc")
    mod.fit(it, num_epoch=epochs, arg_params={k: v.copy() for k, v in _start().items()},
            eval_metric=metric, optimizer_params={"learning_rate": 0.05, "momentum": 0.9})
    args = {k: v.copy() for k, v in mod.get_params()[0].items()}
    return args, metric.get_global()[1]


def _loss_chain(grad_func=softmax_ce_grad, workers=None):
    return (rm.mod.SequentialModule()
            .add(rm.mod.Module(_scores(), label_names=None, workers=workers))
            .add(rm.mod.PythonLossModule(grad_func=grad_func), take_labels=True,
                 auto_wiring=True))


def test_python_softmax_loss_trains_to_the_softmax_output_module_params():
    one, acc_one = _fit(rm.mod.Module(rm.sym.SoftmaxOutput(_scores(), name="softmax")))
    chained, acc_chain = _fit(_loss_chain())
    for name in one:
        np.testing.assert_allclose(chained[name], one[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert acc_chain == pytest.approx(acc_one, abs=1e-12)


def test_hinge_loss_as_in_mxnets_python_loss_example_learns():
    chain = _loss_chain(hinge_grad)
    _, acc = _fit(chain, epochs=4)
    assert acc > 0.8
    x, y = _data(seed=7)
    score = dict(chain.score(rm.io.NDArrayIter(x, y, batch_size=BATCH), "acc"))
    assert score["accuracy"] > 0.8


def test_loss_gradient_reaches_the_parameters_by_the_chain_rule():
    # one linear layer: dL/dW = grad_func(scores, y)^T x, dL/db = column sums
    x, y = _data(BATCH)
    fc = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3, name="fc")
    chain = (rm.mod.SequentialModule().add(rm.mod.Module(fc, label_names=None))
             .add(rm.mod.PythonLossModule(grad_func=hinge_grad), take_labels=True,
                  auto_wiring=True))
    chain.bind([("data", x.shape)], [("softmax_label", y.shape)])
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 6)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    chain.init_params(arg_params={"fc_weight": w, "fc_bias": b})
    chain.forward(DataBatch([x], [y]), is_train=True)
    chain.backward()
    scores = x @ w.T + b
    np.testing.assert_allclose(chain.get_outputs()[0], scores, rtol=1e-5, atol=1e-6)
    g = hinge_grad(scores, y)
    group = chain._modules[0]._exec_group
    grads = dict(zip(group.param_names, (block[0] for block in group.grad_arrays)))
    np.testing.assert_allclose(grads["fc_weight"], g.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads["fc_bias"], g.sum(axis=0), rtol=1e-5, atol=1e-6)


class Double(rm.mod.PythonModule):
    """y = 2 x, written in Python."""

    def __init__(self):
        super().__init__(["data"], None, ["double_output"])
        self._x = self._grad = None

    def _compute_output_shapes(self):
        return [("double_output", tuple(self._data_shapes[0][1]))]

    def forward(self, data_batch, is_train=None):
        self._x = data_batch.data[0]

    def get_outputs(self, merge_multi_context=True):
        return [2.0 * self._x]

    def backward(self, out_grads=None):
        self._grad = 2.0 * out_grads[0]

    def get_input_grads(self, merge_multi_context=True):
        return [self._grad]


def test_python_module_in_the_middle_of_a_chain():
    one_sym = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(
        2.0 * rm.sym.Activation(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=12,
                                                      name="fc1"), act_type="tanh"),
        num_hidden=3, name="fc2"), name="softmax")
    one, _ = _fit(rm.mod.Module(one_sym))
    feats = rm.sym.Activation(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=12,
                                                    name="fc1"), act_type="tanh")
    head = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=3,
                                                      name="fc2"), name="softmax")
    chain = (rm.mod.SequentialModule().add(rm.mod.Module(feats, label_names=None))
             .add(Double(), auto_wiring=True)
             .add(rm.mod.Module(head), take_labels=True, auto_wiring=True))
    chained, _ = _fit(chain)
    for name in one:
        np.testing.assert_allclose(chained[name], one[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)


def _bound_loss(grad_func=softmax_ce_grad):
    loss = rm.mod.PythonLossModule(grad_func=grad_func)
    loss.bind([("data", (4, 3))], [("softmax_label", (4,))])
    loss.init_params()
    return loss


def test_bad_use_gives_clear_errors():
    with pytest.raises(ValueError, match=r"PythonLossModule\(workers=2\): Python modules run "
                                         "in this process"):
        rm.mod.PythonLossModule(grad_func=softmax_ce_grad, workers=2)
    with pytest.raises(ValueError, match=r"SequentialModule\(workers=2\): a chain has no "
                                         "executors of its own"):
        rm.mod.SequentialModule(workers=2)
    with pytest.raises(ValueError, match=r"fit\(checkpoint=..., resume=...\) is not supported"):
        _loss_chain().fit(None, num_epoch=1, checkpoint="somewhere")
    with pytest.raises(TypeError, match="grad_func must be callable, got int"):
        rm.mod.PythonLossModule(grad_func=3)
    with pytest.raises(ValueError, match="takes one data input"):
        rm.mod.PythonLossModule(data_names=["a", "b"])
    loss = rm.mod.PythonLossModule()
    with pytest.raises(ValueError, match=r"grad_req='add'\): only 'write'"):
        loss.bind([("data", (4, 3))], [("softmax_label", (4,))], grad_req="add")
    with pytest.raises(ValueError, match=r"data_shapes name \['x'\], expected data_names "
                                         r"\['data'\]"):
        loss.bind([("x", (4, 3))], [("softmax_label", (4,))])
    assert not loss.binded
    loss = _bound_loss(lambda s, y: np.zeros((2, 2)))
    batch = DataBatch([np.zeros((4, 3), np.float32)], [np.zeros(4, np.float32)])
    loss.forward(batch, is_train=True)
    with pytest.raises(ValueError, match=r"grad_func returned shape \(2, 2\), expected the "
                                         r"scores' shape \(4, 3\)"):
        loss.backward()
    with pytest.raises(ValueError, match="a loss takes no out_grads"):
        loss.backward(out_grads=[np.zeros((4, 3))])
    with pytest.raises(RuntimeError, match="pre_sliced=True"):
        loss.update_metric(rm.metric.create("acc"), [[batch.label[0]]], pre_sliced=True)
    with pytest.raises(NotImplementedError, match="install_monitor is not supported"):
        loss.install_monitor(None)
    with pytest.raises(ValueError, match="needs the batch's labels"):
        loss.forward(DataBatch([np.zeros((4, 3), np.float32)]), is_train=True)


def test_loss_outputs_and_metric():
    loss = _bound_loss()
    scores = np.array([[3, 1, 0], [0, 2, 1], [1, 0, 5], [2, 3, 0]], np.float32)
    labels = np.array([0, 1, 1, 0], np.float32)
    loss.forward(DataBatch([scores], [labels]), is_train=True)
    assert loss.get_outputs()[0] is scores
    assert loss.output_shapes == [("pyloss_output", (4, 3))]
    loss.backward()
    np.testing.assert_allclose(loss.get_input_grads()[0], softmax_ce_grad(scores, labels))
    acc = rm.metric.create("acc")
    loss.update_metric(acc, [labels])
    assert acc.get() == ("accuracy", 0.5)
    assert loss.get_params() == ({}, {})


@pytest.mark.ray
def test_chain_with_its_module_on_workers_matches_in_process(ray_cluster, close_modules):
    # the Module runs on 2 workers, the Python loss in this process
    local, acc_local = _fit(_loss_chain(), epochs=1, rows=100)
    chain = _loss_chain(workers=2)
    close_modules(chain._modules[0])
    remote, acc_remote = _fit(chain, epochs=1, rows=100)
    for name in local:
        np.testing.assert_allclose(remote[name], local[name], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    assert acc_remote == pytest.approx(acc_local, abs=1e-12)
