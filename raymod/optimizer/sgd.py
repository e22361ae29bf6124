"""Gradient-descent optimizers: SGD, NAG, Signum, SGLD, and the ``test`` optimizer.

Notation in the docstrings: ``g' = clip(rescale_grad * grad)``; ``lr`` and ``wd`` are the
per-parameter rate and decay (multipliers applied).
"""
from __future__ import annotations

import functools
import math
import os
from typing import Any

import numpy as np

from .. import random as _random
from .optimizer import NON_NEGATIVE, UNIT, Optimizer, _REGISTRY, check_settings, get_array_module

__all__ = ["SGD", "NAG", "Signum", "SGLD", "Test"]

#: environment variable: how many weights SGD updates per call (MXNet's name)
AGGREGATION_SIZE_ENV = "MXNET_OPTIMIZER_AGGREGATION_SIZE"


@Optimizer.register
class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum.

    Without momentum: ``w = (1 - lr*wd) * w - lr * g'``.
    With momentum: ``m = momentum*m - lr*wd*w - lr*g'``, then ``w += m``.
    Weight decay is applied outside the gradient clipping.

    With a row_sparse gradient and ``lazy_update`` (MXNet's lazy update), these formulas
    apply to the gradient's rows only: the other rows of the weight and the momentum keep
    their values, so they get neither weight decay nor momentum. With ``lazy_update=False``
    the update is the dense one with zeros for the rows the gradient lacks.

    Parameters
    ----------
    momentum : float, default 0.0
        Momentum coefficient; 0 keeps no state.
    lazy_update : bool, default True
        Update only the rows a row_sparse gradient holds (dense gradients update every row
        either way).
    **kwargs
        Passed to :class:`Optimizer` (``learning_rate`` defaults to 0.01).

    Notes
    -----
    MXNet 1.9.1 applies the lazy update to a dense weight too (``sgd_update`` and
    ``sgd_mom_update`` with dense weight and momentum, row_sparse grad, ``lazy_update=True``).
    Its multi-precision ops have no sparse kernel and so update densely; here a float16
    weight's master copy is updated lazily like any other weight.
    """

    _master_last = True  # MXNet's multi-precision state: (momentum, master copy)

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any):
        check_settings(self, momentum=(momentum, UNIT))
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        # the Updater hands this many weights to one update call: MXNet's variable when set,
        # else all at once (same result as MXNet's default of 4: every rate of a step is read
        # after all of the step's counts, and one call has less per-call work)
        size = os.environ.get(AGGREGATION_SIZE_ENV)
        self.aggregate_num = int(size) if size else math.inf

    def create_state(self, index: Any, weight: Any) -> Any:
        """The momentum buffer (zeros like ``weight``), or None without momentum."""
        if self.momentum == 0.0:
            return None
        return get_array_module(weight).zeros_like(weight)

    def _lazy_rows(self, index: Any) -> bool:
        return self.lazy_update

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._step(weight, grad, state, self._get_lr(index), self._get_wd(index))

    def _update_many(self, indices: list, weights: list, grads: list, states: list) -> None:
        # as MXNet's multi_sgd_update: count every index, then read all the rates at once
        # (MXNet reads them so for a list with row_sparse gradients too, then updates one by one)
        self._update_count(indices)
        for index, weight, grad, state, lr, wd in zip(indices, weights, grads, states,
                                                      self._get_lrs(indices),
                                                      self._get_wds(indices)):
            rule = functools.partial(self._step, lr=lr, wd=wd)
            self._run(index, weight, grad, state, rule)

    def _step(self, weight: Any, grad: Any, state: Any, lr: float, wd: float) -> None:
        """Update one weight (or the rows of it a row_sparse gradient holds) in place."""
        xp = get_array_module(weight)
        if self._clipping():
            g = self._grad(xp, grad, weight)
            g *= lr
        else:  # one pass: lr folded into the rescale (the common, hot case)
            g = xp.multiply(grad, lr * self.rescale_grad, dtype=weight.dtype)
        if state is None:
            if wd:
                weight *= 1.0 - lr * wd
            weight -= g
            return
        state *= self.momentum
        if wd:
            state -= (lr * wd) * weight
        state -= g
        weight += state


_REGISTRY.register(SGD, name="ccsgd")  # MXNet's deprecated alias


@Optimizer.register
class NAG(Optimizer):
    """Nesterov accelerated gradient.

    With ``gg = g' + wd*w``: ``m = momentum*m - lr*gg``, then ``w += momentum*m - lr*gg``
    (equivalently ``w + momentum**2 * m_old - lr*(1 + momentum)*gg``). Without momentum,
    ``w -= lr*gg``.

    Parameters
    ----------
    momentum : float, default 0.0
        Momentum coefficient; 0 keeps no state.
    **kwargs
        Passed to :class:`Optimizer` (``learning_rate`` defaults to 0.01).
    """

    _master_last = True  # MXNet's multi-precision state: (momentum, master copy)

    def __init__(self, momentum: float = 0.0, **kwargs: Any):
        check_settings(self, momentum=(momentum, UNIT))
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index: Any, weight: Any) -> Any:
        """The momentum buffer, or None without momentum."""
        if self.momentum == 0.0:
            return None
        return get_array_module(weight).zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        g = self._grad(xp, grad, weight)
        if wd:
            g += wd * weight
        g *= lr
        weight -= g
        if state is not None:
            state *= self.momentum
            state -= g
            xp.multiply(state, self.momentum, out=g)
            weight += g


@Optimizer.register
class Signum(Optimizer):
    """Signum (sign of momentum), and signSGD when ``momentum`` is 0.

    With momentum: ``m = momentum*m - (1 - momentum)*(wd*w + g')``, then
    ``w = (1 - lr*wd_lh)*w + lr*sign(m)``. Without: ``w = (1 - lr*(wd + wd_lh))*w - lr*sign(grad)``.

    Parameters
    ----------
    learning_rate : float, optional
        Default 0.01.
    momentum : float, default 0.9
        Momentum coefficient; 0 gives signSGD, with no state.
    wd_lh : float, default 0.0
        Decoupled weight decay (Loshchilov and Hutter), applied to the weight directly.
    **kwargs
        Passed to :class:`Optimizer`.
    """

    def __init__(self, learning_rate: float | None = None, momentum: float = 0.9,
                 wd_lh: float = 0.0, **kwargs: Any):
        check_settings(self, momentum=(momentum, UNIT), wd_lh=(wd_lh, NON_NEGATIVE))
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index: Any, weight: Any) -> Any:
        """The momentum buffer, or None without momentum."""
        if self.momentum == 0.0:
            return None
        return get_array_module(weight).zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if state is None:
            decay = lr * (wd + self.wd_lh)
            if decay:
                weight *= 1.0 - decay
            step = xp.sign(grad)
            step *= lr
            weight -= step
            return
        g = self._grad(xp, grad, weight, 0.0)
        if wd:
            g += wd * weight
        g *= 1.0 - self.momentum
        state *= self.momentum
        state -= g
        if self.wd_lh:
            weight *= 1.0 - lr * self.wd_lh
        xp.sign(state, out=g)
        g *= lr
        weight += g


@Optimizer.register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics.

    ``w = w - lr/2 * (g' + wd*w) + noise`` with Gaussian noise of standard deviation
    ``sqrt(lr)``, drawn from raymod's seeded generator (see :func:`raymod.random.seed`).

    Parameters
    ----------
    **kwargs
        Passed to :class:`Optimizer`.
    """

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        xp = get_array_module(weight)
        lr, wd = self._get_lr(index), self._get_wd(index)
        g = self._grad(xp, grad, weight)
        if wd:
            g += wd * weight
        g *= lr / 2.0
        weight -= g
        draw_dtype = weight.dtype if weight.dtype in (np.float32, np.float64) else np.float32
        noise = _random.device_generator(xp).standard_normal(size=weight.shape, dtype=draw_dtype)
        noise *= math.sqrt(lr)
        weight += noise


@Optimizer.register
class Test(Optimizer):
    """A trivial optimizer for tests: ``w += rescale_grad * grad``; the state mirrors ``w``.

    Parameters
    ----------
    **kwargs
        Passed to :class:`Optimizer`.
    """

    def create_state(self, index: Any, weight: Any) -> Any:
        """Zeros like ``weight``; after each update it holds a copy of the weight."""
        return get_array_module(weight).zeros_like(weight)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        weight += grad * self.rescale_grad
        state[...] = weight
