"""LAMB: Adam's direction scaled per layer by a trust ratio (You et al., 2019)."""
from __future__ import annotations

from typing import Any

from .optimizer import FINITE_OR_NONE, POSITIVE, UNIT, Optimizer, check_settings, get_array_module

__all__ = ["LAMB"]


@Optimizer.register
class LAMB(Optimizer):
    """Layer-wise Adaptive Moments for Batch training (You et al., 2019), as MXNet 1.9.1.

    With ``g = clip(rescale_grad * grad)`` (weight decay is *not* in ``g``) and ``t`` the
    weight's update count::

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m^, v^ = m / (1 - beta1**t), v / (1 - beta2**t)     (m, v without bias_correction)
        u = m^ / (sqrt(v^) + epsilon) + wd * w
        r1 = ||w|| clipped to [lower_bound, upper_bound], r2 = ||u||
        w -= lr * (r1 / r2 if r1 > 0 and r2 > 0 else 1) * u

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.001.
    beta1 : float, default 0.9
        Decay of the first-moment average.
    beta2 : float, default 0.999
        Decay of the second-moment average.
    epsilon : float, default 1e-6
        Added to the denominator for stability.
    lower_bound, upper_bound : float, optional
        Bounds on the weight norm ``r1`` in the trust ratio; None (or a value <= 0, as in
        MXNet) leaves that side unbounded.
    bias_correction : bool, default True
        Divide the moments by ``1 - beta**t``.
    **kwargs
        Passed to :class:`Optimizer`.

    Notes
    -----
    The state is ``(m, v)``, zeros like the weight. Lists of weights are updated one by one;
    MXNet's fused multi-tensor kernel computes the same values.
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate: float | None = None, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-6, lower_bound: float | None = None,
                 upper_bound: float | None = None, bias_correction: bool = True,
                 **kwargs: Any):
        check_settings(self, beta1=(beta1, UNIT), beta2=(beta2, UNIT),
                       epsilon=(epsilon, POSITIVE), lower_bound=(lower_bound, FINITE_OR_NONE),
                       upper_bound=(upper_bound, FINITE_OR_NONE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(m, v)``, zeros like ``weight``."""
        xp = get_array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        mean, var = state
        g = self._grad(xp, grad, weight)
        mean *= self.beta1
        mean += (1.0 - self.beta1) * g
        var *= self.beta2
        var += (1.0 - self.beta2) * g * g
        if self.bias_correction:
            m_hat = mean / (1.0 - self.beta1 ** t)
            v_hat = var / (1.0 - self.beta2 ** t)
        else:
            m_hat, v_hat = mean, var
        update = m_hat / (xp.sqrt(v_hat) + self.epsilon)
        if wd:
            update += wd * weight
        r1 = xp.linalg.norm(weight.ravel())
        if self.lower_bound is not None and self.lower_bound > 0:
            r1 = xp.maximum(r1, self.lower_bound)
        if self.upper_bound is not None and self.upper_bound > 0:
            r1 = xp.minimum(r1, self.upper_bound)
        r2 = xp.linalg.norm(update.ravel())
        # the trust ratio stays on the device (no host sync): 1 where either norm is 0
        ratio = xp.where((r1 == 0) | (r2 == 0), 1.0, r1 / xp.where(r2 == 0, 1.0, r2))
        update *= (lr * ratio).astype(weight.dtype)
        weight -= update
