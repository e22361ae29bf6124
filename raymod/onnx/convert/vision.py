"""Vision: LRN, UpSampling (nearest), Crop, L2Normalization."""
from __future__ import annotations

import numpy as np

from ..graph import NodeContext, converts


@converts("LRN")
def lrn(ctx: NodeContext) -> None:
    ctx.add("LRN", [ctx.input(0)], ctx.output(), alpha=float(ctx.attrs["alpha"]),
            beta=float(ctx.attrs["beta"]), bias=float(ctx.attrs["knorm"]),
            size=int(ctx.attrs["nsize"]))


@converts("UpSampling")
def upsampling(ctx: NodeContext) -> None:
    if ctx.attrs["sample_type"] != "nearest":
        raise ctx.unsupported("with sample_type='bilinear' is not exported (its learned "
                              "weight makes it a Deconvolution; export that instead)")
    out_hw = ctx.out_shape()[2:]
    parts = []
    for i in range(ctx.num_inputs):
        shape = ctx.in_shape(i)
        scales = [1.0, 1.0] + [o / s for o, s in zip(out_hw, shape[2:])]
        single = ctx.num_inputs == 1
        parts.append(ctx.add("Resize", [ctx.input(i), "", ctx.const("scales", np.asarray(
            scales, dtype=np.float32))], ctx.output() if single else None, mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    if ctx.num_inputs == 1:
        return
    if ctx.attrs["multi_input_mode"] == "sum":
        ctx.add("Sum", parts, ctx.output())
    else:
        ctx.add("Concat", parts, ctx.output(), axis=1)


@converts("Crop")
def crop(ctx: NodeContext) -> None:
    shape, out = ctx.in_shape(0), ctx.out_shape()
    h, w = out[2], out[3]
    # offsets and ends are constants of the graph: no spatial dim may follow the batch
    for axis in (2, 3):
        ctx.fixed_in_dim(0, axis, "crop window")
        if ctx.num_inputs > 1:
            ctx.fixed_in_dim(1, axis, "crop window")
    if ctx.attrs["center_crop"]:
        top, left = (shape[2] - h) // 2, (shape[3] - w) // 2
    else:
        top, left = ctx.attrs["offset"]
    ctx.add("Slice", [ctx.input(0), ctx.ints("starts", [top, left]),
                      ctx.ints("ends", [top + h, left + w]), ctx.ints("axes", [2, 3])],
            ctx.output())


@converts("L2Normalization")
def l2_normalization(ctx: NodeContext) -> None:
    mode, nd = ctx.attrs["mode"], len(ctx.in_shape(0))
    axes = {"instance": list(range(1, nd)), "channel": [1],
            "spatial": list(range(2, nd))}[mode]
    sq = ctx.add("ReduceSumSquare", [ctx.input(0)], axes=axes, keepdims=1)
    norm = ctx.add("Sqrt", [ctx.add("Add", [sq, ctx.scalar("eps", float(ctx.attrs["eps"]))])])
    ctx.add("Div", [ctx.input(0), norm], ctx.output())
