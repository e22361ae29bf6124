import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, MXNetError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_crop(x, h, w, top, left):
    out = np.empty(x.shape[:2] + (h, w), x.dtype)
    for i in range(h):
        for j in range(w):
            out[:, :, i, j] = x[:, :, top + i, left + j]
    return out


@pytest.mark.parametrize("h_w,offset,center,corner", [
    ((2, 3), (0, 0), False, (0, 0)), ((3, 2), (2, 4), False, (2, 4)),
    ((2, 3), (9, 9), True, (1, 1)), ((5, 6), (0, 0), False, (0, 0))])
def test_crop_by_size(ctx, rng, h_w, offset, center, corner):
    s = op_symbol("Crop", ["arg0"], h_w=h_w, offset=offset, center_crop=center)
    x = rng.standard_normal((2, 3, 5, 6))
    check_forward(s, {"arg0": x}, reference_crop(x, *h_w, *corner), ctx)
    check_gradient(s, {"arg0": x}, ctx)


@pytest.mark.parametrize("center,corner", [(False, (1, 2)), (True, (1, 1))])
def test_crop_like(ctx, rng, center, corner):
    s = op_symbol("Crop", ["arg0", "arg1"], offset=(1, 2), center_crop=center)
    x, like = rng.standard_normal((2, 3, 5, 6)), rng.standard_normal((4, 1, 3, 4))
    check_forward(s, {"arg0": x, "arg1": like}, reference_crop(x, 3, 4, *corner), ctx)
    grads = check_gradient(s, {"arg0": x, "arg1": like}, ctx)
    assert grads["arg1"].shape == like.shape and not grads["arg1"].any()


def test_crop_matches_mxnet_and_keeps_float32(ctx):
    # MXNet 1.9.1: Crop(arange(96).reshape(2, 3, 4, 4), h_w=(1, 2), center_crop=True)[0, 0]
    # is [[5, 6]]; with a (5, 7, 3, 1) crop_like it is [[1], [5], [9]]
    x = np.arange(96, dtype=np.float32).reshape(2, 3, 4, 4)
    out = bind(op_symbol("Crop", ["arg0"], h_w=(1, 2), center_crop=True), {"arg0": x},
               ctx).forward()[0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(as_numpy(out)[0, 0], [[5, 6]])
    ex = bind(op_symbol("Crop", ["arg0", "arg1"], center_crop=True),
              {"arg0": x, "arg1": np.ones((5, 7, 3, 1), np.float32)}, ctx)
    np.testing.assert_array_equal(as_numpy(ex.forward()[0])[0, 0], [[1], [5], [9]])


def test_crop_names_and_json():
    s = sym.Crop(sym.Variable("data"), sym.Variable("like"), name="c")
    assert s.list_arguments() == ["data", "like"]
    assert sym.Crop(num_args=2, name="c").list_arguments() == ["c_arg0", "c_arg1"]
    node = s.tojson()
    assert '"num_args": "2"' in node
    back = sym.load_json(sym.Crop(sym.Variable("d"), h_w=(2, 3), name="c").tojson())
    assert back.infer_shape(d=(1, 2, 4, 4))[1] == [(1, 2, 2, 3)]


def test_crop_bad_input():
    with pytest.raises(ShapeError, match=r"Crop 'op'.*data \(arg0\) must be 4-D.*\(2, 3, 4\)"):
        op_symbol("Crop", ["arg0"], h_w=(2, 2)).infer_shape(arg0=(2, 3, 4))
    with pytest.raises(ShapeError, match=r"crop size \(5, 2\).*h_w=\(5, 2\).*\(2, 3, 4, 4\)"):
        op_symbol("Crop", ["arg0"], h_w=(5, 2)).infer_shape(arg0=(2, 3, 4, 4))
    with pytest.raises(ShapeError, match=r"crop_like \(arg1\) \(1, 1, 5, 3\).*larger"):
        op_symbol("Crop", ["arg0", "arg1"]).infer_shape(arg0=(2, 3, 4, 4), arg1=(1, 1, 5, 3))
    with pytest.raises(ShapeError, match=r"crop_like \(arg1\) must be 4-D.*\(5, 7, 3\)"):
        op_symbol("Crop", ["arg0", "arg1"]).infer_shape(arg0=(2, 3, 4, 4), arg1=(5, 7, 3))
    with pytest.raises(ShapeError, match=r"offset=\(3, 0\).*at most \(2, 2\)"):
        op_symbol("Crop", ["arg0"], h_w=(2, 2), offset=(3, 0)).infer_shape(arg0=(2, 3, 4, 4))
    with pytest.raises(AttributeValueError, match="Crop: num_args must be 1.*got 3"):
        op_symbol("Crop", ["arg0", "arg1", "arg2"])
    with pytest.raises(AttributeValueError, match=r"Crop: with num_args=1, h_w.*\(0, 0\)"):
        op_symbol("Crop", ["arg0"])
    with pytest.raises(AttributeValueError, match=r"Crop: h_w must have 2 entries.*\(2, 2, 2\)"):
        op_symbol("Crop", ["arg0"], h_w=(2, 2, 2))
    with pytest.raises(MXNetError, match="unknown input"):
        sym.Crop(data=sym.Variable("x"), crop_like=sym.Variable("y"))
