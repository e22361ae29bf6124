"""Per-coordinate adaptive optimizers: AdaGrad, RMSProp, AdaDelta, Ftrl.

Notation in the docstrings: ``g' = clip(rescale_grad * grad)``; ``lr`` and ``wd`` are the
per-parameter rate and decay.
"""
from __future__ import annotations

from typing import Any

from .optimizer import (FINITE_OR_NONE, NON_NEGATIVE, POSITIVE, UNIT, Optimizer, check_settings,
                        get_array_module)

__all__ = ["AdaGrad", "RMSProp", "AdaDelta", "Ftrl"]


@Optimizer.register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al., 2011).

    ``h += g'**2``, then ``w -= lr * (g' / sqrt(h + eps) + wd*w)``.

    A row_sparse gradient updates only its rows of ``w`` and ``h`` (MXNet's sparse
    ``adagrad_update``), which without weight decay is exactly the dense update with zeros
    for the missing rows. That kernel takes no weight decay, so a row_sparse gradient for a
    parameter whose ``wd`` (times its ``wd_mult``) is not 0 raises a ValueError.

    Parameters
    ----------
    eps : float, default 1e-7
        Added under the square root for stability (kept as ``float_stable_eps``, MXNet's
        attribute name).
    **kwargs
        Passed to :class:`Optimizer` (``learning_rate`` defaults to 0.01).
    """

    _config_attrs = {"eps": "float_stable_eps"}

    def __init__(self, eps: float = 1e-7, **kwargs: Any):
        check_settings(self, eps=(eps, POSITIVE))
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: Any) -> Any:
        """The running sum of squared gradients, zeros like ``weight``."""
        return get_array_module(weight).zeros_like(weight)

    def _lazy_rows(self, index: Any) -> bool:
        wd = self._get_wd(index)
        if wd:  # MXNet 1.9.1's sparse adagrad_update refuses wd != 0 (no rule to follow)
            raise ValueError(f"AdaGrad: a row_sparse gradient cannot be used with weight decay "
                             f"(wd={wd} for index {index!r}), as in MXNet's sparse "
                             "adagrad_update; set wd (or this parameter's wd_mult) to 0, or "
                             "give a dense gradient")
        return True

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        g = self._grad(xp, grad, weight)
        scratch = xp.square(g)
        state += scratch
        xp.add(state, self.float_stable_eps, out=scratch)
        xp.sqrt(scratch, out=scratch)
        g /= scratch
        g *= lr
        if wd:
            weight *= 1.0 - lr * wd
        weight -= g


@Optimizer.register
class RMSProp(Optimizer):
    """RMSProp (Tieleman and Hinton, 2012), optionally centered (Graves, 2013).

    With ``gg = clip(rescale_grad*grad + wd*w)`` and ``n = (1-gamma1)*gg**2 + gamma1*n``:
    plain, ``w -= lr * gg / sqrt(n + epsilon)``; centered, also
    ``gbar = (1-gamma1)*gg + gamma1*gbar``,
    ``delta = gamma2*delta - lr * gg / sqrt(n - gbar**2 + epsilon)`` and ``w += delta``.

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.001.
    gamma1 : float, default 0.9
        Decay of the squared-gradient (and, centered, gradient) averages.
    gamma2 : float, default 0.9
        Momentum of the centered version.
    epsilon : float, default 1e-8
        Added under the square root for stability.
    centered : bool, default False
        Use the centered version (Graves's, with momentum) instead of Hinton's.
    clip_weights : float, optional
        Clip weights to ``[-clip_weights, clip_weights]`` after each update; ``None`` or
        a value <= 0 turns this off.
    **kwargs
        Passed to :class:`Optimizer`.
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate: float | None = None, gamma1: float = 0.9,
                 gamma2: float = 0.9, epsilon: float = 1e-8, centered: bool = False,
                 clip_weights: float | None = None, **kwargs: Any):
        check_settings(self, gamma1=(gamma1, UNIT), gamma2=(gamma2, UNIT),
                       epsilon=(epsilon, POSITIVE), clip_weights=(clip_weights, FINITE_OR_NONE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.epsilon = epsilon
        self.centered = centered
        self.clip_weights = clip_weights

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(n,)``, or ``(n, gbar, delta)`` when centered; zeros like ``weight``."""
        xp = get_array_module(weight)
        if self.centered:
            return xp.zeros_like(weight), xp.zeros_like(weight), xp.zeros_like(weight)
        return (xp.zeros_like(weight),)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        g = self._grad(xp, grad, weight, wd)
        n = state[0]
        scratch = xp.square(g)
        scratch *= 1.0 - self.gamma1
        n *= self.gamma1
        n += scratch
        if self.centered:
            gbar, delta = state[1], state[2]
            xp.multiply(g, 1.0 - self.gamma1, out=scratch)
            gbar *= self.gamma1
            gbar += scratch
            xp.square(gbar, out=scratch)
            xp.subtract(n, scratch, out=scratch)
            scratch += self.epsilon
        else:
            xp.add(n, self.epsilon, out=scratch)
        xp.sqrt(scratch, out=scratch)
        g /= scratch
        g *= lr
        if self.centered:
            delta *= self.gamma2
            delta -= g
            weight += delta
        else:
            weight -= g
        if self.clip_weights is not None and self.clip_weights > 0:
            xp.clip(weight, -self.clip_weights, self.clip_weights, out=weight)


@Optimizer.register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler, 2012); it takes no learning rate.

    ``acc_g = rho*acc_g + (1-rho)*g'**2``,
    ``d = sqrt(acc_d + epsilon) / sqrt(acc_g + epsilon) * g'``,
    ``acc_d = rho*acc_d + (1-rho)*d**2``, then ``w -= d + wd*w``.

    Parameters
    ----------
    rho : float, default 0.90
        Decay of both running averages.
    epsilon : float, default 1e-5
        Added under the square roots for stability.
    **kwargs
        Passed to :class:`Optimizer`; ``learning_rate`` is accepted and ignored.
    """

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any):
        check_settings(self, rho=(rho, UNIT), epsilon=(epsilon, POSITIVE))
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(acc_g, acc_delta)``, zeros like ``weight``."""
        xp = get_array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        wd = self._get_wd(index)
        acc_g, acc_d = state
        g = self._grad(xp, grad, weight)
        scratch = xp.square(g)
        scratch *= 1.0 - self.rho
        acc_g *= self.rho
        acc_g += scratch
        xp.add(acc_d, self.epsilon, out=scratch)
        xp.sqrt(scratch, out=scratch)
        g *= scratch
        xp.add(acc_g, self.epsilon, out=scratch)
        xp.sqrt(scratch, out=scratch)
        g /= scratch
        xp.square(g, out=scratch)
        scratch *= 1.0 - self.rho
        acc_d *= self.rho
        acc_d += scratch
        if wd:
            weight *= 1.0 - wd
        weight -= g


@Optimizer.register
class Ftrl(Optimizer):
    """FTRL-Proximal (McMahan et al., 2013), with L1 strength ``lamda1``.

    ``z += g' - (sqrt(n + g'**2) - sqrt(n)) * w / lr``, ``n += g'**2``, then
    ``w = (sign(z)*lamda1 - z) / ((beta + sqrt(n)) / lr + wd)`` where ``|z| > lamda1``,
    else 0.

    A row_sparse gradient updates only its rows of ``w``, ``z`` and ``n`` (MXNet's sparse
    ``ftrl_update``); the other rows keep their values. The dense rule would instead recompute
    every row of ``w`` from ``z`` and ``n``, setting rows never pushed to 0. (MXNet runs that
    sparse kernel when weight and states are row_sparse, as its Ftrl creates the states for a
    row_sparse weight; raymod's weights are dense, and get the same rows-only update.)

    Parameters
    ----------
    lamda1 : float, default 0.01
        L1 regularisation strength.
    learning_rate : float, optional
        Default 0.1.
    beta : float, default 1
        Added to ``sqrt(n)`` in the per-coordinate rate.
    **kwargs
        Passed to :class:`Optimizer`.
    """

    default_learning_rate = 0.1

    def __init__(self, lamda1: float = 0.01, learning_rate: float | None = None,
                 beta: float = 1, **kwargs: Any):
        check_settings(self, lamda1=(lamda1, NON_NEGATIVE), beta=(beta, NON_NEGATIVE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1 = lamda1
        self.beta = beta

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(z, n)``, zeros like ``weight``."""
        xp = get_array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight)

    def _lazy_rows(self, index: Any) -> bool:
        return True

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if lr == 0:  # the rule divides by lr; a frozen parameter stays as it is
            return
        z, n = state
        g = self._grad(xp, grad, weight)
        z += g
        xp.square(g, out=g)
        scratch = xp.sqrt(n)
        n += g
        xp.sqrt(n, out=g)
        scratch -= g  # sqrt(n_old) - sqrt(n_new)
        scratch *= weight
        scratch /= lr
        z += scratch
        g += self.beta  # g holds the denominator from here on
        g /= lr
        g += wd
        xp.sign(z, out=scratch)
        scratch *= self.lamda1
        scratch -= z
        scratch /= g
        scratch *= xp.abs(z) > self.lamda1
        weight[...] = scratch
