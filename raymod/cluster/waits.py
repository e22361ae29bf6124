"""Every wait of the driver on its worker and server actors, each with a deadline.

This module is the only place the driver calls ``ray.get`` / ``ray.wait`` on actor calls
(``tests/cluster/test_waits.py`` fails if another driver module does). A missed deadline
never hangs the driver: :func:`get` raises :class:`DeadlineMissed` naming what was awaited
and the calls still pending, and the call site reports it to the controller once, as a hung
worker (``WorkerHung``) or a lost server (``ServerDied``).

How long is long enough comes from :class:`Deadlines`: a high percentile of the step times
seen, times a margin, never under a floor of a few seconds; longer while nothing is known
yet (binding, a worker's first steps), so that a stopped worker in millisecond steps is found
in seconds, not minutes, and a slow first step is never taken for a hang.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np

from ..base import MXNetError

__all__ = ["DeadlineMissed", "Deadlines", "get", "wait", "ready", "settle",
           "FIRST_STEP_SECONDS", "STEP_FLOOR_SECONDS", "CALL_FLOOR_SECONDS", "MARGIN"]

#: the deadline of a step while no step time is known yet (binding, compiling, warm-up)
FIRST_STEP_SECONDS = 60.0
#: the shortest default step deadline once step times are known: scheduling hiccups of a
#: loaded machine (a few hundred ms) stay far below it
STEP_FLOOR_SECONDS = 5.0
#: the shortest default deadline of a set-up or parameter call once steps have run
CALL_FLOOR_SECONDS = 20.0
#: a step may take this many times the 99th percentile of the recent ones
MARGIN = 10.0
#: recent step times the percentile is taken over
RECENT_STEPS = 256


class DeadlineMissed(MXNetError):
    """Calls did not answer within their deadline.

    Attributes
    ----------
    what : str
        What was awaited (for the controller's history and the log).
    seconds : float
        The deadline.
    pending : list
        The object refs still without an answer.
    """

    def __init__(self, what: str, seconds: float, pending: Sequence[Any]):
        super().__init__(f"{what}: no answer within {seconds:.1f} s from "
                         f"{len(pending)} call(s)")
        self.what, self.seconds, self.pending = what, seconds, list(pending)


class Deadlines:
    """How long the driver waits on its actors, from the step times seen so far.

    Parameters
    ----------
    step_timeout : float, optional
        A fixed step deadline (``Workers.step_timeout``); None derives it from the steps.
    """

    def __init__(self, step_timeout: float | None = None):
        self.step_timeout = step_timeout
        self._seen: deque = deque(maxlen=RECENT_STEPS)
        self._margin: float | None = None  # MARGIN x the p99 of _seen, until the next saw()

    def saw(self, seconds: float, steps: int = 1) -> None:
        """Record ``steps`` steps that took ``seconds`` in all."""
        if steps > 0:
            self._seen.append(seconds / steps)
            self._margin = None

    @property
    def known(self) -> bool:
        """Whether any step time has been seen."""
        return bool(self._seen)

    def step(self, steps: int = 1, first: bool = False) -> float:
        """Seconds ``steps`` steps may take before the laggards count as hung; ``first``:
        some worker runs its first steps (it binds and warms up first)."""
        if self.step_timeout is not None:
            return self.step_timeout * max(1, steps)
        if first or not self._seen:
            return FIRST_STEP_SECONDS + self._per_step() * max(1, steps)
        return max(STEP_FLOOR_SECONDS, self._per_step()) * max(1, steps)

    def call(self) -> float:
        """Seconds a set-up or parameter call may take (binding, ``set_params``,
        ``get_params``, a joiner's set-up)."""
        if not self._seen:
            return max(FIRST_STEP_SECONDS, self.step_timeout or 0.0)
        return max(CALL_FLOOR_SECONDS, self.step())

    def _per_step(self) -> float:
        if not self._seen:
            return 0.0
        if self._margin is None:  # once per window, not once per wait
            self._margin = MARGIN * float(np.percentile(np.fromiter(self._seen, float), 99))
        return self._margin


def _ray() -> Any:
    import ray
    return ray


def wait(refs: Sequence[Any], timeout: float, num_returns: int | None = None
         ) -> tuple[list, list]:
    """``(done, pending)``: wait up to ``timeout`` seconds until ``num_returns`` (default
    all) of ``refs`` have answered."""
    refs = list(refs)
    if not refs:
        return [], []
    return _ray().wait(refs, num_returns=min(num_returns or len(refs), len(refs)),
                       timeout=max(0.0, timeout))


def ready(refs: Sequence[Any]) -> list:
    """The refs among ``refs`` that have answered already (no waiting)."""
    return wait(refs, 0.0)[0]


def get(refs: Any, timeout: float, what: str) -> Any:
    """``ray.get(refs)`` within ``timeout`` seconds, else :class:`DeadlineMissed`.

    An actor's death raises Ray's ``RayActorError`` (or the call's own error) as
    ``ray.get`` does: the caller tells a loss from a hang by the type.
    """
    ray = _ray()
    try:
        return ray.get(refs, timeout=max(0.0, timeout))
    except ray.exceptions.GetTimeoutError:
        many = refs if isinstance(refs, (list, tuple)) else [refs]
        raise DeadlineMissed(what, timeout, wait(many, 0.0)[1]) from None


def settle(refs: Sequence[Any], timeout: float) -> list:
    """Give ``refs`` up to ``timeout`` seconds to answer, for calls whose answer does not
    matter (a ``close`` before a kill); returns those still pending."""
    return wait(refs, timeout)[1]
