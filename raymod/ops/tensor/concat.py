"""Concat: join inputs along one axis."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param, merge_shape
from ._axis import norm_axis


class Concat(Op):
    """Join ``num_args`` inputs (``arg0``, ``arg1``, ...) along axis ``dim``.

    Every dim except ``dim`` must match. A single unknown size along ``dim`` is inferred from
    the output. Backward keeps only the sizes along ``dim`` and splits the gradient.
    """

    name = "Concat"
    aliases = ("concat",)
    variadic = "num_args"
    params = {"num_args": Param("int"), "dim": Param("int", 1)}

    def infer_shape(self, in_shapes, out_shapes):
        out = out_shapes[0]
        known_shapes = [s for s in list(in_shapes) + [out] if s is not None]
        if not known_shapes:
            return list(in_shapes), [None], []
        ndim = len(known_shapes[0])
        ax = norm_axis(self.dim, ndim, "dim")
        # the dims other than `dim`, merged over every input and the output
        common, ref = None, None
        for i, s in enumerate(list(in_shapes) + [out]):
            if s is None:
                continue
            masked = s[:ax] + (0,) + s[ax + 1:] if len(s) == ndim else s
            label = f"arg{i}" if i < len(in_shapes) else "the output"
            try:
                common = merge_shape(common, masked)
            except ShapeError:
                raise ShapeError(f"input {label} has shape {s} but {ref[0]} has {ref[1]}: all "
                                 f"dims except dim={self.dim} must match") from None
            ref = ref or (label, s)
        sizes = [s[ax] if s is not None else 0 for s in in_shapes]
        if out is not None and out[ax] and sizes.count(0) == 1:
            missing = out[ax] - sum(sizes)
            if missing < 1:
                raise ShapeError(f"the inputs are {sum(sizes)} long along dim={self.dim}, "
                                 f"more than the output's {out[ax]}")
            sizes[sizes.index(0)] = missing
        ins = [common[:ax] + (n,) + common[ax + 1:] for n in sizes]
        total = sum(sizes) if all(sizes) else 0
        return ins, [common[:ax] + (total,) + common[ax + 1:]], []

    def forward(self, xp, inputs, aux, is_train):
        ax = norm_axis(self.dim, inputs[0].ndim, "dim")
        return [xp.concatenate(inputs, axis=ax)], [x.shape[ax] for x in inputs]

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        ax = norm_axis(self.dim, g.ndim, "dim")
        grads, start = [], 0
        for size, need in zip(saved, need_grad):
            index = (slice(None),) * ax + (slice(start, start + size),)
            grads.append(g[index] if need else None)
            start += size
        return grads
