"""Learning-rate schedules: ``rm.lr_scheduler.FactorScheduler`` and friends, as in MXNet 1.x.

A scheduler is a callable ``sched(num_update) -> lr``. An optimizer holding one calls it with its
update count before every update.

Unlike MXNet 1.x, whose schedulers overwrite ``base_lr`` as they decay, these are pure functions
of ``num_update``: ``base_lr`` always holds the peak rate given by the user (or by the
optimizer's ``learning_rate``), asking for an earlier step gives that step's rate again, and a
restored checkpoint needs only the update count. The rates returned are MXNet's.
"""
from __future__ import annotations

import math
from typing import Any

from .base import check_int, check_real
from .registry import Registry

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler", "create", "register"]

_REGISTRY: Registry["LRScheduler"] = Registry("lr_scheduler")
register = _REGISTRY.register


def create(name: str, **kwargs: Any) -> "LRScheduler":
    """Create a scheduler by its registered name.

    Parameters
    ----------
    name : str
        The class name, case-insensitive (``'FactorScheduler'``), or a short alias
        (``'factor'``, ``'multifactor'``, ``'poly'``, ``'cosine'``).
    **kwargs
        Constructor arguments of that class.

    Returns
    -------
    LRScheduler
        The new scheduler.
    """
    return _REGISTRY.get(name)(**kwargs)


def _check_number(sched: Any, name: str, value: Any, low: float | None = None) -> None:
    """A finite number (``>= low``); the error names the scheduler and the argument."""
    check_real(type(sched).__name__, name, value, low)


def _check_int(sched: Any, name: str, value: Any, low: int) -> None:
    check_int(type(sched).__name__, name, value, low)


@register
class LRScheduler:
    """Base class of learning-rate schedules: an optional warmup, then a constant rate.

    Subclasses override :meth:`_after_warmup`; ported MXNet subclasses that override
    ``__call__`` and use :meth:`get_warmup_lr` work as well.

    Parameters
    ----------
    base_lr : float, default 0.01
        The rate reached at the end of the warmup, from which later decay starts; at
        least 0. An optimizer given ``learning_rate`` overwrites it.
    warmup_steps : int, default 0
        Number of updates spent warming up.
    warmup_begin_lr : float, default 0
        The rate at update 0 of the warmup; from 0 to ``base_lr``.
    warmup_mode : {'linear', 'constant'}, default 'linear'
        'linear' ramps from ``warmup_begin_lr`` towards ``base_lr``; 'constant' holds
        ``warmup_begin_lr`` until the warmup ends.
    """

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        _check_number(self, "base_lr", base_lr, 0)
        _check_number(self, "warmup_begin_lr", warmup_begin_lr, 0)
        _check_int(self, "warmup_steps", warmup_steps, 0)
        if warmup_begin_lr > base_lr:
            raise ValueError(f"warmup_begin_lr ({warmup_begin_lr}) must not exceed "
                             f"base_lr ({base_lr})")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"warmup_mode must be 'linear' or 'constant', got {warmup_mode!r}")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    @property
    def warmup_final_lr(self) -> float:
        """The rate the warmup ends at: ``base_lr`` (MXNet's attribute name)."""
        return self.base_lr

    def get_warmup_lr(self, num_update: int) -> float:
        """The rate at update ``num_update``, which must lie inside the warmup.

        Parameters
        ----------
        num_update : int
            An update count below ``warmup_steps``.

        Returns
        -------
        float
            ``warmup_begin_lr`` in 'constant' mode, else the linear ramp's value.
        """
        if num_update >= self.warmup_steps:
            raise ValueError(f"update {num_update} is past the warmup ({self.warmup_steps} steps)")
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        span = self.base_lr - self.warmup_begin_lr
        return self.warmup_begin_lr + span * float(num_update) / float(self.warmup_steps)

    def __call__(self, num_update: int) -> float:
        """The learning rate to use for update number ``num_update``.

        Parameters
        ----------
        num_update : int
            How many updates have been made so far (the optimizer's ``num_update``).

        Returns
        -------
        float
            The rate.
        """
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self._after_warmup(num_update)

    def _after_warmup(self, num_update: int) -> float:
        """The rate once the warmup is over; constant here."""
        return self.base_lr

    def get_config(self) -> dict:
        """The constructor arguments, JSON-able, so that ``create(name, **config)`` rebuilds it.

        Returns
        -------
        dict
            Argument name -> value.
        """
        return {"base_lr": self.base_lr, "warmup_steps": self.warmup_steps,
                "warmup_begin_lr": self.warmup_begin_lr, "warmup_mode": self.warmup_mode}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


