"""An MXNet 1.x-style training script (``import mxnet as mx``), run by tests/compat through
raymod's runner. Usage: mx_style_mlp.py OUT.params; prints one JSON line."""
import json
import os
import sys

import numpy as np

import mxnet as mx
import mxnet.ndarray as nd
from mxnet.base import MXNetError
from mxnet.module.executor_group import DataParallelExecutorGroup
from mxnet.test_utils import assert_almost_equal

out_path = sys.argv[1]
mx.random.seed(7)
rng = np.random.RandomState(0)
x = rng.rand(200, 10).astype(np.float32)
y = (x.sum(axis=1) > 5).astype(np.float32)
train = mx.io.NDArrayIter(nd.array(x), nd.array(y), batch_size=20)

data = mx.sym.Variable("data")
net = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
net = mx.sym.SoftmaxOutput(net, name="softmax")
mod = mx.mod.Module(net, context=mx.cpu())
mod.fit(train, num_epoch=3, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
        initializer=mx.init.Xavier())

arg_params, _ = mod.get_params()
preds = mod.predict(train)
assert isinstance(preds, mx.nd.NDArray) and preds.context == mx.cpu()
assert_almost_equal(preds.asnumpy().sum(axis=1), np.ones(200), rtol=1e-5, atol=1e-6)
train.reset()
batch = next(iter(train))
assert type(batch.data[0].asnumpy()) is np.ndarray
mx.nd.save(out_path, {**{k: v.as_in_context(mx.cpu()) for k, v in arg_params.items()},
                      "preds": preds})
import mxnet.gluon  # noqa: E402,F401 - importing works; using it raises

try:
    mx.gluon.nn.Dense(3)
    gluon = "ran"
except MXNetError as err:
    gluon = str(err)
print(json.dumps({"argv": sys.argv[1:], "path0": sys.path[0], "version": mx.__version__,
                  "here": os.path.dirname(os.path.abspath(__file__)),
                  "executor_group": DataParallelExecutorGroup.__module__,
                  "acc": dict(mod.score(train, "acc"))["accuracy"], "gluon": gluon}))
