"""Arithmetic: elementwise / broadcast / scalar binary ops, comparisons, unary math, add_n,
dot, batch_dot and the reductions."""
from __future__ import annotations

from onnx import helper

from ..graph import NodeContext, converts

_BINARY = {"Add": ("elemwise_add", "broadcast_add"), "Sub": ("elemwise_sub", "broadcast_sub"),
           "Mul": ("elemwise_mul", "broadcast_mul"), "Div": ("elemwise_div", "broadcast_div"),
           "Pow": ("_power", "broadcast_power"), "Max": ("_maximum", "broadcast_maximum"),
           "Min": ("_minimum", "broadcast_minimum")}
_COMPARE = {"Equal": ("_equal", "broadcast_equal"), "Greater": ("_greater", "broadcast_greater"),
            "GreaterOrEqual": ("_greater_equal", "broadcast_greater_equal"),
            "Less": ("_lesser", "broadcast_lesser"),
            "LessOrEqual": ("_lesser_equal", "broadcast_lesser_equal")}


def _binary(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        ctx.add(onnx_op, [ctx.input(0), ctx.input(1)], ctx.output())
    return convert


def _as_input_dtype(ctx: NodeContext, flag: str) -> None:
    """MXNet comparisons give 0/1 in the input's dtype; ONNX's give bool."""
    to = helper.np_dtype_to_tensor_dtype(ctx.in_dtype(0))
    ctx.add("Cast", [flag], ctx.output(), to=to)


def _compare(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        _as_input_dtype(ctx, ctx.add(onnx_op, [ctx.input(0), ctx.input(1)]))
    return convert


for _onnx, _names in _BINARY.items():
    converts(*_names)(_binary(_onnx))
for _onnx, _names in _COMPARE.items():
    converts(*_names)(_compare(_onnx))


@converts("_not_equal", "broadcast_not_equal")
def not_equal(ctx: NodeContext) -> None:
    _as_input_dtype(ctx, ctx.add("Not", [ctx.add("Equal", [ctx.input(0), ctx.input(1)])]))


# scalar ops: (ONNX op, scalar first?)
_SCALAR = {"_plus_scalar": ("Add", False), "_minus_scalar": ("Sub", False),
           "_rminus_scalar": ("Sub", True), "_mul_scalar": ("Mul", False),
           "_div_scalar": ("Div", False), "_rdiv_scalar": ("Div", True),
           "_power_scalar": ("Pow", False), "_rpower_scalar": ("Pow", True),
           "_maximum_scalar": ("Max", False), "_minimum_scalar": ("Min", False)}
_SCALAR_COMPARE = {"_equal_scalar": "Equal", "_greater_scalar": "Greater",
                   "_greater_equal_scalar": "GreaterOrEqual", "_lesser_scalar": "Less",
                   "_lesser_equal_scalar": "LessOrEqual"}


def _scalar(onnx_op: str, scalar_first: bool):
    def convert(ctx: NodeContext) -> None:
        s = ctx.scalar("scalar", float(ctx.attrs["scalar"]))
        ins = [s, ctx.input(0)] if scalar_first else [ctx.input(0), s]
        ctx.add(onnx_op, ins, ctx.output())
    return convert


def _scalar_compare(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        s = ctx.scalar("scalar", float(ctx.attrs["scalar"]))
        _as_input_dtype(ctx, ctx.add(onnx_op, [ctx.input(0), s]))
    return convert


for _name, (_onnx, _first) in _SCALAR.items():
    converts(_name)(_scalar(_onnx, _first))
for _name, _onnx in _SCALAR_COMPARE.items():
    converts(_name)(_scalar_compare(_onnx))


@converts("_not_equal_scalar")
def not_equal_scalar(ctx: NodeContext) -> None:
    s = ctx.scalar("scalar", float(ctx.attrs["scalar"]))
    _as_input_dtype(ctx, ctx.add("Not", [ctx.add("Equal", [ctx.input(0), s])]))


_UNARY = {"abs": "Abs", "negative": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "sin": "Sin", "cos": "Cos",
          "tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu", "reciprocal": "Reciprocal",
          "rint": "Round"}


def _unary(onnx_op: str):
    def convert(ctx: NodeContext) -> None:
        ctx.add(onnx_op, [ctx.input(0)], ctx.output())
    return convert


for _name, _onnx in _UNARY.items():
    converts(_name)(_unary(_onnx))


@converts("square")
def square(ctx: NodeContext) -> None:
    ctx.add("Mul", [ctx.input(0), ctx.input(0)], ctx.output())


@converts("rsqrt")
def rsqrt(ctx: NodeContext) -> None:
    ctx.add("Reciprocal", [ctx.add("Sqrt", [ctx.input(0)])], ctx.output())


@converts("expm1")
def expm1(ctx: NodeContext) -> None:
    ctx.add("Sub", [ctx.add("Exp", [ctx.input(0)]), ctx.scalar("one", 1.0)], ctx.output())


@converts("log1p")
def log1p(ctx: NodeContext) -> None:
    ctx.add("Log", [ctx.add("Add", [ctx.input(0), ctx.scalar("one", 1.0)])], ctx.output())


@converts("add_n")
def add_n(ctx: NodeContext) -> None:
    ctx.add("Sum", [ctx.input(i) for i in range(ctx.num_inputs)], ctx.output())


def _transposed_last2(ctx: NodeContext, value: str, nd: int) -> str:
    perm = list(range(nd))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return ctx.add("Transpose", [value], perm=perm)


@converts("dot")
def dot(ctx: NodeContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    sa, sb = ctx.in_shape(0), ctx.in_shape(1)
    ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
    if len(sa) > 2 or len(sb) > 2:
        if ta or tb:
            raise ctx.unsupported("with transpose_a/transpose_b on arrays of more than two "
                                  "dims is not exported")
        # MXNet's N-d dot contracts a's last axis with b's first
        a2 = ctx.add("Reshape", [a, ctx.reshape_target("a2", [-1, ctx.in_dims(0)[-1]])])
        b2 = ctx.add("Reshape", [b, ctx.reshape_target("b2", [ctx.in_dims(1)[0], -1])])
        prod = ctx.add("MatMul", [a2, b2])
        ctx.add("Reshape", [prod, ctx.reshape_target("shape", ctx.out_dims())], ctx.output())
        return
    if ta and len(sa) == 2:
        a = _transposed_last2(ctx, a, 2)
    if tb and len(sb) == 2:
        b = _transposed_last2(ctx, b, 2)
    if len(sa) == 1 and len(sb) == 1:   # MXNet's vector dot is a (1,) array
        prod = ctx.add("MatMul", [a, b])
        ctx.add("Reshape", [prod, ctx.ints("shape", [1])], ctx.output())
        return
    ctx.add("MatMul", [a, b], ctx.output())


@converts("batch_dot")
def batch_dot(ctx: NodeContext) -> None:
    a, b = ctx.input(0), ctx.input(1)
    if ctx.attrs["transpose_a"]:
        a = _transposed_last2(ctx, a, len(ctx.in_shape(0)))
    if ctx.attrs["transpose_b"]:
        b = _transposed_last2(ctx, b, len(ctx.in_shape(1)))
    ctx.add("MatMul", [a, b], ctx.output())


def _axes(ctx: NodeContext) -> list[int]:
    nd = len(ctx.in_shape(0))
    axis = ctx.attrs.get("axis")
    axes = list(range(nd)) if axis is None or len(axis) == 0 else [a % nd for a in axis]
    if ctx.attrs.get("exclude"):
        axes = [a for a in range(nd) if a not in axes]
    return axes


def _reduce(onnx_op: str, axes_as_input: bool):
    def convert(ctx: NodeContext) -> None:
        axes, keep = _axes(ctx), int(bool(ctx.attrs.get("keepdims")))
        nd, out_shape = len(ctx.in_shape(0)), ctx.out_shape()
        if not axes:   # nothing to reduce (exclude of every axis)
            ctx.add("Identity", [ctx.input(0)], ctx.output())
            return
        # MXNet reduces everything to shape (1,), ONNX to a scalar: reshape then
        rank_ok = keep or nd - len(axes) == len(out_shape)
        out = ctx.output() if rank_ok else None
        if axes_as_input:
            value = ctx.add(onnx_op, [ctx.input(0), ctx.ints("axes", axes)], out,
                            keepdims=keep)
        else:
            value = ctx.add(onnx_op, [ctx.input(0)], out, axes=axes, keepdims=keep)
        if not rank_ok:
            ctx.add("Reshape", [value, ctx.reshape_target("shape", ctx.out_dims())], ctx.output())
    return convert


# opset 13: ReduceSum takes axes as an input, the others as an attribute
converts("sum")(_reduce("ReduceSum", True))
converts("mean")(_reduce("ReduceMean", False))
converts("max")(_reduce("ReduceMax", False))
converts("min")(_reduce("ReduceMin", False))
converts("prod")(_reduce("ReduceProd", False))
converts("_square_sum")(_reduce("ReduceSumSquare", False))


@converts("round")
def round_(ctx: NodeContext) -> None:
    # MXNet rounds half away from zero; ONNX's Round is half to even
    mag = ctx.add("Floor", [ctx.add("Add", [ctx.add("Abs", [ctx.input(0)]),
                                             ctx.scalar("half", 0.5)])])
    ctx.add("Mul", [ctx.add("Sign", [ctx.input(0)]), mag], ctx.output())


@converts("trunc")
def trunc(ctx: NodeContext) -> None:
    mag = ctx.add("Floor", [ctx.add("Abs", [ctx.input(0)])])
    ctx.add("Mul", [ctx.add("Sign", [ctx.input(0)]), mag], ctx.output())


@converts("_hypot", "broadcast_hypot")
def hypot(ctx: NodeContext) -> None:
    a = ctx.add("Mul", [ctx.input(0), ctx.input(0)])
    b = ctx.add("Mul", [ctx.input(1), ctx.input(1)])
    ctx.add("Sqrt", [ctx.add("Add", [a, b])], ctx.output())


@converts("smooth_l1")
def smooth_l1(ctx: NodeContext) -> None:
    s2 = float(ctx.attrs["scalar"]) ** 2
    x = ctx.input(0)
    mag = ctx.add("Abs", [x])
    inner = ctx.add("Mul", [ctx.add("Mul", [x, x]), ctx.scalar("half_s2", 0.5 * s2)])
    outer = ctx.add("Sub", [mag, ctx.scalar("half_inv_s2", 0.5 / s2)])
    ctx.add("Where", [ctx.add("Less", [mag, ctx.scalar("inv_s2", 1.0 / s2)]), inner, outer],
            ctx.output())


@converts("norm")
def norm(ctx: NodeContext) -> None:
    if ctx.attrs.get("out_dtype") is not None:
        raise ctx.unsupported("with out_dtype is not exported")
    op = {1: "ReduceL1", 2: "ReduceL2"}[int(ctx.attrs["ord"])]
    nd = len(ctx.in_shape(0))
    axis = ctx.attrs.get("axis")
    axes = list(range(nd)) if not axis else [int(a) % nd for a in axis]
    value = ctx.add(op, [ctx.input(0)], axes=axes, keepdims=1)
    ctx.add("Reshape", [value, ctx.reshape_target("shape", ctx.out_dims())], ctx.output())
