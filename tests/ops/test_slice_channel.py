import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axis, squeeze", [(1, False), (-1, False), (1, True)])
def test_slice_channel(ctx, rng, axis, squeeze):
    s = op_symbol("SliceChannel", ["data"], num_outputs=3, axis=axis, squeeze_axis=squeeze)
    x = rng.standard_normal((2, 3, 6) if axis == -1 else (2, 3, 4))

    def reference(data):
        parts = np.split(data, 3, axis=axis)
        return [p.squeeze(axis) for p in parts] if squeeze else parts
    check_forward(s, {"data": x}, reference, ctx)
    check_gradient(s, {"data": x}, ctx)


def test_split_outputs_and_shapes():
    s = op_symbol("split", ["data"], num_outputs=2, axis=1, squeeze_axis=True)
    assert s.list_outputs() == ["op_output0", "op_output1"]
    assert s.infer_shape(data=(4, 2, 5))[1] == [(4, 5), (4, 5)]
    with pytest.raises(ShapeError, match="3 equal parts"):
        op_symbol("split", ["data"], num_outputs=3).infer_shape(data=(2, 4))
    with pytest.raises(ShapeError, match="squeeze_axis"):
        op_symbol("split", ["data"], num_outputs=2, squeeze_axis=True).infer_shape(data=(2, 4))