@register
@_REGISTRY.alias("factor")
class FactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` after every ``step`` updates, down to a floor.

    The rate at update ``n`` is ``max(base_lr * factor**k, stop_factor_lr)`` with
    ``k = (n - 1) // step`` decays (none before update ``step + 1``). Decays are counted from
    update 0, warmup included, as MXNet does.

    Parameters
    ----------
    step : int
        Updates between two decays; at least 1.
    factor : float, default 1
        Multiplier applied at each decay; from 0 to 1.
    stop_factor_lr : float, default 1e-8
        The rate never decays below this; at least 0.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As in :class:`LRScheduler`.
    """

    def __init__(self, step: int, factor: float = 1, stop_factor_lr: float = 1e-8,
                 base_lr: float = 0.01, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_int(self, "step", step, 1)
        _check_number(self, "factor", factor, 0)
        _check_number(self, "stop_factor_lr", stop_factor_lr, 0)
        if factor > 1.0:
            raise ValueError(f"factor must be <= 1 so that the rate decreases, got {factor}")
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr

    def _after_warmup(self, num_update: int) -> float:
        decays = max(0, (num_update - 1) // self.step)
        if decays == 0:
            return self.base_lr
        return max(self.base_lr * self.factor ** decays, self.stop_factor_lr)

    def get_config(self) -> dict:
        """See :meth:`LRScheduler.get_config`."""
        return {"step": self.step, "factor": self.factor,
                "stop_factor_lr": self.stop_factor_lr, **super().get_config()}


@register
@_REGISTRY.alias("multifactor")
class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` once past each update count listed in ``step``.

    The rate at update ``n`` is ``base_lr * factor**k`` where ``k`` counts the entries of
    ``step`` strictly below ``n``.

    Parameters
    ----------
    step : list of int
        Strictly increasing update counts, each at least 1.
    factor : float, default 1
        Multiplier applied at each listed step; from 0 to 1.
    base_lr, warmup_steps, warmup_begin_lr, warmup_mode
        As in :class:`LRScheduler`.
    """

    def __init__(self, step: list[int], factor: float = 1, base_lr: float = 0.01,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) == 0:
            raise TypeError(f"step must be a non-empty list of ints, got {step!r}")
        for i, s in enumerate(step):
            _check_int(self, f"step[{i}]", s, 1)
            if i > 0 and s <= step[i - 1]:
                raise ValueError(f"step must be strictly increasing, got {list(step)}")
        _check_number(self, "factor", factor, 0)
        if factor > 1.0:
            raise ValueError(f"factor must be <= 1 so that the rate decreases, got {factor}")
        self.step = list(step)
        self.factor = factor

    def _after_warmup(self, num_update: int) -> float:
        decays = sum(1 for s in self.step if num_update > s)
        return self.base_lr * self.factor ** decays

    def get_config(self) -> dict:
        """See :meth:`LRScheduler.get_config`."""
        return {"step": list(self.step), "factor": self.factor, **super().get_config()}


class _DecayToFinal(LRScheduler):
    """Shared frame of Poly and Cosine: decay from ``base_lr`` to ``final_lr`` by ``max_update``."""

    def __init__(self, max_update: int, base_lr: float, final_lr: float, warmup_steps: int,
                 warmup_begin_lr: float, warmup_mode: str):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_int(self, "max_update", max_update, 1)
        _check_number(self, "final_lr", final_lr, 0)
        if max_update <= warmup_steps:
            raise ValueError(f"max_update ({max_update}) must exceed warmup_steps "
                             f"({warmup_steps}), or nothing is left to decay over")
        self.max_update = max_update
        self.final_lr = final_lr

    @property
    def max_steps(self) -> int:
        """Updates spent decaying: ``max_update - warmup_steps``."""
        return self.max_update - self.warmup_steps

    @property
    def base_lr_orig(self) -> float:
        """The rate the decay starts from (MXNet's attribute name): ``base_lr``."""
        return self.base_lr

    def _after_warmup(self, num_update: int) -> float:
        if num_update >= self.max_update:
            return self.final_lr
        progress = float(num_update - self.warmup_steps) / float(self.max_steps)
        return self.final_lr + (self.base_lr - self.final_lr) * self._shape(progress)

    def _shape(self, progress: float) -> float:
        """Fraction of the decay range left at ``progress`` in [0, 1]."""
        raise NotImplementedError

    def get_config(self) -> dict:
        """See :meth:`LRScheduler.get_config`."""
        return {"max_update": self.max_update, "final_lr": self.final_lr, **super().get_config()}


@register
@_REGISTRY.alias("poly")
class PolyScheduler(_DecayToFinal):
    """Polynomial decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    After the warmup, with ``p = (n - warmup_steps) / (max_update - warmup_steps)``, the rate at
    update ``n`` is ``final_lr + (base_lr - final_lr) * (1 - p)**pwr``, and ``final_lr`` from
    ``max_update`` on.

    Parameters
    ----------
    max_update : int
        The update count at which ``final_lr`` is reached; must exceed ``warmup_steps``.
    base_lr : float, default 0.01
        The rate the decay starts from.
    pwr : float, default 2
        The power of the polynomial; at least 0.
    final_lr : float, default 0
        The rate at and after ``max_update``; at least 0.
    warmup_steps, warmup_begin_lr, warmup_mode
        As in :class:`LRScheduler`.
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2,
                 final_lr: float = 0, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_number(self, "pwr", pwr, 0)
        self.power = pwr

    def _shape(self, progress: float) -> float:
        return (1.0 - progress) ** self.power

    def get_config(self) -> dict:
        """See :meth:`LRScheduler.get_config`."""
        return {"pwr": self.power, **super().get_config()}


@register
@_REGISTRY.alias("cosine")
class CosineScheduler(_DecayToFinal):
    """Half-cosine decay from ``base_lr`` to ``final_lr`` over ``max_update`` updates.

    After the warmup, with ``p = (n - warmup_steps) / (max_update - warmup_steps)``, the rate at
    update ``n`` is ``final_lr + (base_lr - final_lr) * (1 + cos(pi * p)) / 2``, and ``final_lr``
    from ``max_update`` on.

    Parameters
    ----------
    max_update : int
        The update count at which ``final_lr`` is reached; must exceed ``warmup_steps``.
    base_lr : float, default 0.01
        The rate the decay starts from.
    final_lr : float, default 0
        The rate at and after ``max_update``; at least 0.
    warmup_steps, warmup_begin_lr, warmup_mode
        As in :class:`LRScheduler`.
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def _shape(self, progress: float) -> float:
        return (1.0 + math.cos(math.pi * progress)) / 2.0
