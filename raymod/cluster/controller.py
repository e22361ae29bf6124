"""The elastic controller: what a failure or a membership change means, decided in one place.

A module on Ray workers is always in one :class:`Phase`. Everything that can go wrong or
change reaches the controller as an *event* (a worker lost, a worker hung, a KVServer lost,
a node being drained, too few workers, workers joining or leaving, a call completing), and
:func:`decide` -- a pure function of the phase, the event and a few facts, with no Ray in
it -- answers with the next phase and the *actions* to take. The executor group
(:class:`~raymod.cluster.remote_group.RayExecutorGroup`) carries the actions out; every call
site (training step, run-ahead window, SVRG's full-gradient pass, ``init_optimizer``,
``get_params`` / ``set_params``, score / predict) reports its failures here, so each failure
type has one recovery path:

============== =================================================================
failure         recovery (actions)
============== =================================================================
worker lost     forget it; its slices are recomputed by the live workers; a
                replacement is asked for at the next step boundary
worker hung     stop it (a missed deadline); its call then fails as a loss
server lost     new servers for the dead shards; values from the driver's last
                snapshot and the steps since replayed (while starting, before a
                snapshot exists: the set-up is run again); then the call again
node drained    its workers leave at the step boundary (nothing recomputed)
too few workers wait for replacements; if none come, go on short-handed while
                any worker lives, else fail
============== =================================================================

The transitions are the table :data:`TRANSITIONS`; ``docs/architecture.md`` draws it.
"""
from __future__ import annotations

import enum
from collections import deque
import time
from dataclasses import dataclass
from typing import Any, Callable, Union

from ..base import MXNetError

__all__ = ["Phase", "Policy", "Facts", "Decision", "ElasticController", "decide", "TRANSITIONS",
           "WorkerDied", "WorkerHung", "ServerDied", "NodeDraining", "TooFewWorkers",
           "NoReplacements", "MembershipChanged", "CallDone", "StopRequested",
           "Forget", "StopWorkers", "RestoreServers", "WaitForWorkers", "GoShortHanded",
           "LeaveNodes", "Retry", "Fail"]


class Phase(enum.Enum):
    """Where a module on workers is in its life."""

    STARTING = "starting"      # workers and servers being set up (``init_optimizer``)
    RUNNING = "running"        # steps and calls going through
    RECOVERING = "recovering"  # a failure is being repaired; the interrupted call resumes
    RESIZING = "resizing"      # joins and leaves applied at a step boundary
    STOPPING = "stopping"      # ``close()`` or a failing fit saving what it has
    STOPPED = "stopped"
    FAILED = "failed"          # the policy gave up; the error reaches the user


# ---- events -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkerDied:
    """A worker's actor died (its error was seen by a call site at ``detected``)."""

    rank: int
    during: str
    slices: tuple[int, ...] = ()
    step: int | None = None
    error: str = ""
    detected: float = 0.0


@dataclass(frozen=True)
class WorkerHung:
    """Workers missed a deadline (a stopped or deadlocked process)."""

    ranks: tuple[int, ...]
    during: str


@dataclass(frozen=True)
class ServerDied:
    """A KVServer shard died (``ServerLost`` from a server call or a worker); ``step``: the
    last step the interrupted call needs completed (None: every step planned so far)."""

    during: str
    error: str = ""
    step: int | None = None


