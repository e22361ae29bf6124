"""LRN: local response normalisation across neighbouring channels."""
from __future__ import annotations

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape


class LRN(Op):
    """Divide each activation of NCHW data by a power of its channel neighbourhood's energy.

    ``out[n, c] = data[n, c] * norm[n, c] ** -beta`` with
    ``norm[n, c] = knorm + alpha / nsize * sum(data[n, j] ** 2)`` over the channels
    ``j`` within ``nsize // 2`` of ``c`` (clipped at the first and last channel), as MXNet.
    ``norm`` is the hidden second output ``tmp_norm``.

    Attributes
    ----------
    alpha : float, default 1e-4
    beta : float, default 0.75
    knorm : float, default 2.0
    nsize : int
        Window width in channels; odd, as MXNet requires.

    Backward keeps ``data`` and ``tmp_norm``.
    """

    name = "LRN"
    params = {"alpha": Param("float", 1e-4), "beta": Param("float", 0.75),
              "knorm": Param("float", 2.0), "nsize": Param("int")}
    outputs = ("output", "tmp_norm")
    retain_inputs = (0,)
    retain_outputs = (1,)

    def check(self) -> None:
        if self.nsize < 1 or self.nsize % 2 == 0:
            raise AttributeValueError(f"LRN: nsize must be an odd window width >= 1, "
                                      f"got {self.nsize}")

    def num_visible_outputs(self) -> int:
        return 1

    def infer_shape(self, in_shapes, out_shapes):
        shape = None
        for s in list(in_shapes) + list(out_shapes):
            shape = merge_shape(shape, s, "data and outputs must share a shape")
        if shape is not None and len(shape) != 4:
            raise ShapeError(f"data must be 4-D (batch, channel, y, x), got {shape}")
        return [shape], [shape, shape], []

    def _window_sum(self, xp, a):
        """Sums of ``a`` over the ``nsize`` channels centred on each channel (zero past ends)."""
        half = self.nsize // 2
        c = a.shape[1]
        padded = xp.pad(a, ((0, 0), (half, half), (0, 0), (0, 0)))
        total = padded[:, :c].copy()
        # one slice add per window offset (nsize is a handful); exact, unlike a cumulative sum
        for k in range(1, self.nsize):
            total += padded[:, k:k + c]
        return total

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        norm = self._window_sum(xp, x * x) * x.dtype.type(self.alpha / self.nsize) \
            + x.dtype.type(self.knorm)
        return [x * norm ** x.dtype.type(-self.beta), norm], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x, norm, g = inputs[0], outputs[1], out_grads[0]
        scale = norm ** x.dtype.type(-self.beta)
        # d out[c] / d x[j] = scale[c] [c == j] - 2 alpha beta / n * x[c] x[j] norm[c]^(-beta-1)
        # for the channels c whose window holds j; the window is symmetric, so the same sum
        inner = self._window_sum(xp, g * x * scale / norm)
        return [g * scale - x.dtype.type(2 * self.alpha * self.beta / self.nsize) * x * inner]
