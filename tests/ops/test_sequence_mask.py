import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axis", [0, 1])
def test_sequence_mask(ctx, rng, axis):
    s = op_symbol("SequenceMask", ["data", "sequence_length"], use_sequence_length=True,
                  value=-1.0, axis=axis)
    x = rng.standard_normal((4, 3, 2) if axis == 0 else (3, 4, 2))
    lengths = np.array([1.0, 4.0, 2.0])

    def reference(data, sequence_length):
        steps = np.arange(4)
        keep = steps[:, None] < sequence_length if axis == 0 else steps < sequence_length[:, None]
        return np.where(keep[..., None], data, -1.0)
    inputs = {"data": x, "sequence_length": lengths}
    check_forward(s, inputs, reference, ctx)
    check_gradient(s, inputs, ctx, no_grad=["sequence_length"])


def test_sequence_mask_without_lengths_and_shapes(ctx, rng):
    s = op_symbol("SequenceMask", ["data"])
    assert s.list_arguments() == ["data"]
    x = rng.standard_normal((3, 2))
    check_forward(s, {"data": x}, x, ctx)
    s = op_symbol("SequenceMask", ["data", "sequence_length"], use_sequence_length=True, axis=1)
    assert s.infer_shape(data=(2, 5, 4))[0] == [(2, 5, 4), (2,)]
    assert s.infer_type(data="float32", sequence_length="int32")[0] == [np.float32, np.int32]
    lengths = np.array([3, 1], dtype=np.int32)
    out = s.eval(data=np.ones((2, 4), np.float32), sequence_length=lengths)[0]
    np.testing.assert_array_equal(out, [[1, 1, 1, 0], [1, 0, 0, 0]])
