"""Indexing and selection: take, pick, one_hot, where, argmax/argmin, reverse, repeat,
slice_like."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..graph import Dim, NodeContext, converts

_INT64 = 7
_BIG = np.iinfo(np.int64).max


def _index(ctx: NodeContext, i: int) -> str:
    """Input ``i`` as int64 indices (truncated toward zero, as raymod's cast)."""
    return ctx.add("Cast", [ctx.input(i)], to=_INT64)


def _bounded(ctx: NodeContext, idx: str, n: Dim, mode: str) -> str:
    """``idx`` wrapped or clipped into ``[0, n)``; ``n`` may follow the batch (indexing the
    batch axis), then it is read at run time."""
    if mode == "wrap":
        return ctx.add("Mod", [idx, ctx.dim("n", n)])
    return ctx.add("Clip", [idx, ctx.const("lo", np.int64(0)), ctx.dim("hi", n - 1)])


@converts("take")
def take(ctx: NodeContext) -> None:
    shape = ctx.in_dims(0)
    axis = int(ctx.attrs["axis"]) % len(shape)
    idx = _index(ctx, 1)
    if ctx.attrs["mode"] in ("clip", "wrap"):
        idx = _bounded(ctx, idx, shape[axis], ctx.attrs["mode"])
    ctx.add("Gather", [ctx.input(0), idx], ctx.output(), axis=axis)


@converts("pick")
def pick(ctx: NodeContext) -> None:
    shape = ctx.in_dims(0)
    axis = int(ctx.attrs["axis"]) % len(shape)
    idx = _bounded(ctx, _index(ctx, 1), shape[axis], ctx.attrs["mode"])
    keep = list(shape)
    keep[axis] = 1
    idx = ctx.add("Reshape", [idx, ctx.reshape_target("keep", keep)])
    picked = ctx.add("GatherElements", [ctx.input(0), idx], None if not ctx.attrs["keepdims"]
                     else ctx.output(), axis=axis)
    if not ctx.attrs["keepdims"]:
        ctx.add("Squeeze", [picked, ctx.ints("axes", [axis])], ctx.output())


@converts("one_hot")
def one_hot(ctx: NodeContext) -> None:
    # compared with a range rather than ONNX's OneHot, which wraps negative indices
    idx = ctx.add("Unsqueeze", [_index(ctx, 0), ctx.ints("last", [len(ctx.in_shape(0))])])
    hit = ctx.add("Equal", [idx, ctx.const("range", np.arange(int(ctx.attrs["depth"]),
                                                               dtype=np.int64))])
    dtype = np.dtype(ctx.attrs["dtype"])
    ctx.add("Where", [hit, ctx.const("on", np.asarray(ctx.attrs["on_value"], dtype)),
                      ctx.const("off", np.asarray(ctx.attrs["off_value"], dtype))],
            ctx.output())


@converts("where")
def where(ctx: NodeContext) -> None:
    cond, shape = ctx.in_dims(0), ctx.in_shape(1)
    flag = ctx.add("Cast", [ctx.input(0)], to=9)   # bool: nonzero is true
    if len(cond) == 1 and len(shape) > 1:   # MXNet's row mask over the first axis
        rows = ctx.reshape_target("rows", [cond[0]] + [1] * (len(shape) - 1))
        flag = ctx.add("Reshape", [flag, rows])
    ctx.add("Where", [flag, ctx.input(1), ctx.input(2)], ctx.output())


def _arg(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        x, axis = ctx.input(0), ctx.attrs.get("axis")
        keep = int(bool(ctx.attrs.get("keepdims")))
        if axis is None:   # over the flattened array
            x = ctx.add("Reshape", [x, ctx.ints("flat", [-1])])
            axis, keep = 0, 1
        else:
            axis = int(axis) % len(ctx.in_shape(0))
        pos = ctx.add(onnx_op, [x], axis=axis, keepdims=keep,
                      select_last_index=0)
        pos = ctx.add("Cast", [pos], to=helper.np_dtype_to_tensor_dtype(ctx.in_dtype(0)))
        ctx.add("Reshape", [pos, ctx.reshape_target("shape", ctx.out_dims())], ctx.output())
    return convert


converts("argmax")(_arg("ArgMax"))
converts("argmin")(_arg("ArgMin"))


@converts("reverse")
def reverse(ctx: NodeContext) -> None:
    nd = len(ctx.in_shape(0))
    named = [int(a) % nd for a in ctx.attrs["axis"]]
    axes = sorted(a for a in set(named) if named.count(a) % 2)   # twice flips back
    if not axes:
        ctx.add("Identity", [ctx.input(0)], ctx.output())
        return
    ctx.add("Slice", [ctx.input(0), ctx.ints("starts", [-1] * len(axes)),
                      ctx.ints("ends", [-_BIG] * len(axes)), ctx.ints("axes", axes),
                      ctx.ints("steps", [-1] * len(axes))], ctx.output())


@converts("repeat")
def repeat(ctx: NodeContext) -> None:
    shape, r = list(ctx.in_shape(0)), int(ctx.attrs["repeats"])
    x, axis = ctx.input(0), ctx.attrs.get("axis")
    if axis is None:   # the flattened array, each element r times
        x, shape, axis = ctx.add("Reshape", [x, ctx.ints("flat", [-1])]), [int(np.prod(shape))], 0
    axis = int(axis) % len(shape)
    spread = ctx.add("Unsqueeze", [x, ctx.ints("axes", [axis + 1])])
    reps = [1] * (len(shape) + 1)
    reps[axis + 1] = r
    tiled = ctx.add("Tile", [spread, ctx.ints("reps", reps)])
    ctx.add("Reshape", [tiled, ctx.reshape_target("shape", ctx.out_dims())], ctx.output())


@converts("slice_like")
def slice_like(ctx: NodeContext) -> None:
    out = ctx.out_dims()
    ctx.add("Slice", [ctx.input(0), ctx.ints("starts", [0] * len(out)), ctx.shape("ends", out),
                      ctx.ints("axes", range(len(out)))], ctx.output())
