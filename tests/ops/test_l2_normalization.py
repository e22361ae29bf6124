import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def reference_l2_norm(x, mode, eps):
    axes = {"instance": tuple(range(1, x.ndim)), "channel": (1,),
            "spatial": tuple(range(2, x.ndim))}[mode]
    return x / np.sqrt((x ** 2).sum(axis=axes, keepdims=True) + eps)


@pytest.mark.parametrize("mode, shape", [("instance", (3, 4, 5)), ("instance", (4, 7)),
                                         ("channel", (2, 3, 4, 5)), ("channel", (2, 6, 3)),
                                         ("spatial", (2, 3, 4, 5))])
def test_l2_normalization(ctx, rng, mode, shape):
    x = rng.standard_normal(shape)
    sym = op_symbol("L2Normalization", ["data"], mode=mode, eps=1e-6)
    check_forward(sym, {"data": x}, [reference_l2_norm(x, mode, float(np.float32(1e-6)))], ctx,
                  rtol=1e-12)
    check_gradient(sym, {"data": x}, ctx, max_elements=80)


def test_l2_normalization_float32_and_hidden_norm(ctx, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    sym = op_symbol("L2Normalization", ["data"])
    assert sym.list_outputs() == ["op_output"]
    out = check_forward(sym, {"data": x}, [reference_l2_norm(x, "instance", 1e-10)], ctx,
                        rtol=1e-6)
    assert out[0].dtype == np.float32


def test_l2_normalization_errors():
    with pytest.raises(ShapeError, match=r"L2Normalization.*'channel' needs data of at least 3"):
        op_symbol("L2Normalization", ["data"], mode="channel").infer_shape(data=(4, 5))
    with pytest.raises(AttributeValueError, match=r"L2Normalization.*mode.*'instance'"):
        op_symbol("L2Normalization", ["data"], mode="batch")
