"""UpSampling: nearest-neighbour repetition of NCHW maps, or bilinear as a deconvolution."""
from __future__ import annotations

import math

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param
from ..nn.deconvolution import Deconvolution


class UpSampling(Op):
    """Enlarge the spatial axes of NCHW data ``scale`` times; MXNet's ``UpSampling``.

    ``sample_type='nearest'`` takes ``num_args`` inputs (``arg0``, ``arg1``, ...). The output
    is ``scale`` times the first input's height and width; every input is repeated up to that
    size by its own integer factor (output height / its height, which must divide exactly and
    equal the width factor), and the results are joined along the channels
    (``multi_input_mode='concat'``) or added (``'sum'``, equal channel counts).

    ``sample_type='bilinear'`` takes ``data`` (N, C, H, W) and ``weight`` (C, 1, k, k) with
    ``k = 2*scale - scale % 2`` and computes a depthwise Deconvolution (``num_group = C``,
    stride ``scale``, pad ``ceil((scale - 1) / 2)``, no bias): the output is (N, C, H*scale,
    W*scale). ``num_filter`` must equal C. The weight is learnable; MXNet gives the variable it
    creates the ``Bilinear`` initializer, which makes this a bilinear interpolation.

    Attributes
    ----------
    scale : int
        Upsampling factor, >= 1.
    sample_type : {'nearest', 'bilinear'}
    num_filter : int, default 0
        Channel count; used (and required) by bilinear.
    multi_input_mode : {'concat', 'sum'}, default 'concat'
        How nearest upsampling joins several inputs.
    num_args : int
        Number of inputs of nearest upsampling (the symbol API counts the given inputs).
        Bilinear always takes ``data`` and ``weight``, whatever ``num_args`` says.
    workspace : int, default 512
        Accepted for MXNet compatibility; unused.

    Backward: nearest keeps only the input shapes (the gradient is the head gradient summed
    over each ``factor x factor`` block); bilinear keeps ``data`` and ``weight`` and is
    Deconvolution's backward.
    """

    name = "UpSampling"
    variadic = "num_args"
    params = {"scale": Param("int"), "num_filter": Param("int", 0),
              "sample_type": Param("str", choices=("nearest", "bilinear")),
              "multi_input_mode": Param("str", "concat", choices=("concat", "sum")),
              "num_args": Param("int"), "workspace": Param("int", 512)}

    def check(self) -> None:
        if self.scale < 1:
            raise AttributeValueError(f"UpSampling: scale must be >= 1, got {self.scale}")
        if self.num_args < 1 or self.workspace < 0:
            raise AttributeValueError(f"UpSampling: num_args must be >= 1 and workspace >= 0, "
                                      f"got num_args={self.num_args}, "
                                      f"workspace={self.workspace}")
        self._deconv = None
        if self.sample_type == "bilinear":
            if self.num_filter < 1:
                raise AttributeValueError(f"UpSampling: sample_type='bilinear' needs num_filter "
                                          f"(the channel count) >= 1, got {self.num_filter}")
            s = self.scale
            self._kernel = 2 * s - s % 2
            self._deconv = Deconvolution(
                kernel=(self._kernel,) * 2, stride=(s, s), pad=(math.ceil((s - 1) / 2),) * 2,
                num_filter=self.num_filter, num_group=self.num_filter, no_bias=True,
                workspace=self.workspace)
            self.retain_inputs = self._deconv.retain_inputs

    def list_arguments(self) -> list[str]:
        if self.sample_type == "bilinear":
            return ["data", "weight"]
        return super().list_arguments()

    def auto_input_attrs(self) -> dict[str, dict[str, str]]:
        """MXNet initialises the weight of bilinear upsampling with ``Bilinear``."""
        if self.sample_type == "bilinear":
            return {"weight": {"__init__": '["bilinear", {}]'}}
        return {}

    # --- shapes ----------------------------------------------------------------------------
    def _factors(self, shapes: list) -> tuple[tuple[int, int], list[int]]:
        """Output (height, width) and each nearest input's repetition factor."""
        names = self.list_arguments()
        for name, s in zip(names, shapes):
            if len(s) != 4:
                raise ShapeError(f"{name} must be 4-D (batch, channel, y, x), got {s}")
        first = shapes[0]
        out_hw = (first[2] * self.scale, first[3] * self.scale)
        factors = []
        for name, s in zip(names, shapes):
            if s[0] != first[0]:
                raise ShapeError(f"{name} {s} has batch size {s[0]}, {names[0]} {first} has "
                                 f"{first[0]}: nearest inputs must share the batch size")
            fh, rh = divmod(out_hw[0], s[2])
            fw, rw = divmod(out_hw[1], s[3])
            if rh or rw or fh != fw:
                raise ShapeError(f"{name} {s} cannot be repeated to the output size {out_hw} "
                                 f"(scale={self.scale} times {names[0]}'s): both sides must "
                                 f"divide it by the same whole factor")
            factors.append(fh)
        if self.multi_input_mode == "sum" and len({s[1] for s in shapes}) > 1:
            raise ShapeError(f"multi_input_mode='sum' needs equal channel counts, got "
                             f"{[s[1] for s in shapes]}")
        return out_hw, factors

    def infer_shape(self, in_shapes, out_shapes):
        if self.sample_type == "bilinear":
            return self._infer_bilinear(in_shapes)
        if any(s is None or 0 in s for s in in_shapes):
            return list(in_shapes), [None], []
        out_hw, _ = self._factors(in_shapes)
        chans = in_shapes[0][1] if self.multi_input_mode == "sum" else sum(
            s[1] for s in in_shapes)
        return list(in_shapes), [(in_shapes[0][0], chans) + out_hw], []

    def _infer_bilinear(self, in_shapes):
        data = in_shapes[0]
        weight = (self.num_filter, 1, self._kernel, self._kernel)
        if data is None:
            return [None, weight], [None], []
        if len(data) != 4:
            raise ShapeError(f"data must be 4-D (batch, channel, y, x), got {data}")
        if data[1] and data[1] != self.num_filter:
            raise ShapeError(f"data {data} has {data[1]} channels but num_filter="
                             f"{self.num_filter}: bilinear upsampling keeps the channels")
        out = (data[0], self.num_filter, data[2] * self.scale, data[3] * self.scale)
        return [data, weight], [out], []

    # --- compute ---------------------------------------------------------------------------
    def forward(self, xp, inputs, aux, is_train):
        if self._deconv is not None:
            return self._deconv.forward(xp, inputs, aux, is_train)
        factors = [self.scale] if len(inputs) == 1 else self._factors(
            [x.shape for x in inputs])[1]
        parts = [_repeat(xp, x, f) for x, f in zip(inputs, factors)]
        if len(parts) == 1:
            out = parts[0]
        elif self.multi_input_mode == "sum":
            out = sum(parts[1:], parts[0])
        else:
            out = xp.concatenate(parts, axis=1)
        return [out], ([x.shape for x in inputs], factors)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if self._deconv is not None:
            return self._deconv.backward(xp, out_grads, inputs, outputs, saved, need_grad)
        g = out_grads[0]
        shapes, factors = saved
        grads, start = [], 0
        for shape, f, need in zip(shapes, factors, need_grad):
            part = g if self.multi_input_mode == "sum" else g[:, start:start + shape[1]]
            start += shape[1]
            grads.append(_block_sum(part, shape, f) if need else None)
        return grads


def _repeat(xp, x, f: int):
    """Every pixel of ``x`` (N, C, H, W) repeated into an ``f x f`` block."""
    if f == 1:
        return x
    return xp.repeat(xp.repeat(x, f, axis=2), f, axis=3)


def _block_sum(g, shape: tuple, f: int):
    """Sums of the ``f x f`` blocks of ``g``, of the input's ``shape``.

    Adds the ``f`` strided slices of each axis in turn: with numpy that is about ten times
    faster than ``sum(axis=(3, 5))`` over the 6-D block view.
    """
    n, c, h, w = shape
    blocks = g.reshape(n, c, h, f, w, f)
    rows = blocks[:, :, :, 0]
    for k in range(1, f):
        rows = rows + blocks[:, :, :, k]
    out = rows[..., 0]
    for k in range(1, f):
        out = out + rows[..., k]
    return out
