"""An MXNet 1.x script whose own code runs wherever its modules train (tests/compat/
test_user_code_on_workers.py runs it in process and with ``--workers 2``):

- a CustomOp that calls ``.asnumpy()`` and MXNet's imperative ``mx.nd`` operators,
- a metric from a sibling module that does ``import mxnet`` (``mx_metrics.py``), used by a
  user subclass of ``Module``,
- several modules alive at once: a ``SequentialModule`` of two ``Module``s, then a module
  ``Module.load``ed from the subclass's checkpoint and bound beside it,
- a hand-written loop over a module with states shaped (layers, batch, hidden), reading
  ``get_outputs(merge_multi_context=False)`` and clipping ``_exec_group.grad_arrays`` with
  ``mx.gluon.utils.clip_global_norm`` before ``update``,
- a ``BucketingModule`` whose buckets first appear in the middle of training,
- states whose variables pin the batch size (``shape=(1, batch, hidden)``, as
  example/rnn/word_lm declares them), fed back from ``get_outputs``,
- ``logging.basicConfig`` after ``import mxnet``: the script's INFO lines must print.

Usage: mx_style_everywhere.py FOLDER. Writes what it found to FOLDER/report.json.
"""
import json
import logging
import os
import sys

import numpy as np

import mxnet as mx
from mx_metrics import Agreement

logging.basicConfig(level=logging.INFO, format="%(message)s")
logging.info("script logging: on")
folder = sys.argv[1]


class ScaledSoftmax(mx.operator.CustomOp):
    """softmax(2x) through NDArrays: ``.asnumpy()`` and ``mx.nd.softmax``."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        self.assign(out_data[0], req[0], mx.nd.softmax(mx.nd.array(2 * x), axis=1))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].asnumpy().astype("int64")
        grad = 2 * (out_data[0].asnumpy() - np.eye(out_data[0].shape[1])[label])
        self.assign(in_grad[0], req[0], mx.nd.array(grad))
        self.assign(in_grad[1], req[1], 0)


@mx.operator.register("everywhere_scaled_softmax")
class ScaledSoftmaxProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0][:1]], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return ScaledSoftmax()


mx.random.seed(3)
rng = np.random.RandomState(0)
x = rng.rand(96, 8).astype(np.float32)
y = (x[:, :4].sum(axis=1) > x[:, 4:].sum(axis=1)).astype(np.float32)
train = mx.io.NDArrayIter(x, y, batch_size=24)
report = {}

# 1. a CustomOp and a user metric
data = mx.sym.Variable("data")
head = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
head = mx.sym.Custom(head, mx.sym.Variable("softmax_label"),
                     op_type="everywhere_scaled_softmax", name="softmax")
class UserModule(mx.mod.Module):
    """A user's subclass with a ``bind`` override, as MXNet-era code has."""

    def bind(self, data_shapes, label_shapes=None, **kwargs):
        super().bind(data_shapes, label_shapes, **kwargs)


mod = UserModule(head, context=mx.cpu())
mod.fit(train, eval_metric=Agreement(), num_epoch=3, optimizer="sgd",
        optimizer_params={"learning_rate": 0.2}, initializer=mx.init.Xavier())
report["custom"] = dict(mod.score(train, Agreement()))["agreement"]
mod.save_checkpoint(os.path.join(folder, "custom"), 3)

# 2. a chain of two modules, then a module loaded beside the one that trained
first = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=6, name="fc1"),
                          act_type="tanh", name="act1")
second = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2,
                                                    name="fc2"), name="softmax")
chain = mx.mod.SequentialModule()
chain.add(mx.mod.Module(first, label_names=None, context=mx.cpu()))
chain.add(mx.mod.Module(second, context=mx.cpu()), take_labels=True, auto_wiring=True)
train.reset()
chain.fit(train, num_epoch=3, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
          initializer=mx.init.Xavier())
report["chain"] = dict(chain.score(train, "acc"))["accuracy"]
loaded = mx.mod.Module.load(os.path.join(folder, "custom"), 3, context=mx.cpu())
loaded.bind(train.provide_data, train.provide_label, for_training=False)
report["loaded"] = dict(loaded.score(train, Agreement()))["agreement"]

# 3. a hand-written loop with states (layers, batch, hidden) and clipped gradients
seq = mx.sym.Variable("data")
state = mx.sym.Variable("state")
cell = mx.sym.RNN(seq, mx.sym.Variable("rnn_weight"), state, state_size=5, num_layers=1,
                  mode="rnn_tanh", state_outputs=True, name="rnn")
pred = mx.sym.FullyConnected(mx.sym.Reshape(cell[0], shape=(-1, 5)), num_hidden=1, name="out")
# a loss per (time, sequence) row, as word_lm's: a mean over the whole batch would be a mean
# over each worker's slice instead (docs/differences.md)
loss = mx.sym.MakeLoss(mx.sym.square(
    mx.sym.Reshape(pred, shape=(-1,)) - mx.sym.Reshape(mx.sym.Variable("target"),
                                                       shape=(-1,))))
