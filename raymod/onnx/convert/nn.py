"""Layers: Convolution, Deconvolution, FullyConnected, BatchNorm, Pooling, activations,
Embedding, InstanceNorm."""
from __future__ import annotations

import numpy as np

from ..graph import NodeContext, converts


def _spatial(ctx: NodeContext, key: str, nd: int, default: int) -> list[int]:
    value = tuple(ctx.attrs.get(key) or ())
    return list(value) if value else [default] * nd


def _conv_attrs(ctx: NodeContext) -> dict:
    if ctx.attrs.get("layout") not in (None, "NCW", "NCHW", "NCDHW"):
        raise ctx.unsupported(f"with layout={ctx.attrs['layout']!r} is not exported "
                              f"(channels-first layouts only)")
    kernel = list(ctx.attrs["kernel"])
    nd = len(kernel)
    pad = _spatial(ctx, "pad", nd, 0)
    return {"kernel_shape": kernel, "strides": _spatial(ctx, "stride", nd, 1),
            "dilations": _spatial(ctx, "dilate", nd, 1), "pads": pad + pad,
            "group": int(ctx.attrs["num_group"])}


@converts("Convolution")
def convolution(ctx: NodeContext) -> None:
    ins = [ctx.input(0), ctx.input(1)] + ([] if ctx.attrs["no_bias"] else [ctx.input(2)])
    ctx.add("Conv", ins, ctx.output(), **_conv_attrs(ctx))


@converts("Deconvolution")
def deconvolution(ctx: NodeContext) -> None:
    attrs = _conv_attrs(ctx)
    nd = len(attrs["kernel_shape"])
    # the pads are attributes: the spatial dims must not follow the batch
    ins_shape = [ctx.fixed_in_dim(0, 2 + i, "padding") for i in range(nd)]
    out_shape = ctx.out_shape()[2:]
    begins, ends, extra = [], [], []
    for i in range(nd):
        # MXNet's pad/adj (or those target_shape implies), from the known shapes; ONNX
        # crops pads[i] at the start, pads[nd + i] at the end, and adds output_padding
        full = (attrs["strides"][i] * (ins_shape[i] - 1)
                + attrs["dilations"][i] * (attrs["kernel_shape"][i] - 1) + 1)
        total = full - out_shape[i]
        begin = attrs["pads"][i] if not ctx.attrs.get("target_shape") else (total + 1) // 2
        begins.append(begin)
        ends.append(max(0, total - begin))
        extra.append(max(0, begin - total))
    attrs["pads"] = begins + ends
    if any(extra):
        attrs["output_padding"] = extra
    ins = [ctx.input(0), ctx.input(1)] + ([] if ctx.attrs["no_bias"] else [ctx.input(2)])
    ctx.add("ConvTranspose", ins, ctx.output(), **attrs)


@converts("FullyConnected")
def fully_connected(ctx: NodeContext) -> None:
    data = ctx.input(0)
    nd = len(ctx.in_shape(0))
    bias = [] if ctx.attrs["no_bias"] else [ctx.input(2)]
    if ctx.attrs["flatten"] or nd == 2:
        if nd != 2:
            data = ctx.add("Flatten", [data], axis=1)
        ctx.add("Gemm", [data, ctx.input(1)] + bias, ctx.output(), transB=1)
        return
    weight_t = ctx.add("Transpose", [ctx.input(1)], perm=[1, 0])
    if not bias:
        ctx.add("MatMul", [data, weight_t], ctx.output())
        return
    prod = ctx.add("MatMul", [data, weight_t])
    ctx.add("Add", [prod, bias[0]], ctx.output())


_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softrelu": "Softplus",
                "softsign": "Softsign"}


@converts("Activation")
def activation(ctx: NodeContext) -> None:
    act = ctx.attrs["act_type"]
    if act not in _ACTIVATIONS:
        raise ctx.unsupported(f"with act_type={act!r} has no ONNX form")
    ctx.add(_ACTIVATIONS[act], [ctx.input(0)], ctx.output())


@converts("LeakyReLU")
def leaky_relu(ctx: NodeContext) -> None:
    act, x, slope = ctx.attrs["act_type"], ctx.input(0), float(ctx.attrs["slope"])
    if act == "leaky":
        ctx.add("LeakyRelu", [x], ctx.output(), alpha=slope)
    elif act == "elu":
        ctx.add("Elu", [x], ctx.output(), alpha=slope)
    elif act == "selu":
        ctx.add("Selu", [x], ctx.output())
    elif act == "prelu":
        nd = len(ctx.in_shape(0))
        # gamma (C,) broadcasts over axis 1
        gamma = ctx.add("Unsqueeze", [ctx.input(1), ctx.ints("axes", range(1, nd - 1))]) \
            if nd > 2 else ctx.input(1)
        ctx.add("PRelu", [x, gamma], ctx.output())
    elif act == "gelu":
        scaled = ctx.add("Div", [x, ctx.scalar("sqrt2", np.sqrt(2.0))])
        erf = ctx.add("Erf", [scaled])
        one_plus = ctx.add("Add", [erf, ctx.scalar("one", 1.0)])
        half_x = ctx.add("Mul", [x, ctx.scalar("half", 0.5)])
        ctx.add("Mul", [half_x, one_plus], ctx.output())
    else:
        raise ctx.unsupported(f"with act_type={act!r} has no ONNX form")


