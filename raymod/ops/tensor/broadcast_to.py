"""broadcast_to, broadcast_like, broadcast_axis: repeat size-1 axes to a larger shape."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, sum_to_shape
from ._checks import axis_of


def _grow(data: tuple, target: tuple, what: str) -> tuple:
    """``data`` broadcast to ``target`` of the same rank (0 in either: unknown)."""
    out = []
    for d, t in zip(data, target):
        if not t:
            out.append(0 if d == 1 else d)
        elif d in (0, 1, t):
            out.append(t)
        else:
            raise ShapeError(f"data of shape {tuple(data)} cannot be broadcast to {what}")
    return tuple(out)


class _Broadcast(Op):
    """Shared forward and backward: the output is a materialised broadcast of the first input,
    the gradient sums the head gradient over the broadcast axes. Backward keeps the shape."""

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        target = self.target(x.shape, *(i.shape for i in inputs[1:]))
        return [xp.ascontiguousarray(xp.broadcast_to(x, target))], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [sum_to_shape(xp, out_grads[0], saved)] + [None] * (len(need_grad) - 1)


class BroadcastTo(_Broadcast):
    """``data`` repeated along its size-1 axes to ``shape`` (same rank); a 0 in ``shape``
    keeps that axis of ``data``. The gradient sums over the repeated axes."""

    name = "broadcast_to"
    params = {"shape": Param("shape", ())}

    def target(self, data: tuple) -> tuple:
        if len(self.shape) != len(data):
            raise ShapeError(f"data of shape {tuple(data)} cannot be broadcast to "
                             f"shape={self.shape}: the ranks differ")
        keep = tuple(d if s == 0 else s for d, s in zip(data, self.shape))
        return _grow(data, keep, f"shape={self.shape}")

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None:
            return [None], [out], []
        if out is not None and len(out) == len(data):  # kept axes come back from the output
            data = tuple(d or (o if s == 0 else 0) for d, o, s in zip(data, out, self.shape))
        return [data], [self.target(data)], []


class BroadcastLike(_Broadcast):
    """``lhs`` broadcast to ``rhs``'s shape. Without axes, every size-1 axis of ``lhs`` takes
    ``rhs``'s size (same rank); with ``lhs_axes`` and ``rhs_axes`` (both given, equal
    length), axis ``lhs_axes[i]`` of ``lhs`` (of size 1) takes the size of axis
    ``rhs_axes[i]`` of ``rhs``. ``rhs`` supplies only its shape and gets a zero gradient;
    ``lhs``'s gradient sums over the repeated axes."""

    name = "broadcast_like"
    inputs = ("lhs", "rhs")
    params = {"lhs_axes": Param("shape", None, optional=True),
              "rhs_axes": Param("shape", None, optional=True)}
    no_grad_inputs = ("rhs",)

    def check(self) -> None:
        if self.lhs_axes is None or self.rhs_axes is None:
            return
        if len(self.lhs_axes) != len(self.rhs_axes):
            raise AttributeValueError(f"broadcast_like: lhs_axes={self.lhs_axes} and "
                                      f"rhs_axes={self.rhs_axes} must have the same length")
        if not self.lhs_axes:
            raise AttributeValueError("broadcast_like: lhs_axes and rhs_axes must not be empty")

    def target(self, lhs: tuple, rhs: tuple) -> tuple:
        if self.lhs_axes is None or self.rhs_axes is None:
            if len(lhs) != len(rhs):
                raise ShapeError(f"lhs of shape {tuple(lhs)} cannot be broadcast like rhs of "
                                 f"shape {tuple(rhs)}: the ranks differ")
            return _grow(lhs, rhs, f"rhs's shape {tuple(rhs)}")
        out = list(lhs)
        for la, ra in zip(self.lhs_axes, self.rhs_axes):
            i = axis_of(la, lhs, f"lhs_axes={self.lhs_axes}: axis")
            j = axis_of(ra, rhs, f"rhs_axes={self.rhs_axes}: axis")
            if lhs[i] not in (0, 1):
                raise ShapeError(f"lhs_axes={self.lhs_axes}: axis {la} of lhs of shape "
                                 f"{tuple(lhs)} has size {lhs[i]}; only size-1 axes broadcast")
            out[i] = rhs[j]
        return tuple(out)

    def infer_shape(self, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return [lhs, rhs], [out_shapes[0]], []
        return [lhs, rhs], [self.target(lhs, rhs)], []


class BroadcastAxis(_Broadcast):
    """``data`` repeated along its size-1 axes ``axis[i]`` to sizes ``size[i]``. The gradient
    sums over the repeated axes."""

    name = "broadcast_axis"
    aliases = ("broadcast_axes",)
    params = {"axis": Param("shape", ()), "size": Param("shape", ())}

    def check(self) -> None:
        if len(self.axis) != len(self.size):
            raise AttributeValueError(f"broadcast_axis: axis={self.axis} and size={self.size} "
                                      "must have the same length")
        if any(s < 1 for s in self.size):
            raise AttributeValueError(f"broadcast_axis: size={self.size} must be positive")

    def target(self, data: tuple) -> tuple:
        out = list(data)
        for a, s in zip(self.axis, self.size):
            i = axis_of(a, data, f"axis={self.axis}: axis")
            if data[i] not in (0, 1):
                raise ShapeError(f"axis={self.axis}: axis {a} of data of shape {tuple(data)} "
                                 f"has size {data[i]}; only size-1 axes broadcast")
            out[i] = s
        return tuple(out)

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        return [data], [out_shapes[0] if data is None else self.target(data)], []
