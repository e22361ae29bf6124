"""Reshape with MXNet's special codes 0, -1, -2, -3, -4 (and the legacy ``target_shape``)."""
from __future__ import annotations

import math

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param


def _divide(total: int, part: int, spec) -> int:
    if part == 0 or total % part:
        raise ShapeError(f"cannot infer the -1 dim of shape={spec}: {total} elements do not "
                         f"divide by {part}")
    return total // part


def infer_reshape(dshape: tuple, spec: tuple) -> tuple:
    """Apply the codes of ``spec`` left to right to ``dshape`` (0 marks an unknown dim).

    Codes: ``d > 0`` gives d and steps past one input dim; ``0`` copies one input dim; ``-1``
    is inferred from the total size and steps past one input dim; ``-2`` copies every
    remaining input dim; ``-3`` multiplies the next two input dims; ``-4, a, b`` splits the
    next input dim into a and b (one of them may be -1).
    """
    out: list[int] = []
    src, i, infer_at = 0, 0, None

    def take() -> int:
        nonlocal src
        if src >= len(dshape):
            raise ShapeError(f"shape={spec} uses more dims than the input {dshape} has")
        src += 1
        return dshape[src - 1]

    while i < len(spec):
        code = spec[i]
        if code > 0:
            out.append(code)
            src += 1
        elif code == 0:
            out.append(take())
        elif code == -1:
            if infer_at is not None:
                raise ShapeError(f"shape={spec} has more than one -1")
            infer_at = len(out)
            out.append(1)
            src += 1
        elif code == -2:
            out.extend(dshape[src:])
            src = len(dshape)
        elif code == -3:
            a, b = take(), take()
            out.append(a * b)
        elif code == -4:
            if i + 2 >= len(spec):
                raise ShapeError(f"shape={spec}: -4 must be followed by two dims")
            d0, d1, d2 = take(), spec[i + 1], spec[i + 2]
            if d1 == -1 and d2 == -1:
                raise ShapeError(f"shape={spec}: the two dims after -4 cannot both be -1")
            if d1 == -1:
                d1 = _divide(d0, d2, spec) if d0 else 0
            elif d2 == -1:
                d2 = _divide(d0, d1, spec) if d0 else 0
            elif d0 and d1 * d2 != d0:
                raise ShapeError(f"shape={spec}: split dims {d1}, {d2} do not multiply to {d0}")
            out.extend((d1, d2))
            i += 2
        else:
            raise ShapeError(f"shape={spec}: invalid code {code}")
        i += 1
    if infer_at is not None:
        rest = math.prod(out)
        out[infer_at] = _divide(math.prod(dshape), rest, spec) if rest and all(dshape) else 0
    return tuple(out)


class Reshape(Op):
    """View ``data`` with a new shape given by ``shape`` and MXNet's special codes.

    ``shape`` codes (see :func:`infer_reshape`): 0 copy a dim, -1 infer one dim, -2 copy the
    remaining dims, -3 merge two dims, -4 split one dim in two. With ``reverse=True`` the codes
    match the input dims from the right. The deprecated ``target_shape`` (0 = inferred) and
    ``keep_highest`` (keep the first dim) are accepted when ``shape`` is empty.
    Backward keeps only the input shape.
    """

    name = "Reshape"
    aliases = ("reshape",)
    params = {"shape": Param("shape", ()), "reverse": Param("bool", False),
              "target_shape": Param("shape", ()), "keep_highest": Param("bool", False)}

    def check(self) -> None:
        if not self.shape and not self.target_shape:
            raise AttributeValueError("Reshape: give the new shape in 'shape'")
        # forward's output shape per input shape: working it out is 6x the reshape itself
        self._out_shapes: dict[tuple, tuple] = {}

    def out_shape(self, dshape: tuple) -> tuple:
        """The output shape for an input shape (0 = unknown dim)."""
        dshape = tuple(dshape)
        if not self.shape:  # legacy target_shape: one 0 is inferred
            out = list(self.target_shape)
            if self.keep_highest:
                out[0] = dshape[0]
            if out.count(0) == 1 and all(dshape) and (not self.keep_highest or out[0]):
                i = out.index(0)
                out[i] = 1
                out[i] = _divide(math.prod(dshape), math.prod(out), self.target_shape)
            out = tuple(out)
        elif self.reverse:
            out = infer_reshape(dshape[::-1], self.shape[::-1])[::-1]
        else:
            out = infer_reshape(dshape, self.shape)
        if all(out) and all(dshape) and math.prod(out) != math.prod(dshape):
            raise ShapeError(f"cannot reshape {dshape} ({math.prod(dshape)} elements) to "
                             f"{out} ({math.prod(out)} elements)")
        return out

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        spec = self.shape or self.target_shape
        if data is None:
            if all(d > 0 for d in spec) and not (self.keep_highest and not self.shape):
                out = tuple(spec)
            return [None], [out], []
        if out is not None and all(out) and list(data).count(0) == 1:
            # one unknown input dim (a batch size) follows from the output size
            i = list(data).index(0)
            known_part = math.prod(d for d in data if d)
            data = data[:i] + (_divide(math.prod(out), known_part, spec),) + data[i + 1:]
        return [data], [self.out_shape(data)], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        shape = self._out_shapes.get(x.shape)
        if shape is None:
            shape = self._out_shapes[x.shape] = self.out_shape(x.shape)
        return [x.reshape(shape)], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].reshape(saved)]
