"""An MXNet 1.x-style training script (``import mxnet as mx``) for tests/compat/
test_run_workers.py: a user subclass of ``mx.mod.Module``, fitted with the kvstore named on
the command line, given as a name or as an ``mx.kv.create`` store object.

Usage: mx_style_workers.py KVSTORE {name,object}. Leaves what it found in ``report`` (the
runner returns the script's globals) and prints it as a JSON line, less the parameters.
"""
import json
import os
import sys

import numpy as np

import mxnet as mx

kvstore_type, given_as = sys.argv[1], sys.argv[2]


class CountingModule(mx.mod.Module):
    """A user's subclass, as MXNet code often has: counts its optimizer set-ups."""

    optimizer_setups = 0

    def init_optimizer(self, *args, **kwargs):
        self.optimizer_setups += 1
        super().init_optimizer(*args, **kwargs)


mx.random.seed(7)
rng = np.random.RandomState(0)
x = rng.rand(320, 10).astype(np.float32)
y = (x[:, :5].sum(axis=1) > x[:, 5:].sum(axis=1)).astype(np.float32)
train = mx.io.NDArrayIter(x[:256], y[:256], batch_size=32, shuffle=True)
val = mx.io.NDArrayIter(x[256:], y[256:], batch_size=32)

data = mx.sym.Variable("data")
net = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
net = mx.sym.Activation(net, act_type="relu")
net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
net = mx.sym.SoftmaxOutput(net, name="softmax")

kv = mx.kv.create(kvstore_type) if given_as == "object" else kvstore_type
mod = CountingModule(net, context=mx.cpu())
mod.fit(train, eval_data=val, num_epoch=4, kvstore=kv, optimizer="sgd",
        optimizer_params={"learning_rate": 0.5, "momentum": 0.9},
        initializer=mx.init.Xavier())

pool = mod._pool  # raymod: the module's Ray worker pool, None in process
report = {
    "acc": dict(mod.score(val, "acc"))["accuracy"],
    "params": {k: v.asnumpy() for k, v in mod.get_params()[0].items()},
    "placement": type(mod._placement).__name__,
    "worker_pids": sorted(info["pid"] for info in pool.info.values()) if pool else [],
    "driver_pid": os.getpid(),
    "kvstore": None if mod._kvstore is None else mod._kvstore.type,
    "script_kvstore": kv.type if given_as == "object" else kv,
    "optimizer_setups": mod.optimizer_setups,
}
print(json.dumps({k: v for k, v in report.items() if k != "params"}))
