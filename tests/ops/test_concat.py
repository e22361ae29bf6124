import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_concat(ctx, rng, dim):
    shapes = {0: [(2, 3), (4, 3), (1, 3)], 1: [(2, 3), (2, 1), (2, 2)]}
    shapes[-1] = shapes[1]
    s = sym.Concat(*[sym.Variable(f"x{i}") for i in range(3)], dim=dim)
    inputs = {f"x{i}": rng.standard_normal(sh) for i, sh in enumerate(shapes[dim])}
    check_forward(s, inputs, lambda **kw: np.concatenate([kw[f"x{i}"] for i in range(3)], dim), ctx)
    check_gradient(s, inputs, ctx)


def test_concat_shapes():
    s = sym.concat(sym.Variable("a"), sym.Variable("b"), dim=1, name="c")
    assert s.list_arguments() == ["a", "b"]
    # one unknown length along dim comes back from the output
    total = s + sym.Variable("y")
    assert total.infer_shape(a=(2, 3), b=(2, 0), y=(2, 7))[0] == [(2, 3), (2, 4), (2, 7)]
    with pytest.raises(ShapeError, match=r"Concat 'c'.*arg1 has shape \(2, 4, 6\).*arg0 has "
                                         r"\(2, 3, 5\).*dim=1"):
        s.infer_shape(a=(2, 3, 5), b=(2, 4, 6))