@dataclass(frozen=True)
class NodeDraining:
    """Ray announced that these workers' nodes are being drained (preemption notice)."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class TooFewWorkers:
    """Fewer live workers than ``min_workers``. ``mid_step``: a step's slices are still
    pending (its shards must reach the step's end before the run may stop)."""

    live: int
    needed: int
    during: str
    mid_step: bool = False


@dataclass(frozen=True)
class NoReplacements:
    """Waiting for workers timed out."""

    live: int
    during: str
    mid_step: bool = False


@dataclass(frozen=True)
class MembershipChanged:
    """Workers joined or left at a step boundary."""

    joined: tuple[int, ...] = ()
    left: tuple[int, ...] = ()


@dataclass(frozen=True)
class CallDone:
    """A call (a step, a window, a pass, a set-up) completed; ``during`` names it."""

    during: str


@dataclass(frozen=True)
class StopRequested:
    """``close()``, or a fit ending with an error (``failed``)."""

    failed: bool = False


Event = Union[WorkerDied, WorkerHung, ServerDied, NodeDraining, TooFewWorkers, NoReplacements,
              MembershipChanged, CallDone, StopRequested]


# ---- actions ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Forget:
    """Drop the worker from the pool; the call site hands its slices to the live ones."""

    rank: int


@dataclass(frozen=True)
class StopWorkers:
    """Kill hung workers; their calls then end as losses."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class RestoreServers:
    """New servers for dead shards. ``source='snapshot'``: every shard back to the last
    snapshot and the steps since replayed; ``'setup'``: the set-up (optimizer, initial
    values, workers' connections) run again, before any snapshot exists."""

    source: str


@dataclass(frozen=True)
class WaitForWorkers:
    """Wait (up to ``Workers.start_timeout``) until ``count`` workers are live."""

    count: int


@dataclass(frozen=True)
class GoShortHanded:
    """Finish the pending work on the live workers, fewer than ``min_workers``."""


@dataclass(frozen=True)
class LeaveNodes:
    """Let the workers of draining nodes leave now."""

    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Retry:
    """Run the interrupted call again (only what the servers lack is recomputed)."""

    during: str


@dataclass(frozen=True)
class Fail:
    """Give up: the reason reaches the user as an error (``WorkersUnavailable`` when
    ``unavailable``: a fit then checkpoints its last completed step)."""

    reason: str
    unavailable: bool = False


Action = Union[Forget, StopWorkers, RestoreServers, WaitForWorkers, GoShortHanded, LeaveNodes,
               Retry, Fail]


# ---- the policy ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """The limits the controller decides by.

    Parameters
    ----------
    min_workers : int
        Training waits for this many workers (``Workers.min_workers``).
    max_attempts : int, default 8
        Server losses, hung workers and failed waits in a row (no call completed between)
        before giving up.
    max_losses : int, default 64
        Worker losses in a row before giving up (replacements that keep dying).
    """

    min_workers: int = 1
    max_attempts: int = 8
    max_losses: int = 64


@dataclass(frozen=True)
class Facts:
    """What :func:`decide` may know beyond the event: failures in a row so far, whether a
    server snapshot exists."""

    attempts: int = 0
    losses: int = 0
    have_snapshot: bool = False


@dataclass(frozen=True)
class Decision:
    """The next phase and the actions to take, in order."""

    phase: Phase
    actions: tuple = ()


P = Phase
#: transitions the controller keeps in ``history``
HISTORY = 1000
#: the failures: each is repaired where the controller stands, and starts a recovery
FAILURES = (WorkerDied, WorkerHung, ServerDied, TooFewWorkers, NoReplacements)
#: every event type the controller takes
EVENTS = FAILURES + (NodeDraining, MembershipChanged, CallDone, StopRequested)


def _next_phase(phase: Phase, event: type) -> Phase:
    """The phase after an event of type ``event`` in ``phase``: the rule every cell of
    :data:`TRANSITIONS` is filled from (total: no pair is left out)."""
    if event is StopRequested:
        return P.STOPPING
    if phase is P.STOPPING:  # a failing fit saves or ``close`` runs: nothing is repaired
        return P.STOPPED if event is CallDone else P.STOPPING
    if phase is P.STOPPED:  # the pool is gone: a late report changes nothing
        return P.STOPPED
    if event is CallDone:
        return P.RUNNING
    if phase is P.STARTING:  # set-up: failures are repaired where they happen
        return P.STARTING
    if event in FAILURES:
        return P.RECOVERING
    # joins, leaves and drains: applied at the boundary where they are seen; during a
    # recovery (or after one failed) they change who recomputes, not the phase, which
    # returns to RUNNING when the interrupted call completes
    return P.RECOVERING if phase in (P.RECOVERING, P.FAILED) else P.RESIZING


#: (phase, event type) -> next phase, for every phase and every event type: whatever
#: happens at whatever moment has a decision (``tests/cluster/test_controller.py`` checks
#: the whole product)
TRANSITIONS: dict[tuple[Phase, type], Phase] = {
    (phase, event): _next_phase(phase, event) for phase in P for event in EVENTS}


def decide(phase: Phase, event: Event, policy: Policy, facts: Facts) -> Decision:
    """The next phase and the actions for ``event`` in ``phase`` (pure: no I/O, no clock).

    Parameters
    ----------
    phase : Phase
        The controller's phase now.
    event : event
        What happened.
    policy : Policy
        Limits.
    facts : Facts
        Failures in a row so far and whether a server snapshot exists.

    Returns
    -------
    Decision

    Raises
    ------
    TypeError
        If ``event`` is not one of the controller's events.
    """
    key = (phase, type(event))
    if key not in TRANSITIONS:
        raise TypeError(f"decide() takes one of the controller's events "
                        f"({', '.join(e.__name__ for e in EVENTS)}), got {event!r}")
    nxt = TRANSITIONS[key]
    if phase in (P.STOPPING, P.STOPPED) and not isinstance(event, (StopRequested, CallDone)):
        return Decision(nxt, ())  # a failing fit is saving, or the pool is gone
    if isinstance(event, (WorkerHung, ServerDied)) and facts.attempts + 1 >= policy.max_attempts:
        return Decision(P.FAILED, (Fail(f"{_describe(event)} after {facts.attempts} failed "
                                        f"attempts in a row; giving up"),))
    if isinstance(event, WorkerDied) and facts.losses + 1 >= policy.max_losses:
        return Decision(P.FAILED, (Fail(f"{_describe(event)} after {facts.losses} workers "
                                        f"lost in a row; giving up"),))
    if isinstance(event, WorkerDied):
        return Decision(nxt, (Forget(event.rank),))
    if isinstance(event, WorkerHung):
        return Decision(nxt, (StopWorkers(tuple(event.ranks)),))
    if isinstance(event, ServerDied):
        source = "snapshot" if facts.have_snapshot and phase is not P.STARTING else "setup"
        return Decision(nxt, (RestoreServers(source), Retry(event.during)))
    if isinstance(event, TooFewWorkers):
        return Decision(nxt, (WaitForWorkers(event.needed),))
    if isinstance(event, NoReplacements):
        if event.mid_step and event.live > 0:  # end the step; the next boundary stops
            return Decision(nxt, (GoShortHanded(),))
        what = ("every worker died" if event.live == 0 else
                f"only {event.live} of {policy.min_workers} workers are alive")
        return Decision(P.FAILED, (Fail(f"{what} during {event.during} and no replacement "
                                        "started", unavailable=True),))
    if isinstance(event, NodeDraining):
        return Decision(nxt, (LeaveNodes(tuple(event.ranks)),))
    return Decision(nxt, ())


def _describe(event: Event) -> str:
    if isinstance(event, WorkerDied):
        return f"worker {event.rank} lost during {event.during}"
    if isinstance(event, WorkerHung):
        return f"workers {list(event.ranks)} hung during {event.during}"
    if isinstance(event, ServerDied):
        return f"a kvstore server lost during {event.during} ({event.error})"
    return f"no workers during {getattr(event, 'during', '?')}"


class ElasticController:
    """Holds the phase and the failures in a row; :meth:`handle` decides (with
    :func:`decide`) and carries the actions out through the registered handlers.

    The worker pool registers the handlers of the actions on workers (``Forget``,
    ``StopWorkers``, ``WaitForWorkers``, ``LeaveNodes``, ``Fail``), the executor group those
    on servers (``RestoreServers``); ``Retry`` and ``GoShortHanded`` are answers to the call
    site, which holds the work to resume.

    Parameters
    ----------
    policy : Policy
        The limits.

    Attributes
    ----------
    phase : Phase
    history : deque of dict
        The last :data:`HISTORY` transitions: ``{"time", "from", "to", "event", "actions"}``.
    """

    def __init__(self, policy: Policy):
        self.policy = policy
        self.phase = Phase.STARTING
        self.history: deque = deque(maxlen=HISTORY)
        self._attempts = 0
        self._losses = 0
        self._handlers: dict[type, Callable[[Any, Any], None]] = {}

    def register(self, action: type, handler: Callable[[Any, Any], None]) -> None:
        """Carry out actions of type ``action`` with ``handler(action, event)``."""
        self._handlers[action] = handler

    def on(self, event: Event, have_snapshot: bool = False) -> Decision:
        """Decide what ``event`` means now, move to the next phase and record it (no
        action is carried out: see :meth:`handle`)."""
        decision = decide(self.phase, event, self.policy,
                          Facts(self._attempts, self._losses, have_snapshot))
        if isinstance(event, (WorkerHung, ServerDied, NoReplacements)):
            self._attempts += 1
        elif isinstance(event, WorkerDied):
            self._losses += 1
        if isinstance(event, CallDone) or decision.phase is Phase.FAILED:
            self._attempts = self._losses = 0
        if decision.phase is not self.phase or decision.actions:
            self.history.append({"time": time.time(), "from": self.phase.value,
                                 "to": decision.phase.value, "event": _name(event),
                                 "actions": [type(a).__name__ for a in decision.actions]})
        self.phase = decision.phase
        return decision

    def handle(self, event: Event, have_snapshot: bool = False) -> Decision:
        """:meth:`on`, then every action of the decision through its handler, in order
        (``Fail`` raises)."""
        decision = self.on(event, have_snapshot)
        for action in decision.actions:
            handler = self._handlers.get(type(action))
            if handler is not None:
                handler(action, event)
            elif isinstance(action, Fail):
                raise MXNetError(action.reason)
        return decision

    def done(self, during: str) -> None:
        """A call completed: back to RUNNING (nothing recorded while all is well)."""
        if self.phase is not Phase.RUNNING or self._attempts or self._losses:
            self.on(CallDone(during))


def _name(event: Any) -> str:
    during = getattr(event, "during", None)
    return type(event).__name__ + (f"({during})" if during else "")
