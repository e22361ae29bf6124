import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("flatten", [True, False])
@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected(ctx, rng, flatten, no_bias):
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("FullyConnected", names, num_hidden=5, flatten=flatten, no_bias=no_bias)
    data = rng.standard_normal((3, 2, 4))
    in_units = 8 if flatten else 4
    inputs = {"data": data, "weight": rng.standard_normal((5, in_units))}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(5)

    def reference(data, weight, bias=0.0):
        x = data.reshape(3, -1) if flatten else data
        return x @ weight.T + bias
    check_forward(sym, inputs, reference, ctx)
    check_gradient(sym, inputs, ctx)


def test_fully_connected_infers_weight_and_rejects_wrong_width():
    sym = op_symbol("FullyConnected", ["data", "weight", "bias"], num_hidden=7)
    args, outs, _ = sym.infer_shape(data=(10, 3, 4))
    assert args == [(10, 3, 4), (7, 12), (7,)] and outs == [(10, 7)]
    with pytest.raises(ShapeError, match=r"FullyConnected 'op'.*weight.*\(7, 11\).*\(7, 12\)"):
        sym.infer_shape(data=(10, 12), weight=(7, 11))
