import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


def reference_priors(h, w, sizes, ratios, steps=(-1, -1), offsets=(0.5, 0.5), clip=False):
    sy, sx = steps if min(steps) > 0 else (1 / h, 1 / w)
    out = []
    for r in range(h):
        for c in range(w):
            cy, cx = (r + offsets[0]) * sy, (c + offsets[1]) * sx
            shapes = [(s, ratios[0]) for s in sizes] + [(sizes[0], q) for q in ratios[1:]]
            for s, q in shapes:
                hw, hh = s * h / w * np.sqrt(q) / 2, s / np.sqrt(q) / 2
                out.append([cx - hw, cy - hh, cx + hw, cy + hh])
    out = np.array(out)[None]
    return np.clip(out, 0, 1) if clip else out


@pytest.mark.parametrize("attrs", [
    {}, {"sizes": (0.2, 0.272), "ratios": (1, 2, 0.5)},
    {"sizes": (0.75, 0.9), "ratios": (1, 2, 0.5, 3), "clip": True},
    {"sizes": (0.1,), "ratios": (1, 2), "steps": (0.1, 0.05), "offsets": (0.2, 0.9)}])
def test_multibox_prior(ctx, rng, attrs):
    data = rng.standard_normal((2, 3, 5, 7))
    sym = op_symbol("_contrib_MultiBoxPrior", ["data"], **attrs)
    expected = reference_priors(5, 7, attrs.get("sizes", (1,)), attrs.get("ratios", (1,)),
                                attrs.get("steps", (-1, -1)), attrs.get("offsets", (0.5, 0.5)),
                                attrs.get("clip", False))
    # computed in float32 as MXNet, whatever the data's dtype
    out = check_forward(sym, {"data": data}, [expected], ctx, rtol=1e-6, atol=1e-7)
    assert out[0].dtype == np.float64
    out32 = bind(sym, {"data": data.astype(np.float32)}, ctx, grad_req="null").forward()[0]
    assert out32.dtype == np.float32
    np.testing.assert_array_equal(as_numpy(out32), as_numpy(out[0]).astype(np.float32))


def test_multibox_prior_has_no_gradient(ctx, rng):
    sym = op_symbol("_contrib_MultiBoxPrior", ["data"], sizes=(0.5,))
    ex = bind(sym, {"data": rng.standard_normal((1, 2, 3, 3))}, ctx)
    ex.forward(is_train=True)
    ex.backward([ctx.xp.ones((1, 9, 4))])
    assert not as_numpy(ex.grad_dict["data"]).any()


def test_multibox_prior_shapes_and_errors():
    sym = op_symbol("_contrib_MultiBoxPrior", ["data"], sizes=(0.2, 0.3), ratios=(1, 2, 0.5))
    assert sym.infer_shape(data=(8, 512, 38, 38))[1] == [(1, 38 * 38 * 4, 4)]
    with pytest.raises(ShapeError, match=r"_contrib_MultiBoxPrior.*at least 4-D.*\(8, 38, 38\)"):
        sym.infer_shape(data=(8, 38, 38))
    with pytest.raises(AttributeValueError, match=r"MultiBoxPrior.*'steps' needs 2 values"):
        op_symbol("_contrib_MultiBoxPrior", ["data"], steps=(0.1,))
    with pytest.raises(AttributeValueError, match=r"MultiBoxPrior.*offsets must be in \[0, 1\]"):
        op_symbol("_contrib_MultiBoxPrior", ["data"], offsets=(0.5, 1.5))
    with pytest.raises(AttributeValueError, match=r"MultiBoxPrior.*both steps or neither"):
        op_symbol("_contrib_MultiBoxPrior", ["data"], steps=(0.1, -1))
    with pytest.raises(AttributeValueError, match=r"MultiBoxPrior.*sizes and ratios"):
        op_symbol("_contrib_MultiBoxPrior", ["data"], sizes="()")
