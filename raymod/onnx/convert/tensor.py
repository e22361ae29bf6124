"""Shape and layout ops: Flatten, Reshape, transpose, Concat, slicing, splitting, Cast, clip,
identities."""
from __future__ import annotations

import numpy as np
from onnx import helper

from ..graph import BatchDim, NodeContext, converts


@converts("Dropout", "BlockGrad", "_copy")
def identity(ctx: NodeContext) -> None:
    ctx.add("Identity", [ctx.input(0)], ctx.output())


@converts("Flatten")
def flatten(ctx: NodeContext) -> None:
    ctx.add("Flatten", [ctx.input(0)], ctx.output(), axis=1)


def reshape_to(ctx: NodeContext, value: str, out: str) -> str:
    """Reshape input 0 (``value``) to the node's inferred output shape; with ``dynamic`` the
    dims that follow the batch are copied from the input or computed at run time."""
    return ctx.add("Reshape", [value, ctx.reshape_target("shape", ctx.out_dims(),
                                                         ctx.in_dims(0))], out)


@converts("Reshape", "reshape_like")
def reshape(ctx: NodeContext) -> None:
    # MXNet's codes (0, -1, -2, -3, -4, reverse) are resolved by raymod's shape inference;
    # they are not ONNX's (MXNet's -2, -3, -4 have no ONNX form), so the result is written out
    reshape_to(ctx, ctx.input(0), ctx.output())


@converts("transpose")
def transpose(ctx: NodeContext) -> None:
    nd = len(ctx.in_shape(0))
    axes = tuple(ctx.attrs.get("axes") or ()) or tuple(reversed(range(nd)))
    ctx.add("Transpose", [ctx.input(0)], ctx.output(), perm=[a % nd for a in axes])


@converts("SwapAxis")
def swap_axis(ctx: NodeContext) -> None:
    nd = len(ctx.in_shape(0))
    perm = list(range(nd))
    a, b = int(ctx.attrs["dim1"]) % nd, int(ctx.attrs["dim2"]) % nd
    perm[a], perm[b] = perm[b], perm[a]
    ctx.add("Transpose", [ctx.input(0)], ctx.output(), perm=perm)


@converts("expand_dims")
def expand_dims(ctx: NodeContext) -> None:
    axis = int(ctx.attrs["axis"]) % len(ctx.out_shape())
    ctx.add("Unsqueeze", [ctx.input(0), ctx.ints("axes", [axis])], ctx.output())


@converts("squeeze")
def squeeze(ctx: NodeContext) -> None:
    shape = ctx.in_shape(0)
    axis = ctx.attrs.get("axis")
    # (with dynamic=True, a squeeze whose output rank would change at batch 1 is refused
    # before: the unit dims here are the same at every batch)
    axes = [a % len(shape) for a in axis] if axis else [i for i, d in enumerate(shape)
                                                        if d == 1]
    if not axes or len(axes) == len(shape):   # MXNet keeps one dim when all are squeezed
        reshape_to(ctx, ctx.input(0), ctx.output())
        return
    ctx.add("Squeeze", [ctx.input(0), ctx.ints("axes", axes)], ctx.output())


@converts("Concat")
def concat(ctx: NodeContext) -> None:
    nd = len(ctx.in_shape(0))
    ctx.add("Concat", [ctx.input(i) for i in range(ctx.num_inputs)], ctx.output(),
            axis=int(ctx.attrs["dim"]) % nd)


@converts("stack")
def stack(ctx: NodeContext) -> None:
    axis = int(ctx.attrs["axis"]) % len(ctx.out_shape())
    parts = [ctx.add("Unsqueeze", [ctx.input(i), ctx.ints("axes", [axis])])
             for i in range(ctx.num_inputs)]
    ctx.add("Concat", parts, ctx.output(), axis=axis)


def _slice(ctx: NodeContext, starts, ends, axes, steps, out: str | None = None) -> str:
    return ctx.add("Slice", [ctx.input(0), ctx.shape("starts", starts), ctx.ints("ends", ends),
                             ctx.ints("axes", axes), ctx.ints("steps", steps)],
                   out or ctx.output())


@converts("slice")
def slice_(ctx: NodeContext) -> None:
    shape = ctx.in_dims(0)   # a negative step from the last element of a batch axis: N - 1
    begin, end = list(ctx.attrs["begin"]), list(ctx.attrs["end"])
    step = list(ctx.attrs.get("step") or ()) + [None] * len(begin)
    starts, ends, steps = [], [], []
    big = np.iinfo(np.int64).max
    for i, (b, e, s) in enumerate(zip(begin, end, step)):
        s = 1 if s is None else s
        # None: from the first (last, for a negative step) element to the far end
        starts.append((0 if s > 0 else shape[i] - 1) if b is None else b)
        ends.append((big if s > 0 else -big) if e is None else e)
        steps.append(s)
    _slice(ctx, starts, ends, list(range(len(begin))), steps)


@converts("slice_axis")
def slice_axis(ctx: NodeContext) -> None:
    axis = int(ctx.attrs["axis"]) % len(ctx.in_shape(0))
    end = ctx.attrs["end"]
    _slice(ctx, [ctx.attrs["begin"]], [np.iinfo(np.int64).max if end is None else end],
           [axis], [1])


@converts("SliceChannel")
def slice_channel(ctx: NodeContext) -> None:
    shape = ctx.in_dims(0)
    n, axis = int(ctx.attrs["num_outputs"]), int(ctx.attrs["axis"]) % len(shape)
    # split sizes along a batch axis are unknown: without them ONNX splits in equal parts
    sizes = [] if isinstance(shape[axis], BatchDim) else \
        [ctx.ints("split", [shape[axis] // n] * n)]
    outs = [ctx.output(k) for k in range(n)]
    if not ctx.attrs["squeeze_axis"]:
        ctx.add("Split", [ctx.input(0), *sizes], outs, axis=axis)
        return
    parts = ctx.add("Split", [ctx.input(0), *sizes], [ctx.fresh(f"part{k}") for k in range(n)],
                    axis=axis)
    for part, out in zip(parts, outs):
        ctx.add("Squeeze", [part, ctx.ints("axes", [axis])], out)


@converts("clip")
def clip(ctx: NodeContext) -> None:
    ctx.add("Clip", [ctx.input(0), ctx.scalar("min", ctx.attrs["a_min"]),
                     ctx.scalar("max", ctx.attrs["a_max"])], ctx.output())


@converts("Cast")
def cast(ctx: NodeContext) -> None:
    to = helper.np_dtype_to_tensor_dtype(np.dtype(ctx.attrs["dtype"]))
    ctx.add("Cast", [ctx.input(0)], ctx.output(), to=to)


@converts("tile")
def tile(ctx: NodeContext) -> None:
    shape, reps = ctx.in_dims(0), list(ctx.attrs["reps"])
    nd = max(len(shape), len(reps))
    x = ctx.input(0)
    if len(shape) < nd:   # MXNet prepends unit dims to the data
        x = ctx.add("Reshape", [x, ctx.reshape_target("shape", [1] * (nd - len(shape))
                                                      + list(shape))])
    ctx.add("Tile", [x, ctx.ints("repeats", [1] * (nd - len(reps)) + reps)], ctx.output())


@converts("broadcast_to", "broadcast_like", "broadcast_axis")
def broadcast_to(ctx: NodeContext) -> None:
    ctx.add("Expand", [ctx.input(0), ctx.expand_target("shape", ctx.out_dims(),
                                                       ctx.in_dims(0))], ctx.output())
