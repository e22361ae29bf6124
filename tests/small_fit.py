"""The small classifier and data the fit-result, checkpoint-retention, early-stopping and
tracker tests train: a 6-16-3 MLP on 240 rows (160 to train, 4 steps an epoch at batch 40; 80
to validate), and a validation score scripted per epoch."""
import numpy as np

import raymod as rm


def net():
    data = rm.sym.Variable("data")
    hidden = rm.sym.Activation(rm.sym.FullyConnected(data, num_hidden=16, name="fc1"),
                               act_type="relu")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(hidden, num_hidden=3, name="fc2"),
                                name="softmax")


def iters(batch=40):
    """(train, validation) iterators."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((240, 6)).astype(np.float32)
    y = x[:, :3].argmax(axis=1).astype(np.float32)
    return (rm.io.NDArrayIter(x[:160], y[:160], batch_size=batch),
            rm.io.NDArrayIter(x[160:], y[160:], batch_size=batch))


def scripted(scores):
    """A validation metric ``score`` worth ``scores[epoch]``, and the epoch-end callback that
    tells it the epoch (validation runs after the epoch-end callbacks)."""
    state = {"epoch": 0}

    def note_epoch(epoch, *_):
        state["epoch"] = epoch
    metric = rm.metric.CustomMetric(lambda label, pred: scores[state["epoch"]], name="score")
    return metric, note_epoch