@converts("BatchNorm")
def batch_norm(ctx: NodeContext) -> None:
    axis = int(ctx.attrs["axis"]) % len(ctx.in_shape(0))
    if axis != 1:
        raise ctx.unsupported(f"with axis={ctx.attrs['axis']} is not exported (axis 1 only)")
    if ctx.attrs["fix_gamma"]:   # MXNet's inference ignores gamma then: scale 1
        channels = ctx.fixed_in_dim(0, 1, "channel count")
        gamma = ctx.const("gamma_fixed", np.ones(channels, dtype=ctx.in_dtype(0)))
    else:
        gamma = ctx.input(1)
    ctx.add("BatchNormalization", [ctx.input(0), gamma, ctx.input(2), ctx.aux(0), ctx.aux(1)],
            ctx.output(), epsilon=float(ctx.attrs["eps"]))


@converts("InstanceNorm")
def instance_norm(ctx: NodeContext) -> None:
    ctx.add("InstanceNormalization", [ctx.input(0), ctx.input(1), ctx.input(2)], ctx.output(),
            epsilon=float(ctx.attrs["eps"]))


@converts("Pooling")
def pooling(ctx: NodeContext) -> None:
    kind, x = ctx.attrs["pool_type"], ctx.input(0)
    if ctx.attrs.get("layout") not in (None, "NCW", "NCHW", "NCDHW"):
        raise ctx.unsupported(f"with layout={ctx.attrs['layout']!r} is not exported")
    nd = len(ctx.in_shape(0)) - 2
    if ctx.attrs["global_pool"]:
        if kind == "max":
            ctx.add("GlobalMaxPool", [x], ctx.output())
        elif kind == "avg":
            ctx.add("GlobalAveragePool", [x], ctx.output())
        elif kind == "sum":
            ctx.add("ReduceSum", [x, ctx.ints("axes", range(2, nd + 2))], ctx.output(),
                    keepdims=1)
        else:
            ctx.add("GlobalLpPool", [x], ctx.output(), p=int(ctx.attrs["p_value"]))
        return
    kernel = list(ctx.attrs["kernel"])
    pad = _spatial(ctx, "pad", nd, 0)
    attrs = {"kernel_shape": kernel, "strides": _spatial(ctx, "stride", nd, 1),
             "pads": pad + pad,
             "ceil_mode": int(ctx.attrs["pooling_convention"] == "full")}
    if kind == "max":
        ctx.add("MaxPool", [x], ctx.output(), **attrs)
    elif kind in ("avg", "sum"):
        include = ctx.attrs.get("count_include_pad")
        attrs["count_include_pad"] = int(include is None or include or kind == "sum")
        if kind == "avg":
            ctx.add("AveragePool", [x], ctx.output(), **attrs)
        else:
            if attrs["ceil_mode"]:
                raise ctx.unsupported("with pool_type='sum' and pooling_convention='full' "
                                      "is not exported")
            mean = ctx.add("AveragePool", [x], **attrs)
            ctx.add("Mul", [mean, ctx.scalar("window", float(np.prod(kernel)))], ctx.output())
    else:
        if attrs.pop("ceil_mode"):
            raise ctx.unsupported("with pool_type='lp' and pooling_convention='full' is not "
                                  "exported")
        ctx.add("LpPool", [x], ctx.output(), p=int(ctx.attrs["p_value"]), **attrs)


@converts("Embedding")
def embedding(ctx: NodeContext) -> None:
    rows = ctx.in_shape(1)[0]
    # MXNet clips indices into [0, input_dim - 1] before the lookup
    idx = ctx.add("Cast", [ctx.input(0)], to=7)
    idx = ctx.add("Clip", [idx, ctx.const("lo", np.int64(0)), ctx.const("hi", np.int64(rows - 1))])
    ctx.add("Gather", [ctx.input(1), idx], ctx.output(), axis=0)


@converts("LayerNorm")
def layer_norm(ctx: NodeContext) -> None:
    # opset 13 has no LayerNormalization: mean and variance over the axis, written out
    shape = ctx.in_shape(0)
    axis = int(ctx.attrs["axis"]) % len(shape)
    x = ctx.input(0)
    mean = ctx.add("ReduceMean", [x], axes=[axis], keepdims=1)
    centred = ctx.add("Sub", [x, mean])
    var = ctx.add("ReduceMean", [ctx.add("Mul", [centred, centred])], axes=[axis], keepdims=1)
    std = ctx.add("Sqrt", [ctx.add("Add", [var, ctx.scalar("eps", float(ctx.attrs["eps"]))])])
    param_shape = [1] * len(shape)
    param_shape[axis] = shape[axis]
    gamma = ctx.add("Reshape", [ctx.input(1), ctx.ints("pshape", param_shape)])
    beta = ctx.add("Reshape", [ctx.input(2), ctx.ints("pshape", param_shape)])
    scaled = ctx.add("Mul", [ctx.add("Div", [centred, std]), gamma])
    ctx.add("Add", [scaled, beta], ctx.output())
