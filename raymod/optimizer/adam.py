"""Moment-based optimizers: Adam, Adamax, Nadam, FTML.

Notation in the docstrings: ``gg = clip(rescale_grad * grad + wd * w)`` (weight decay inside
the clipping, as MXNet's kernels do), ``t`` the parameter's update count starting at 1.
"""
from __future__ import annotations

import math
from typing import Any

from .optimizer import NON_NEGATIVE, POSITIVE, UNIT, Optimizer, check_settings, get_array_module

__all__ = ["Adam", "Adamax", "Nadam", "FTML"]


def _two_zeros(weight: Any) -> tuple:
    xp = get_array_module(weight)
    return xp.zeros_like(weight), xp.zeros_like(weight)


def _ema(xp, avg: Any, value: Any, decay: float, scratch: Any) -> None:
    """``avg = decay*avg + (1 - decay)*value`` in place, using ``scratch`` as the temporary."""
    xp.multiply(value, 1.0 - decay, out=scratch)
    avg *= decay
    avg += scratch


@Optimizer.register
class Adam(Optimizer):
    """Adam (Kingma and Ba, 2014).

    ``m = beta1*m + (1-beta1)*gg``, ``v = beta2*v + (1-beta2)*gg**2``, then
    ``w -= lr * sqrt(1 - beta2**t) / (1 - beta1**t) * m / (sqrt(v) + epsilon)``.

    With a row_sparse gradient and ``lazy_update`` (MXNet's lazy update), this applies to the
    gradient's rows only: the other rows of ``w``, ``m`` and ``v`` keep their values. ``t``
    counts the updates of the whole weight, so the bias correction is the dense path's. With
    ``lazy_update=False`` the update is the dense one with zeros for the missing rows (their
    ``gg`` is then ``clip(wd * w)``, and ``m``, ``v`` decay there too).

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.001.
    beta1 : float, default 0.9
        Decay of the first-moment average.
    beta2 : float, default 0.999
        Decay of the second-moment average.
    epsilon : float, default 1e-8
        Added to the denominator for stability.
    lazy_update : bool, default True
        Update only the rows a row_sparse gradient holds (dense gradients update every row
        either way).
    **kwargs
        Passed to :class:`Optimizer`.
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate: float | None = None, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, lazy_update: bool = True,
                 **kwargs: Any):
        check_settings(self, beta1=(beta1, UNIT), beta2=(beta2, UNIT),
                       epsilon=(epsilon, POSITIVE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(mean, variance)``, zeros like ``weight``."""
        return _two_zeros(weight)

    def _lazy_rows(self, index: Any) -> bool:
        return self.lazy_update

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        mean, var = state
        g = self._grad(xp, grad, weight, wd)
        scratch = xp.empty_like(g)
        _ema(xp, mean, g, self.beta1, scratch)
        xp.square(g, out=g)
        _ema(xp, var, g, self.beta2, scratch)
        xp.sqrt(var, out=scratch)
        scratch += self.epsilon
        xp.divide(mean, scratch, out=scratch)
        scratch *= lr
        weight -= scratch


