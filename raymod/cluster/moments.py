"""Named moments of a fit's life on Ray, where a fault harness can act.

The driver announces each one as it passes (``moments.reached("window.launched", pool=...)``);
nothing listens unless a harness (:mod:`raymod.chaos`) installs a listener with
:func:`listen`, so a pass costs one global lookup. The names are :data:`MOMENTS`; what a
listener receives besides the name is the call site's keyword context.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["MOMENTS", "reached", "listen"]

#: every moment the driver announces, with where it is
MOMENTS = {
    "bind": "the executor group bound on the workers",
    "init_optimizer": "the kvstore and optimizer being set up on the servers",
    "window.launched": "a run-ahead window handed to the workers (they are inside it)",
    "window.collected": "a window's steps completed (between windows)",
    "step": "a step completed without run-ahead",
    "recovery": "a failure being repaired (windows aborted, or servers restored)",
    "worker.starting": "a worker actor asked for (at the start, or a replacement)",
    "worker.joining": "a started worker being set up to join",
    "get_params": "the parameters read from the servers and workers (epoch end)",
    "forward": "a forward pass outside training (score, predict)",
    "checkpoint.save": "a fit checkpoint about to be written",
    "svrg.full_gradient": "SVRG's full-gradient pass starting",
    "close": "the workers being stopped",
}
_listener: dict[str, Callable[[str, dict], None] | None] = {"fn": None}


def reached(name: str, **context: Any) -> None:
    """The driver is at moment ``name`` (one of :data:`MOMENTS`)."""
    listener = _listener["fn"]
    if listener is not None:
        listener(name, context)


def listen(listener: Callable[[str, dict], None] | None) -> Callable | None:
    """Call ``listener(name, context)`` at every moment from now on (None: stop);
    returns the previous listener."""
    previous, _listener["fn"] = _listener["fn"], listener
    return previous
