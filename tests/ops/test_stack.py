import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient


@pytest.mark.parametrize("axis", [0, 1, -1, 3, -4])
def test_stack(ctx, rng, axis):
    names = ["a", "b", "c"]
    s = sym.stack(*[sym.Variable(n) for n in names], axis=axis)
    inputs = {n: rng.standard_normal((3, 1, 2)) for n in names}

    def expected(**kw):
        # a new axis of size 3, entry i of which is input i
        out = np.empty((3,) + kw["a"].shape)
        for i, n in enumerate(names):
            out[i] = kw[n]
        return np.moveaxis(out, 0, axis)
    check_forward(s, inputs, expected, ctx)
    check_gradient(s, inputs, ctx)
    inputs32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    assert check_forward(s, inputs32, expected, ctx)[0].dtype == np.float32


def test_stack_shapes_json_and_errors():
    s = sym.stack(sym.Variable("a"), sym.Variable("b"), axis=1, name="st")
    assert s.list_arguments() == ["a", "b"]
    assert '"num_args": "2"' in s.tojson()
    # the inputs' shape comes back from the output
    assert s.infer_shape_partial(a=(3, 0))[0] == [(3, 0), (3, 0)]
    assert (s + sym.Variable("y")).infer_shape(a=(3, 0), y=(3, 2, 4))[0][:2] == [(3, 4), (3, 4)]
    with pytest.raises(ShapeError, match=r"stack 'st'.*input arg1 has shape \(3, 2, 1\) but arg0 "
                                         r"has \(3, 1, 2\)"):
        s.infer_shape(a=(3, 1, 2), b=(3, 2, 1))
    with pytest.raises(ShapeError, match=r"axis=4 is out of range for data of shape \(3, 1, 2\)"):
        sym.stack(sym.Variable("a"), sym.Variable("b"), axis=4).infer_shape(a=(3, 1, 2))
