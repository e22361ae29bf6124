"""LeakyReLU: leaky, prelu (learned per-channel slope), elu, selu and gelu."""
from __future__ import annotations

import math

from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape

_SELU_LAMBDA = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717
_INV_SQRT2 = 1 / math.sqrt(2.0)
_INV_SQRT_2PI = 1 / math.sqrt(2.0 * math.pi)

# Chebyshev coefficients (fitted here against math.erfc) of log(erfc(x) / t) + x^2 as a
# function of t = 1 / (1 + x/2) on t in [0.25, 1] (x in [0, 6]); |erf error| < 2e-15.
_ERFC_CHEB = (-0.4985502230126519, 0.5003364655513494, 0.002907954374872893,
              -0.004807433804460406, 1.4741810740724987e-05, 0.00010698213450340435,
              -6.27565665270269e-06, -2.655586204831466e-06, 4.146163641594729e-07,
              4.738898388403211e-08, -1.8774034382414376e-08, 4.5312053835467584e-10,
              5.993488430000597e-10, -8.983777142898597e-11, -9.48866275231014e-12,
              4.406970473281641e-12, -2.7271050246979464e-13, -1.1336067551696862e-13,
              2.5372694132329818e-14)


def _erf(xp, x):
    """erf(x) for numpy and CuPy alike (numpy has no erf ufunc)."""
    z = xp.minimum(xp.abs(x), 6.0)  # erf(6) is 1 to double precision
    t = 1 / (1 + 0.5 * z)
    s = (2 * t - 1.25) / 0.75  # t in [0.25, 1] -> s in [-1, 1]
    b1 = b2 = 0
    for c in reversed(_ERFC_CHEB[1:]):  # Clenshaw recurrence: 18 array passes
        b1, b2 = 2 * s * b1 - b2 + c, b1
    cheb = s * b1 - b2 + _ERFC_CHEB[0]
    return xp.sign(x) * (1 - t * xp.exp(cheb - z * z))


class LeakyReLU(Op):
    """Leaky rectifiers selected by ``act_type``.

    - ``leaky``: ``x`` for x > 0, ``slope * x`` otherwise.
    - ``prelu``: like leaky with a learned slope ``gamma`` per channel (axis 1), shape (C,)
      or (1,). MXNet gives the auto-created ``<name>_gamma`` variable the initializer
      ``Constant(0.25)`` (see :meth:`auto_input_attrs`).
    - ``elu``: ``slope * (exp(x) - 1)`` for x <= 0.
    - ``selu``: ``lambda * (x if x > 0 else alpha * (exp(x) - 1))`` with the standard constants.
      Its gradient is the true derivative; MXNet 1.9.1's backward computes
      ``lambda * (y + alpha)`` for x <= 0, which is not.
    - ``gelu``: ``0.5 * x * (1 + erf(x / sqrt(2)))`` (exact erf form, as MXNet).

    ``rrelu`` is refused (MXNet 1.9.1 itself crashes on it); ``lower_bound`` and
    ``upper_bound`` are accepted for JSON compatibility. Backward keeps ``data`` (and
    ``gamma`` for prelu).
    """

    name = "LeakyReLU"
    params = {"act_type": Param("str", "leaky",
                                choices=("leaky", "prelu", "elu", "selu", "gelu", "rrelu")),
              "slope": Param("float", 0.25), "lower_bound": Param("float", 0.125),
              "upper_bound": Param("float", 0.334)}
    inputs = ("data", "gamma")

    def check(self) -> None:
        if self.act_type == "rrelu":
            raise AttributeValueError("LeakyReLU: act_type 'rrelu' is not supported")
        self.retain_inputs = (0, 1) if self.act_type == "prelu" else (0,)

    def list_arguments(self) -> list[str]:
        return ["data", "gamma"] if self.act_type == "prelu" else ["data"]

    def auto_input_attrs(self) -> dict[str, dict[str, str]]:
        """Attributes MXNet puts on auto-created input variables (prelu's gamma init)."""
        if self.act_type == "prelu":
            return {"gamma": {"__init__": '["Constant", {"value": 0.25}]'}}
        return {}

    def infer_shape(self, in_shapes, out_shapes):
        data = merge_shape(in_shapes[0], out_shapes[0], "data and output must share a shape")
        if self.act_type != "prelu":
            return [data], [data], []
        gamma = in_shapes[1]
        if data is not None:
            if len(data) < 2:
                raise ShapeError(f"prelu needs data with a channel axis 1, got data {data}")
            if gamma is None or tuple(gamma) != (1,):
                gamma = merge_shape(gamma, (data[1],), f"gamma must be (1,) or one slope per "
                                                       f"channel of data {data}")
        return [data, gamma], [data], []

    def _gamma(self, gamma, ndim: int):
        """gamma shaped to broadcast along axis 1."""
        return gamma.reshape((1, -1) + (1,) * (ndim - 2))

    def forward(self, xp, inputs, aux, is_train):
        x, act = inputs[0], self.act_type
        if act == "leaky" and 0 <= self.slope <= 1:  # max(x, a x) is that, without a where
            y = xp.maximum(x, x * x.dtype.type(self.slope))
        elif act == "leaky":
            y = xp.where(x > 0, x, x * self.slope)
        elif act == "prelu":
            y = xp.where(x > 0, x, x * self._gamma(inputs[1], x.ndim))
        elif act == "elu":
            y = xp.where(x > 0, x, self.slope * xp.expm1(xp.minimum(x, 0)))
        elif act == "selu":
            y = _SELU_LAMBDA * xp.where(x > 0, x, _SELU_ALPHA * xp.expm1(xp.minimum(x, 0)))
        else:
            y = 0.5 * x * (1 + _erf(xp, x * _INV_SQRT2))
        return [y.astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, x, act = out_grads[0], inputs[0], self.act_type
        if act == "leaky" and 0 <= self.slope <= 1:
            # the slope factor is fmax(sign(x), slope): 1 above zero, slope at and below
            # (and at NaN); three float ops beat a compare and a where
            factor = xp.sign(x)
            xp.fmax(factor, factor.dtype.type(self.slope), out=factor)
            return [(factor * g).astype(g.dtype, copy=False)]
        pos = x > 0
        if act == "prelu":
            gamma = inputs[1]
            gx = xp.where(pos, g, g * self._gamma(gamma, x.ndim)) if need_grad[0] else None
            ggamma = None
            if need_grad[1]:
                prod = xp.where(pos, 0, g * x)
                axes = tuple(i for i in range(x.ndim) if i != 1 or gamma.size == 1)
                ggamma = prod.sum(axis=axes).reshape(gamma.shape)
            return [gx, ggamma]
        if act == "leaky":
            gx = xp.where(pos, g, g * self.slope)
        elif act == "elu":
            gx = xp.where(pos, g, g * (self.slope * xp.exp(xp.minimum(x, 0))))
        elif act == "selu":
            gx = _SELU_LAMBDA * xp.where(pos, g, g * (_SELU_ALPHA * xp.exp(xp.minimum(x, 0))))
        else:
            gx = g * (0.5 * (1 + _erf(xp, x * _INV_SQRT2))
                      + x * _INV_SQRT_2PI * xp.exp(-0.5 * x * x))
        return [gx.astype(g.dtype, copy=False)]
