"""The one lifecycle of a module: which setup calls have been made.

MXNet keeps three booleans (``binded``, ``params_initialized``, ``optimizer_initialized``)
and asserts on them. raymod keeps one :class:`Stage`; the booleans are read-only views
of it, and :meth:`Stage.missing_call` names the call a method still needs.
"""
from __future__ import annotations

import enum

from ..base import MXNetError

__all__ = ["Stage", "StageError"]


class StageError(MXNetError):
    """A module method was called before the setup call it needs (e.g. ``bind``)."""


class Stage(enum.Enum):
    """Where a module is in its setup.

    ``CREATED -> BOUND -> PARAMS_READY -> OPTIMIZER_READY`` is the usual path
    (``bind``, ``init_params``, ``init_optimizer``). ``PARAMS_LOADED`` is the side state
    of a module that holds parameters but no executors (``Module.load``); ``bind`` takes
    it to ``PARAMS_READY``. Rebinding keeps parameters and optimizer.
    """

    CREATED = "created"
    PARAMS_LOADED = "params_loaded"
    BOUND = "bound"
    PARAMS_READY = "params_ready"
    OPTIMIZER_READY = "optimizer_ready"

    # ---- the MXNet flags --------------------------------------------------------------------
    @property
    def binded(self) -> bool:
        """Executors exist."""
        return self in (Stage.BOUND, Stage.PARAMS_READY, Stage.OPTIMIZER_READY)

    @property
    def params_initialized(self) -> bool:
        """Parameter values exist (on the executors, or held for the next bind)."""
        return self in (Stage.PARAMS_LOADED, Stage.PARAMS_READY, Stage.OPTIMIZER_READY)

    @property
    def optimizer_initialized(self) -> bool:
        """An optimizer is installed."""
        return self is Stage.OPTIMIZER_READY

    # ---- transitions ------------------------------------------------------------------------
    def after_bind(self) -> "Stage":
        """The stage once executors exist."""
        return {Stage.CREATED: Stage.BOUND, Stage.PARAMS_LOADED: Stage.PARAMS_READY}.get(self, self)

    def after_params(self) -> "Stage":
        """The stage once parameters are initialized (needs executors, or stays loaded)."""
        if self is Stage.OPTIMIZER_READY:
            return self
        return Stage.PARAMS_READY if self.binded else Stage.PARAMS_LOADED

    def after_optimizer(self) -> "Stage":
        """The stage once an optimizer is installed (needs parameters on executors)."""
        return Stage.OPTIMIZER_READY

    # ---- requirements -----------------------------------------------------------------------
    def missing_call(self, needed: "Stage") -> str | None:
        """The setup call still missing before a method needing ``needed`` can run, or None.

        ``needed`` is BOUND, PARAMS_READY or OPTIMIZER_READY (each implies the ones before).
        """
        if not self.binded:
            return "bind"
        if needed is Stage.BOUND:
            return None
        if not self.params_initialized:
            return "init_params"
        if needed is Stage.OPTIMIZER_READY and not self.optimizer_initialized:
            return "init_optimizer"
        return None

    def require(self, needed: "Stage", action: str) -> None:
        """Raise :class:`StageError` naming the missing call unless ``needed`` is met.

        Parameters
        ----------
        needed : Stage
            The stage the action needs.
        action : str
            What is being attempted, for the message (e.g. ``'forward'``).
        """
        call = self.missing_call(needed)
        if call is not None:
            hint = " (or set_params)" if call == "init_params" else ""
            raise StageError(f"call {call}{hint} before {action}")
