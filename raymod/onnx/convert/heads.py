"""Softmax family and loss heads, as their inference forward (labels are not used)."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..graph import NodeContext, converts


@converts("SoftmaxOutput")
def softmax_output(ctx: NodeContext) -> None:
    shape = ctx.in_shape(0)
    if ctx.attrs["multi_output"] or len(shape) == 2:
        ctx.add("Softmax", [ctx.input(0)], ctx.output(), axis=1)
    elif ctx.attrs["preserve_shape"]:
        ctx.add("Softmax", [ctx.input(0)], ctx.output(), axis=len(shape) - 1)
    else:   # over everything but the batch axis
        flat = ctx.add("Flatten", [ctx.input(0)], axis=1)
        probs = ctx.add("Softmax", [flat], axis=1)
        ctx.add("Reshape", [probs, ctx.reshape_target("shape", [0] + list(ctx.in_dims(0)[1:]))],
                ctx.output())


def _scaled(ctx: NodeContext) -> str:
    t = ctx.attrs.get("temperature")
    x = ctx.input(0)
    if ctx.attrs.get("dtype") is not None and np.dtype(ctx.attrs["dtype"]) != ctx.in_dtype(0):
        x = ctx.add("Cast", [x], to=helper.np_dtype_to_tensor_dtype(np.dtype(ctx.attrs["dtype"])))
    if t is not None and float(t) != 1.0:
        x = ctx.add("Div", [x, ctx.const("temperature", np.asarray(
            t, dtype=np.dtype(ctx.attrs.get("dtype") or ctx.in_dtype(0))))])
    return x


def _softmax(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        if ctx.attrs.get("use_length"):
            raise ctx.unsupported("with use_length=True is not exported")
        axis = int(ctx.attrs["axis"]) % len(ctx.in_shape(0))
        ctx.add(onnx_op, [_scaled(ctx)], ctx.output(), axis=axis)
    return convert


converts("softmax")(_softmax("Softmax"))
converts("log_softmax")(_softmax("LogSoftmax"))


@converts("SoftmaxActivation")
def softmax_activation(ctx: NodeContext) -> None:
    axis = 1 if ctx.attrs["mode"] == "channel" else len(ctx.in_shape(0)) - 1
    ctx.add("Softmax", [ctx.input(0)], ctx.output(), axis=axis)


@converts("LinearRegressionOutput", "MAERegressionOutput", "MakeLoss")
def passthrough(ctx: NodeContext) -> None:
    ctx.add("Identity", [ctx.input(0)], ctx.output())


@converts("LogisticRegressionOutput")
def logistic(ctx: NodeContext) -> None:
    ctx.add("Sigmoid", [ctx.input(0)], ctx.output())
