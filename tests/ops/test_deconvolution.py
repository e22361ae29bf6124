import numpy as np
import pytest

import raymod.ops.nn._im2col as im2col_module
from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def reference_deconv(x, w, b, stride, pad, dilate, adj, groups):
    """Direct transposed convolution: every input pixel scatters its weighted kernel."""
    k, cg, fg = w.shape[2:], x.shape[1] // groups, w.shape[1]
    full = [s * (n - 1) + d * (kk - 1) + 1 + a
            for n, kk, s, d, a in zip(x.shape[2:], k, stride, dilate, adj)]
    y = np.zeros((len(x), fg * groups) + tuple(full))
    for c in range(x.shape[1]):
        filters = slice(c // cg * fg, (c // cg + 1) * fg)
        for pos in np.ndindex(*x.shape[2:]):
            win = tuple(slice(o * s, o * s + d * (kk - 1) + 1, d)
                        for o, s, d, kk in zip(pos, stride, dilate, k))
            y[(slice(None), filters) + win] += (x[(slice(None), c) + pos].reshape(
                (-1,) + (1,) * (len(k) + 1)) * w[c])
    y = y[(slice(None), slice(None)) + tuple(slice(p, n - p) for p, n in zip(pad, full))]
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(k))


CASES = [  # data shape, kernel, stride, pad, dilate, adj, target_shape, num_filter, num_group
    ((2, 3, 4, 5), (3, 3), (1, 1), (0, 0), (1, 1), (0, 0), None, 4, 1),
    ((2, 3, 4, 5), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), None, 2, 1),
    ((2, 4, 3, 4), (4, 3), (2, 3), (1, 2), (1, 2), (1, 0), None, 4, 2),
    ((2, 3, 4, 4), (4, 4), (2, 2), (1, 0), (1, 1), (1, 0), (9, 10), 2, 1),  # from target
    ((2, 2, 6), (3,), (2,), (1,), (1,), (1,), None, 3, 1),
    ((2, 2, 17), (3,), (1,), (1,), (2,), (0,), None, 4, 2),  # long rows: batch-first columns
]


@pytest.mark.parametrize("shape,kernel,stride,pad,dilate,adj,target,nf,ng", CASES)
@pytest.mark.parametrize("no_bias,columns", [(True, "indexed"), (False, "indexed"),
                                             (False, "strided")])
def test_deconvolution(ctx, rng, monkeypatch, shape, kernel, stride, pad, dilate, adj, target,
                       nf, ng, no_bias, columns):
    if columns == "strided":  # numpy's strided im2col / col2im, not the small-buffer ones
        monkeypatch.setattr(im2col_module, "IM2COL_TAKE_MAX", 0)
        monkeypatch.setattr(im2col_module, "COL2IM_BINCOUNT_MAX", 0)
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    attrs = dict(kernel=kernel, stride=stride, dilate=dilate, num_filter=nf, num_group=ng,
                 no_bias=no_bias)
    attrs.update(target_shape=target) if target else attrs.update(pad=pad, adj=adj)
    sym = op_symbol("Deconvolution", names, **attrs)
    inputs = {"data": rng.standard_normal(shape),
              "weight": rng.standard_normal((shape[1], nf // ng) + kernel)}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(nf)
    check_forward(sym, inputs, lambda data, weight, bias=None: reference_deconv(
        data, weight, bias, stride, pad, dilate, adj, ng), ctx)
    check_gradient(sym, inputs, ctx)


def test_deconvolution_shapes_and_errors():
    sym = op_symbol("Deconvolution", ["data"], kernel=(4, 4), stride=(2, 2), pad=(1, 1),
                    num_filter=8)
    assert sym.list_arguments() == ["data", "op_weight"]  # no_bias defaults to True
    assert sym.infer_shape(data=(2, 3, 5, 5))[:2] == ([(2, 3, 5, 5), (3, 8, 4, 4)],
                                                      [(2, 8, 10, 10)])
    big = op_symbol("Deconvolution", ["data"], kernel=(3, 3), stride=(3, 3), num_filter=2,
                    target_shape=(16, 16))
    with pytest.raises(ShapeError, match=r"Deconvolution 'op'.*target_shape"):
        big.infer_shape(data=(1, 1, 5, 5))
    for bad in [dict(adj=(1, 1)), dict(layout="NHWC"), dict(num_group=3)]:
        with pytest.raises(AttributeValueError, match=r"Deconvolution: .*(adj|layout|num_group)"):
            op_symbol("Deconvolution", ["data"], kernel=(3, 3), num_filter=4, **bad)
