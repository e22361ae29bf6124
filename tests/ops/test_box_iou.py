import itertools

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


def reference_iou(lhs, rhs, fmt="corner"):
    def corners(b):
        return b if fmt == "corner" else [b[0] - b[2] / 2, b[1] - b[3] / 2,
                                          b[0] + b[2] / 2, b[1] + b[3] / 2]

    def area(b):
        w, h = (b[2] - b[0], b[3] - b[1]) if fmt == "corner" else (b[2], b[3])
        return 0.0 if w < 0 or h < 0 else w * h

    a_rows, b_rows = lhs.reshape(-1, 4), rhs.reshape(-1, 4)
    out = np.zeros((len(a_rows), len(b_rows)))
    for (i, a), (j, b) in itertools.product(enumerate(a_rows), enumerate(b_rows)):
        ca, cb = corners(a), corners(b)
        inter = (max(0.0, min(ca[2], cb[2]) - max(ca[0], cb[0]))
                 * max(0.0, min(ca[3], cb[3]) - max(ca[1], cb[1])))
        out[i, j] = 0.0 if inter <= 0 else inter / (area(a) + area(b) - inter)
    return out.reshape(lhs.shape[:-1] + rhs.shape[:-1])


@pytest.mark.parametrize("fmt, lshape, rshape", [("corner", (5, 4), (7, 4)),
                                                 ("center", (2, 3, 4), (6, 4)),
                                                 ("corner", (2, 3, 4), (2, 2, 4))])
def test_box_iou(ctx, rng, fmt, lshape, rshape):
    lhs, rhs = rng.uniform(-0.2, 1, lshape), rng.uniform(-0.2, 1, rshape)  # some empty boxes
    lhs[0, ...] = np.round(lhs[0, ...] * 4) / 4  # exact touching / identical edges
    sym = op_symbol("_contrib_box_iou", ["lhs", "rhs"], format=fmt)
    check_forward(sym, {"lhs": lhs, "rhs": rhs}, [reference_iou(lhs, rhs, fmt)], ctx,
                  rtol=1e-12, atol=1e-14)


def test_box_iou_mxnet_example_float32_and_zero_gradient(ctx):
    x = np.array([[0.5, 0.5, 1.0, 1.0], [0.0, 0.0, 0.5, 0.5]], np.float32)
    y = np.array([[0.25, 0.25, 0.75, 0.75]], np.float32)
    sym = op_symbol("_contrib_box_iou", ["lhs", "rhs"])
    ex = bind(sym, {"lhs": x, "rhs": y}, ctx)
    out = ex.forward(is_train=True)[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(as_numpy(out), [[1 / 7], [1 / 7]], rtol=1e-6)
    ex.backward([ctx.xp.ones((2, 1), np.float32)])
    # MXNet back-propagates zeros through box_iou ("for now", says its documentation)
    assert not as_numpy(ex.grad_dict["lhs"]).any() and not as_numpy(ex.grad_dict["rhs"]).any()


def test_box_iou_shapes_and_errors():
    sym = op_symbol("_contrib_box_iou", ["lhs", "rhs"])
    assert sym.infer_shape(lhs=(2, 5, 4), rhs=(3, 4))[1] == [(2, 5, 3)]
    with pytest.raises(ShapeError, match=r"_contrib_box_iou.*rhs must be \(\.\.\., 4\).*\(3, 5\)"):
        sym.infer_shape(lhs=(2, 5, 4), rhs=(3, 5))
    with pytest.raises(ShapeError, match=r"_contrib_box_iou.*lhs must be.*\(4,\)"):
        sym.infer_shape(lhs=(4,), rhs=(3, 4))
    with pytest.raises(AttributeValueError, match=r"_contrib_box_iou.*format"):
        op_symbol("_contrib_box_iou", ["lhs", "rhs"], format="xywh")