net = mx.sym.Group([cell[1], loss])
steps, batch = 3, 8
lm = mx.mod.Module(net, data_names=["data"], label_names=["target"], state_names=["state"],
                   context=mx.cpu())
lm.bind([("data", (steps, batch, 2))], [("target", (steps, batch))])
lm.init_params(mx.init.Uniform(0.3))
lm.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
seqs = rng.rand(4, steps, batch, 2).astype(np.float32)
states, parts, norms, losses = 0.0, set(), [], []
for k in range(4):
    target = seqs[k].sum(axis=2)
    if isinstance(states, float):
        lm.set_states(value=states)
    else:
        lm.set_states(states=states)
    lm.forward(mx.io.DataBatch([mx.nd.array(seqs[k])], [mx.nd.array(target)]), is_train=True)
    outputs = lm.get_outputs(merge_multi_context=False)
    parts.add(len(outputs[0]))
    states = outputs[:-1]
    lm.backward()
    grads = [g for per_param in lm._exec_group.grad_arrays for g in per_param]
    norms.append(float(mx.gluon.utils.clip_global_norm(grads, 0.05)))
    lm.update()
    losses.append(float(outputs[-1][0].asnumpy().sum()))
report["parts"] = sorted(parts)
report["state_shape"] = list(states[0][0].shape)
report["norms"], report["losses"] = norms, losses
report["lm"] = {k: v.asnumpy().tolist() for k, v in lm.get_params()[0].items()}

# 4. buckets first seen in the middle of training (bound on the workers then)
def bucket_batches():
    for key in (4, 4, 6, 4, 8, 6, 8, 4, 6, 4):
        tokens = rng.randint(0, 10, size=(8, key)).astype(np.float32)
        yield mx.io.DataBatch([mx.nd.array(tokens)], [mx.nd.array(tokens.sum(axis=1) % 2)],
                              bucket_key=key,
                              provide_data=[mx.io.DataDesc("data", (8, key))],
                              provide_label=[mx.io.DataDesc("softmax_label", (8,))])


class Buckets(mx.io.DataIter):
    def __init__(self):
        super().__init__(8)
        self.default_bucket_key = 8
        self.provide_data = [mx.io.DataDesc("data", (8, 8))]
        self.provide_label = [mx.io.DataDesc("softmax_label", (8,))]
        self.batches = list(bucket_batches())
        self.reset()

    def reset(self):
        self.left = iter(self.batches)

    def next(self):
        return next(self.left)


def bucket_net(key):
    embedded = mx.sym.Embedding(mx.sym.Variable("data"), input_dim=10, output_dim=5,
                                name="emb")
    scores = mx.sym.FullyConnected(mx.sym.mean(embedded, axis=1), num_hidden=2, name="fc")
    return mx.sym.SoftmaxOutput(scores, name="softmax"), ("data",), ("softmax_label",)


buckets = mx.mod.BucketingModule(bucket_net, default_bucket_key=8, context=mx.cpu())
buckets.fit(Buckets(), num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier())
report["buckets"] = {k: v.asnumpy().tolist() for k, v in buckets.get_params()[0].items()}

# 5. states whose variables pin the batch size (as example/rnn/word_lm's): not cut
pinned = mx.sym.RNN(seq, mx.sym.Variable("rnn_weight"),
                    mx.sym.Variable("state", shape=(1, batch, 5)), state_size=5, num_layers=1,
                    mode="rnn_tanh", state_outputs=True, name="rnn")
pinned_net = mx.sym.Group([pinned[1], mx.sym.MakeLoss(mx.sym.square(
    mx.sym.Reshape(mx.sym.FullyConnected(mx.sym.Reshape(pinned[0], shape=(-1, 5)),
                                         num_hidden=1, name="out"), shape=(-1,))
    - mx.sym.Reshape(mx.sym.Variable("target"), shape=(-1,))))])
pm = mx.mod.Module(pinned_net, data_names=["data"], label_names=["target"],
                   state_names=["state"], context=mx.cpu())
pm.bind([("data", (steps, batch, 2))], [("target", (steps, batch))])
pm.init_params(mx.init.Uniform(0.3))
pm.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
pm.set_states(value=0.0)
for k in range(3):
    pm.forward(mx.io.DataBatch([mx.nd.array(seqs[k])], [mx.nd.array(seqs[k].sum(axis=2))]),
               is_train=True)
    pm.set_states(states=pm.get_outputs(merge_multi_context=False)[:-1])
    pm.backward()
    # one worker's gradient, as the object store hands it over: clipped in place all the same
    mx.gluon.utils.clip_global_norm([g for per in pm._exec_group.grad_arrays for g in per], 0.05)
    pm.update()
report["pinned"] = {k: v.asnumpy().tolist() for k, v in pm.get_params()[0].items()}
logging.info("report %s", {k: v for k, v in report.items()
                           if k not in ("lm", "buckets", "pinned")})
with open(os.path.join(folder, "report.json"), "w") as f:
    json.dump(report, f)
