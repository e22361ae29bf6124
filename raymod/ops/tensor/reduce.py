"""Reductions over axes: sum, mean, prod, max, min."""
from __future__ import annotations

import math

from ...base import ShapeError
from ..base import Op, Param
from ._axis import fill_unknown, norm_axis


class _Reduce(Op):
    params = {"axis": Param("shape", None, optional=True), "keepdims": Param("bool", False),
              "exclude": Param("bool", False)}

    def reduced_axes(self, ndim: int) -> tuple[int, ...]:
        """The axes reduced for a ``ndim``-d input: ``axis`` (or the others if ``exclude``)."""
        cache = self.__dict__.setdefault("_axes_by_ndim", {})  # forward and backward ask often
        if ndim not in cache:
            cache[ndim] = self._reduced_axes(ndim)
        return cache[ndim]

    def _reduced_axes(self, ndim: int) -> tuple[int, ...]:
        if not self.axis:
            return tuple(range(ndim))
        axes = [norm_axis(a, ndim) for a in self.axis]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"axis={self.axis} names an axis twice")
        if self.exclude:
            return tuple(i for i in range(ndim) if i not in axes)
        return tuple(sorted(axes))

    def _out_shape(self, shape: tuple) -> tuple:
        axes = self.reduced_axes(len(shape))
        if self.keepdims:
            return tuple(1 if i in axes else d for i, d in enumerate(shape))
        return tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None:
            return [None], [out], []
        axes = self.reduced_axes(len(data))
        kept = [i for i in range(len(data)) if i not in axes]
        if out is not None and kept:  # the kept dims come back from the output
            kept_out = [out[i] for i in kept] if self.keepdims else list(out)
            if len(kept_out) == len(kept):
                back = list(data)
                for i, d in zip(kept, kept_out):
                    back[i] = d
                data = fill_unknown(data, tuple(back))
        return [data], [self._out_shape(data)], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        axes = self.reduced_axes(x.ndim)
        y = self.reduce(xp, x, axes)
        return [y.astype(x.dtype, copy=False).reshape(self._out_shape(x.shape))], x.shape

    def _expand(self, g, shape: tuple, axes: tuple):
        """``g`` reshaped to ``shape`` with the reduced axes kept as size 1."""
        return g.reshape(tuple(1 if i in axes else d for i, d in enumerate(shape)))


class Sum(_Reduce):
    """Sum over ``axis`` (all axes when None or empty; the other axes with ``exclude``).

    Without ``keepdims`` the reduced axes are dropped, and a full reduction gives shape (1,).
    Backward keeps only the input shape.
    """

    name = "sum"
    aliases = ("sum_axis",)

    def reduce(self, xp, x, axes):
        return x.sum(axis=axes)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        axes = self.reduced_axes(len(saved))
        return [xp.broadcast_to(self._expand(out_grads[0], saved, axes), saved)]


class Mean(_Reduce):
    """Mean over ``axis``; otherwise as :class:`Sum`. Backward keeps only the input shape."""

    name = "mean"

    def reduce(self, xp, x, axes):
        if x.dtype.kind == "f" and x.dtype.itemsize >= 4:  # what mean does, minus its checks
            return x.sum(axis=axes) / x.dtype.type(math.prod(x.shape[i] for i in axes))
        return x.mean(axis=axes)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        axes = self.reduced_axes(len(saved))
        count = math.prod(saved[i] for i in axes)
        g = self._expand(out_grads[0], saved, axes) / count
        return [xp.broadcast_to(g, saved)]


class Prod(_Reduce):
    """Product over ``axis``; shapes as :class:`Sum`. Backward keeps the input.

    The gradient of each element is the product of the others in its slice, computed without
    dividing by zero: slices with one zero send their gradient only to that zero, slices with
    more than one send none. (MXNet divides the output by the input and gives NaN at zeros.)
    """

    name = "prod"
    retain_inputs = (0,)

    def reduce(self, xp, x, axes):
        return x.prod(axis=axes)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        axes = self.reduced_axes(x.ndim)
        zero = x == 0
        nonzero = xp.where(zero, xp.ones((), x.dtype), x)
        rest = nonzero.prod(axis=axes, keepdims=True)  # product of the non-zero entries
        zeros = zero.sum(axis=axes, keepdims=True)
        others = xp.where(zeros == 0, rest / nonzero, xp.where(zero & (zeros == 1), rest, 0))
        return [self._expand(out_grads[0], x.shape, axes) * others.astype(x.dtype, copy=False)]


class _Extreme(_Reduce):
    """Shared backward of max and min: the gradient goes to the extreme elements.

    As in MXNet, every element equal to the extreme receives the full gradient (ties are not
    split). Keeps the input and the output.
    """

    retain_inputs = (0,)
    retain_outputs = (0,)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        axes = self.reduced_axes(x.ndim)
        hit = x == self._expand(outputs[0], x.shape, axes)
        return [self._expand(out_grads[0], x.shape, axes) * hit]


class Max(_Extreme):
    """Maximum over ``axis``; shapes as :class:`Sum`. Ties all receive the gradient."""

    name = "max"
    aliases = ("max_axis",)

    def reduce(self, xp, x, axes):
        return x.max(axis=axes)


class Min(_Extreme):
    """Minimum over ``axis``; shapes as :class:`Sum`. Ties all receive the gradient."""

    name = "min"
    aliases = ("min_axis",)

    def reduce(self, xp, x, axes):
        return x.min(axis=axes)
