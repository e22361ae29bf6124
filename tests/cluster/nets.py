"""Networks shared by the cluster tests (imported by name: pytest puts this folder on the path)."""
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
