"""Networks and data shared by the cluster tests (imported by name: pytest puts this folder on
the path)."""
import numpy as np

import raymod as rm


def mlp(*hidden: int) -> rm.sym.Symbol:
    """A ReLU MLP with the given hidden widths (default one layer of 32) and a 10-way softmax."""
    h = rm.sym.Variable("data")
    for i, width in enumerate(hidden or (32,)):
        h = rm.sym.Activation(rm.sym.FullyConnected(h, num_hidden=width, name=f"fc{i + 1}"),
                              act_type="relu")
    return rm.sym.SoftmaxOutput(
        rm.sym.FullyConnected(h, num_hidden=10, name=f"fc{len(hidden or (32,)) + 1}"),
        name="softmax")


def argmax_rows(steps: int, batch: int = 40) -> rm.io.NDArrayIter:
    """``steps`` shuffled batches of 16 normal features labelled by the argmax of the first 10
    (the same rows every call)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps * batch, 16)).astype(np.float32)
    y = (x[:, :10].argmax(axis=1)).astype(np.float32)
    return rm.io.NDArrayIter(x, y, batch_size=batch, shuffle=True, seed=2)