@Optimizer.register
class Adamax(Optimizer):
    """Adamax, Adam's infinity-norm variant (Kingma and Ba, 2014, section 7).

    ``m = beta1*m + (1-beta1)*gg``, ``u = max(beta2*u, |gg|)``, then
    ``w -= lr / (1 - beta1**t) * m / u``.

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.002.
    beta1 : float, default 0.9
        Decay of the first-moment average.
    beta2 : float, default 0.999
        Decay of the infinity norm.
    **kwargs
        Passed to :class:`Optimizer`.
    """

    default_learning_rate = 0.002

    def __init__(self, learning_rate: float | None = None, beta1: float = 0.9,
                 beta2: float = 0.999, **kwargs: Any):
        check_settings(self, beta1=(beta1, UNIT), beta2=(beta2, UNIT))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(mean, infinity norm)``, zeros like ``weight``."""
        return _two_zeros(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr /= 1.0 - self.beta1 ** t
        mean, norm = state
        g = self._grad(xp, grad, weight, wd)
        scratch = xp.empty_like(g)
        _ema(xp, mean, g, self.beta1, scratch)
        norm *= self.beta2
        xp.abs(g, out=g)
        xp.maximum(norm, g, out=norm)
        xp.divide(mean, norm, out=scratch)
        scratch *= lr
        weight -= scratch


@Optimizer.register
class Nadam(Optimizer):
    """Nesterov-accelerated Adam (Dozat, 2016).

    With the warming momentum ``mu_t = beta1 * (1 - 0.5 * 0.96**(t*schedule_decay))`` and
    ``S_t = mu_1 * ... * mu_t``: ``m`` and ``v`` are Adam's averages, and
    ``w -= lr * m_bar / (sqrt(v / (1 - beta2**t)) + epsilon)`` with
    ``m_bar = (1 - mu_t) * gg / (1 - S_t) + mu_{t+1} * m / (1 - S_t * mu_{t+1})``.

    MXNet 1.x keeps one running product ``S`` for the whole optimizer, so it advances once
    per *parameter* update; here each parameter has its own, derived from its update count,
    which matches MXNet exactly for a single parameter and keeps saved states complete.

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.001.
    beta1 : float, default 0.9
        Decay of the first-moment average.
    beta2 : float, default 0.999
        Decay of the second-moment average.
    epsilon : float, default 1e-8
        Added to the denominator for stability.
    schedule_decay : float, default 0.004
        Speed of the momentum warmup.
    **kwargs
        Passed to :class:`Optimizer`.
    """

    default_learning_rate = 0.001

    def __init__(self, learning_rate: float | None = None, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8, schedule_decay: float = 0.004,
                 **kwargs: Any):
        check_settings(self, beta1=(beta1, UNIT), beta2=(beta2, UNIT),
                       epsilon=(epsilon, POSITIVE), schedule_decay=(schedule_decay, NON_NEGATIVE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self._schedules: dict = {}  # index -> (t, S_t)

    def _momentum(self, t: int) -> float:
        return self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))

    def _schedule(self, index: Any, t: int) -> float:
        """``S_t`` for ``index``: one multiplication per step, recomputed after a jump."""
        last_t, last = self._schedules.get(index, (0, 1.0))
        if last_t != t - 1:
            last_t, last = 0, 1.0
        for i in range(last_t + 1, t + 1):
            last *= self._momentum(i)
        self._schedules[index] = (t, last)
        return last

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(mean, variance)``, zeros like ``weight``."""
        return _two_zeros(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        mu_t, mu_next = self._momentum(t), self._momentum(t + 1)
        sched = self._schedule(index, t)
        sched_next = sched * mu_next
        mean, var = state
        g = self._grad(xp, grad, weight, wd)
        scratch = xp.empty_like(g)
        _ema(xp, mean, g, self.beta1, scratch)
        xp.square(g, out=scratch)
        scratch *= 1.0 - self.beta2
        var *= self.beta2
        var += scratch
        # g becomes m_bar, scratch the denominator
        g *= (1.0 - mu_t) / (1.0 - sched)
        xp.multiply(mean, mu_next / (1.0 - sched_next), out=scratch)
        g += scratch
        xp.divide(var, 1.0 - self.beta2 ** t, out=scratch)
        xp.sqrt(scratch, out=scratch)
        scratch += self.epsilon
        g /= scratch
        g *= lr
        weight -= g


@Optimizer.register
class FTML(Optimizer):
    """Follow the Moving Leader (Zheng and Kwok, 2017).

    ``v = beta2*v + (1-beta2)*gg**2``,
    ``d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)``,
    ``z = beta1*z + (1-beta1)*gg - (d_t - beta1*d)*w``, ``d = d_t``, then ``w = -z / d_t``.
    A parameter whose learning rate is 0 (``lr_mult`` 0) is left unchanged.

    Parameters
    ----------
    beta1 : float, default 0.6
        Decay of ``z`` and ``d``.
    beta2 : float, default 0.999
        Decay of the second-moment average.
    epsilon : float, default 1e-8
        Added for stability.
    **kwargs
        Passed to :class:`Optimizer` (``learning_rate`` defaults to 0.01).
    """

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8,
                 **kwargs: Any):
        check_settings(self, beta1=(beta1, UNIT), beta2=(beta2, UNIT),
                       epsilon=(epsilon, POSITIVE))
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: Any) -> tuple:
        """``(d, v, z)``, zeros like ``weight``."""
        xp = get_array_module(weight)
        return xp.zeros_like(weight), xp.zeros_like(weight), xp.zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if lr == 0:  # d_t would be infinite; a frozen parameter stays as it is
            return
        t = self._index_update_count[index]
        d, v, z = state
        g = self._grad(xp, grad, weight, wd)
        d_t = xp.square(g)
        d_t *= 1.0 - self.beta2
        v *= self.beta2
        v += d_t
        xp.divide(v, 1.0 - self.beta2 ** t, out=d_t)
        xp.sqrt(d_t, out=d_t)
        d_t += self.epsilon
        d_t *= (1.0 - self.beta1 ** t) / lr
        z *= self.beta1
        g *= 1.0 - self.beta1
        z += g
        d *= self.beta1
        xp.subtract(d_t, d, out=d)  # d holds sigma_t = d_t - beta1*d_old for a moment
        xp.multiply(d, weight, out=g)
        z -= g
        d[...] = d_t
        xp.divide(z, d_t, out=weight)
        xp.negative(weight, out=weight)
