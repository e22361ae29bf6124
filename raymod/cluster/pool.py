"""``WorkerPool``: the live worker actors of one module, and who joined or left when.

The pool starts up to ``max_workers`` actors at once (Ray queues those it cannot place yet,
which on a real cluster is what asks the autoscaler for nodes), waits for ``min_workers``
of them, and admits the others whenever :meth:`poll` finds them started: at a step boundary.
Set-up calls made through :meth:`broadcast` are recorded and replayed on every joiner, so a
worker that arrives late is configured exactly like the first ones. A dead worker (see
:meth:`lost`) is replaced from the next step boundary on. Every change is an entry of
``events`` and a log line: "join", "leave", "start_failed", "lost" (stamped when the actor
error was seen) and, from the executor group, "recovered" once the step that saw a loss
has completed.

With ``Workers(spares=N)`` the pool keeps up to N more actors started and set up but idle
(:attr:`WorkerPool.spares`, event "spare"): a loss is filled from them at the next boundary,
so a replacement's process start, imports and bind stay off the steps' critical path.
"""
from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from .. import actor_setup
from ..base import MXNetError
from ..kvstore.server import ServerLost
from . import local, moments, naming, reaper, waits
from .controller import (CallDone, ElasticController, Fail, Forget, LeaveNodes,
                         MembershipChanged, NoReplacements, Policy, StopRequested, StopWorkers,
                         TooFewWorkers, WaitForWorkers, WorkerDied, WorkerHung)
from .recovery.node_drained import NodeDrains
from .worker import Worker
from .workers import Workers

__all__ = ["WorkerLost", "WorkerPool", "WorkersUnavailable"]


#: why the workers of a cluster raymod did not start start slowly (see local.WORKER_NICENESS)
_NICENESS_HINT = ("; Ray runs them at nice 15, behind every process at 0, unless the cluster "
                  "was started with RAY_worker_niceness=0")


class WorkersUnavailable(MXNetError):
    """Fewer workers than ``min_workers`` could be started or are still alive."""


@dataclass(frozen=True)
class WorkerLost:
    """A worker found dead by a caller: which rank, when, and what it was computing.

    Parameters
    ----------
    rank : int
        The dead worker's rank.
    detected : float
        ``time.time()`` when its actor error was seen.
    step : int, optional
        The step it was running, if it died in one.
    slices : tuple of int
        The slices of that step it held (they are recomputed by others).
    """

    rank: int
    detected: float
    step: int | None = None
    slices: tuple[int, ...] = ()


class WorkerPool(NodeDrains):
    """Ray actors running :class:`~raymod.cluster.worker.Worker`, by rank.

    Parameters
    ----------
    spec : Workers
        How many actors and what each gets.
    logger : Logger, optional
        Where membership changes are logged.
    """

    def __init__(self, spec: Workers, logger: Any = None):
        from . import local
        local.init()
        import ray
        self._ray = ray
        self.spec = spec
        self.logger = logger or logging.getLogger(__name__)
        self._actor = ray.remote(Worker)
        self.workers: dict[int, Any] = {}
        self.info: dict[int, dict] = {}
        self._starting: dict[Any, tuple[int, Any]] = {}
        self._next_rank = 0
        self._setup: dict[Any, tuple[str, tuple, int]] = {}  # key -> (method, args, version)
        self._setup_version = 0
        #: started, set-up, idle actors: rank -> (handle, ready info, set-up version they have)
        self.spares: dict[int, tuple[Any, dict, int]] = {}
        self._sources: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._source_ids = 0
        self._readers_held: dict[int, set] = {}  # rank -> ids of the readers it was sent
        self.events: list[dict] = []
        self._replace = False  # a worker was lost: start a replacement at the next boundary
        self._next_drain_check = 0.0
        self._draining: dict[str, int] = {}
        self.stopping = False  # True while a failing fit saves: calls never wait for workers
        self.leaving: dict[int, Any] = {}  # ranks that left but may still finish queued steps
        #: ranks with run-ahead steps in flight (set by the executor group): leavers among
        #: them are stopped once those steps are collected, so nothing is recomputed
        self.busy: Callable[[], set] = set
        self.target = spec.max_workers  # live + starting actors the pool keeps asking for
        #: how long calls on the workers may take (fed the step times by the executor group)
        self.deadlines = waits.Deadlines(spec.step_timeout)
        self._reaping: list = []  # kill tasks of hung workers' processes (close waits on them)
        #: decides what every loss, hang, shortage and membership change means (the
        #: executor group registers the server actions)
        self.controller = ElasticController(Policy(min_workers=spec.min_workers))
        for action, handler in ((Forget, self._forget), (StopWorkers, self._stop_workers),
                                (WaitForWorkers, self._wait_for_workers),
                                (LeaveNodes, self._leave), (Fail, self._fail)):
            self.controller.register(action, handler)
        self._last_loss: WorkerLost | None = None
        if not local.is_local():  # on a real cluster, tell the autoscaler what we want
            from ray.autoscaler.sdk import request_resources
            want = {"CPU": spec.cpus_per_worker, "GPU": spec.gpus_per_worker,
                    **(spec.resources or {})}
            request_resources(bundles=[{k: v for k, v in want.items() if v}] * self.target)
        self.replenish()
        try:
            self.wait_for(spec.min_workers, spec.start_timeout)
        except BaseException:
            # nobody will close this pool: its started actors would hold their CPUs until
            # a garbage collection finds the handles (a traceback keeps them in a cycle)
            self.shutdown()
            raise

    # ---- membership ---------------------------------------------------------------------------
    def _spawn(self) -> None:
        rank = self._next_rank
        self._next_rank += 1
        handle = self._actor.options(**self.spec.actor_options(),
                                     **naming.worker_options(self, rank)).remote(
            rank, self.spec.gpus_per_worker, actor_setup.steps())
        self._starting[handle.ready.remote()] = (rank, handle)
        moments.reached("worker.starting", pool=self, rank=rank, handle=handle)

    def wait_for(self, count: int, timeout: float) -> None:
        """Block until ``count`` workers are alive, or raise :class:`WorkersUnavailable`."""
        self._start_replacements()
        deadline = time.monotonic() + timeout
        if self.spares:
            self._admit_all([])
        while len(self.workers) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not self._starting:
                raise WorkersUnavailable(self._shortage(count))
            ready, _ = waits.wait(list(self._starting), left, num_returns=1)
            self._admit_all(ready)
        self.poll()

    def _shortage(self, count: int) -> str:
        want = {"CPU": self.spec.cpus_per_worker, "GPU": self.spec.gpus_per_worker,
                **(self.spec.resources or {})}
        avail = self._ray.available_resources()
        n = len(self._starting)
        starting = (f"; {n} more {'is' if n == 1 else 'are'} still starting after "
                    f"{self.spec.start_timeout:g} s (their CPUs are held: a loaded machine "
                    f"starts them slowly; Workers(start_timeout=...) waits longer"
                    f"{'' if local.is_local() else _NICENESS_HINT})"
                    if self._starting else "")
        return (f"only {len(self.workers)} of the {count} workers needed are running; each "
                f"wants {{{', '.join(f'{k}: {v}' for k, v in want.items() if v)}}}, the "
                f"cluster has available {{{', '.join(f'{k}: {avail.get(k, 0):g}' for k in want)}}}"
                f" (total {self._ray.cluster_resources()}){starting}")

    def poll(self) -> list[int]:
        """Start replacements for workers lost since the last look, and admit workers that
        have started; returns the admitted ranks."""
        self._leave_draining_nodes()
        self.release_leaving()
        joined = (self._admit_all(waits.ready(list(self._starting)))
                  if self._starting or self.spares else [])
        self._start_replacements()
        if len(self.workers) < self.spec.min_workers:  # after a preemption
            self.short_of_workers("step boundary")
        return joined

    def _admit_all(self, ready: list) -> list[int]:
        """Admit the started workers of ``ready``; the joined ranks. A joiner's set-up that
        meets a lost server raises :class:`ServerLost` once the others are admitted."""
        joined, lost = self._promote_spares(), None
        for ref in ready:
            try:
                rank = self._admit(ref)
            except ServerLost as err:
                lost = err
                continue
            if rank is not None:
                joined.append(rank)
        if joined:
            self.controller.handle(MembershipChanged(joined=tuple(joined)))
        if lost is not None:
            raise lost
        return joined

    def _admit(self, ref: Any) -> int | None:
        rank, handle = self._starting.pop(ref)
        t0 = time.perf_counter()
        deadline = self.deadlines.call()
        try:
            info = waits.get(ref, deadline, f"worker {rank} starting")
            spare = len(self.workers) >= self.target
            if not spare:
                moments.reached("worker.joining", pool=self, rank=rank, handle=handle)
            self._replay_setup(handle, rank, deadline)
            if not spare:
                self._take_place(handle, rank, info, deadline, t0)
                return rank
        except ServerLost:
            # its set-up met a lost server: the caller's recovery restores the servers
            # (recording their new handles for joiners); it joins at a boundary after that
            self._starting[ref] = (rank, handle)
            raise
        except (self._ray.exceptions.RayActorError, waits.DeadlineMissed) as err:
            # a joiner that fails or hangs while joining never joins: it is stopped, and
            # the pool asks for another at the next boundary
            self._event("start_failed", rank, error=str(err).splitlines()[0])
            self._reap(handle, rank, locals().get("info"))
            self._replace = True
            return None
        # a spare: set up now, while nothing waits on it; it joins when a worker is lost
        self.spares[rank] = (handle, info, self._setup_version)
        self._event("spare", rank, setup_s=time.perf_counter() - t0, pid=info["pid"])
        return None

    def _take_place(self, handle: Any, rank: int, info: dict, deadline: float, t0: float,
                    **extra: Any) -> None:
        """A set-up actor joins: it copies a live worker's local state and counts as live
        from now on (the "join" event)."""
        waits.get(handle.set_local_state.remote(self._peer_state()), deadline,
                  f"worker {rank} set-up (set_local_state)")
        self.workers[rank], self.info[rank] = handle, info
        self._event("join", rank, setup_s=time.perf_counter() - t0, pid=info["pid"], **extra)

    def _replay_setup(self, handle: Any, rank: int, deadline: float, since: int = 0) -> None:
        """Make on ``handle`` the recorded set-up calls newer than version ``since``."""
        for method, args, version in list(self._setup.values()):
            if version > since:
                waits.get(getattr(handle, method).remote(*args), deadline,
                          f"worker {rank} set-up ({method})")

    def _promote_spares(self) -> list[int]:
        """Fill places below :attr:`target` from the spares (oldest first): each gets the
        set-up recorded since it became a spare and a live worker's local state. A spare
        that died or hangs meanwhile is dropped (event "start_failed")."""
        joined = []
        while self.spares and len(self.workers) < self.target:
            rank = min(self.spares)
            handle, info, version = self.spares.pop(rank)
            t0 = time.perf_counter()
            deadline = self.deadlines.call()
            moments.reached("worker.joining", pool=self, rank=rank, handle=handle)
            try:
                self._replay_setup(handle, rank, deadline, since=version)
                self._take_place(handle, rank, info, deadline, t0, spare=True)
            except ServerLost:
                self.spares[rank] = (handle, info, version)  # it joins after the recovery
                raise
            except (self._ray.exceptions.RayActorError, waits.DeadlineMissed) as err:
                self._event("start_failed", rank, error=str(err).splitlines()[0])
                self._reap(handle, rank, info)
                continue
            joined.append(rank)
            self._replace = True  # start the spare that takes its place
        return joined

    def _peer_state(self) -> dict | None:
        """A live worker's local state for a joiner: the replayed set-up gives it the first
        parameters, not the current auxiliary states or, when workers run the optimizer,
        the current weights and optimizer states."""
        for rank in self.ranks:
            try:
                return waits.get(self.workers[rank].local_state.remote(),
                                 self.deadlines.call(), f"worker {rank} local_state")
            except self._ray.exceptions.RayActorError as err:
                self.lost(rank, err)  # ask another
            except waits.DeadlineMissed as err:
                self.hung([rank], "a joiner's set-up")
                self.lost(rank, err)
        return None

    def lost(self, rank: int, error: Any, step: int | None = None,
             slices: tuple[int, ...] = (), during: str = "call") -> WorkerLost | None:
        """Forget a worker that died (its actor error was seen by a caller).

        Its replacement is asked for at the next :meth:`poll` (a step boundary) or
        :meth:`wait_for`, not here: starting a process now would slow down the step that
        is recomputing the dead worker's slices (on 2 cores, from ~15 ms to 50-230 ms).

        Parameters
        ----------
        rank : int
            The dead worker.
        error : Exception
            The actor error the caller saw (its first line goes into the event).
        step : int, optional
            The step during which it was seen.
        slices : tuple of int
            The slices of that step the worker held.
        during : str
            The call site (for the controller's history).

        Returns
        -------
        WorkerLost or None
            The loss (its ``detected`` is the "lost" event's ``time``), or None if the
            rank was already forgotten.
        """
        detected = time.time()  # first thing: the event's time is when the error was seen
        if rank not in self.workers:
            return None
        self._last_loss = None
        self.controller.handle(WorkerDied(
            rank, during, tuple(slices), step,
            f"{type(error).__name__}: {error}".splitlines()[0], detected))
        return self._last_loss

    def _forget(self, action: Forget, event: WorkerDied) -> None:
        """The controller's ``Forget``: drop the rank; a replacement comes at the next
        boundary; the caller hands its slices to the live workers."""
        self.workers.pop(action.rank, None)
        self._readers_held.pop(action.rank, None)  # ranks are never reused
        loss = WorkerLost(action.rank, event.detected, event.step, event.slices)
        extra = {} if event.step is None else {"step": event.step, "slices": list(loss.slices)}
        self._event("lost", action.rank, when=event.detected, error=event.error, **extra)
        self._replace = True
        self._last_loss = loss

    def _stop_workers(self, action: StopWorkers, event: Any) -> None:
        """The controller's ``StopWorkers``: kill hung workers, their processes included
        (their calls then fail as losses)."""
        for rank in action.ranks:
            if rank in self.workers:
                self.logger.warning("worker %d missed its deadline during %s: stopping it",
                                    rank, getattr(event, "during", "a call"))
                self._reap(self.workers[rank], rank)

    def _reap(self, handle: Any, rank: int, who: dict | None = None) -> None:
        """Kill a worker actor and its process (a stopped one ignores ``ray.kill``)."""
        ref = reaper.reap(handle, who or self.info.get(rank))
        if ref is not None:
            self._reaping.append(ref)

    def hung(self, ranks: Any, during: str) -> None:
        """Report workers that missed a deadline (the controller stops them)."""
        ranks = tuple(sorted(r for r in ranks if r in self.workers))
        if ranks:
            self.controller.handle(WorkerHung(ranks, during))

    def short_of_workers(self, during: str, mid_step: bool = False) -> None:
        """Fewer than ``min_workers`` are alive: wait for replacements; if none come, go on
        with the survivors to the end of a step in progress (``mid_step``), otherwise
        raise :class:`WorkersUnavailable` (the controller's policy)."""
        self.controller.handle(TooFewWorkers(len(self.workers), self.spec.min_workers,
                                             during, mid_step))

    def _wait_for_workers(self, action: WaitForWorkers, event: TooFewWorkers) -> None:
        try:
            self.wait_for(action.count, self.spec.start_timeout)
        except WorkersUnavailable:
            self.controller.handle(NoReplacements(len(self.workers), event.during,
                                                  event.mid_step))

    def _fail(self, action: Fail, event: Any) -> None:
        if action.unavailable:
            raise WorkersUnavailable(f"{action.reason}: "
                                     f"{self._shortage(self.spec.min_workers)}")
        raise MXNetError(action.reason)

    def _start_replacements(self) -> None:
        if self._replace:  # only after losses: a failed start is not retried every step
            self._replace = False
            self.replenish()

    def replenish(self) -> None:
        """Start actors until live, spare and starting ones reach :attr:`target` plus
        ``spares``."""
        while (len(self.workers) + len(self.spares) + len(self._starting)
               < self.target + self.spec.spares):
            self._spawn()

    def add(self, count: int = 1) -> None:
        """Ask for ``count`` more workers, up to ``max_workers`` (e.g. after :meth:`remove`).

        They start in the background and join at a step boundary once started.
        """
        if count < 0 or self.target + count > self.spec.max_workers:
            raise ValueError(f"add({count}): the pool asks for {self.target} workers, "
                             f"max_workers={self.spec.max_workers}")
        self.target += count
        self.replenish()

    def remove(self, count: int = 1) -> list[int]:
        """Let ``count`` workers leave gracefully (call it between steps, e.g. from a
        batch-end callback): nothing is recomputed, and the pool stops replacing them.

        Returns the ranks that left (the newest ones; never below ``min_workers``).
        """
        if count < 0 or len(self.workers) - count < self.spec.min_workers:
            raise ValueError(f"remove({count}): {len(self.workers)} workers, "
                             f"min_workers={self.spec.min_workers}")
        self.target = max(self.spec.min_workers, self.target - count)
        left = self.ranks[len(self.workers) - count:]
        for rank in left:
            self.leaving[rank] = self.workers.pop(rank)
            self._event("leave", rank)
        self.controller.handle(MembershipChanged(left=tuple(left)))
        self.release_leaving()
        while self._starting and (len(self.workers) + len(self.spares) + len(self._starting)
                                  > self.target + self.spec.spares):
            _, (_, handle) = self._starting.popitem()  # no longer wanted
            self._ray.kill(handle, no_restart=True)
        return left

    def shutdown(self) -> None:
        """Stop every worker actor (after letting live ones remove their shared memory)."""
        self.controller.handle(StopRequested())
        moments.reached("close", pool=self)
        for rank, (handle, info, _) in self.spares.items():
            self.workers[rank], self.info[rank] = handle, info  # closed like the others
        self.spares.clear()
        closing = {h.close.remote(): rank for rank, h in self.workers.items()}
        late = set(waits.settle(list(closing), 5))
        for ref, rank in closing.items():  # (a stopped process needs its SIGKILL)
            self._reap(self.workers[rank], rank) if ref in late else \
                self._ray.kill(self.workers[rank], no_restart=True)
        for handle in [h for _, h in self._starting.values()]:
            self._ray.kill(handle, no_restart=True)
        for rank in list(self.leaving):
            self._reap(self.leaving.pop(rank), rank)
        waits.settle(self._reaping, 5)  # the processes are gone when close returns
        self._reaping.clear()
        self.target, self._replace = 0, False  # a later poll must not start new ones
        self.workers.clear()
        self._starting.clear()
        self.controller.handle(CallDone("close"))

    def _event(self, kind: str, rank: int | None, when: float | None = None,
               **extra: Any) -> dict:
        """Record a membership event (``time`` is ``when``, default now) and log it; losses
        and recoveries are warnings, joins and leaves info."""
        event = {"event": kind, **({} if rank is None else {"rank": rank}),
                 "time": time.time() if when is None else when, "workers": len(self.workers),
                 **extra}
        self.events.append(event)
        level = logging.WARNING if kind in ("lost", "recovered") else logging.INFO
        self.logger.log(level, "workers: %s (%d alive)", describe_event(kind, rank, extra),
                        len(self.workers))
        return event

    @property
    def ranks(self) -> list[int]:
        """Ranks of the live workers, ascending."""
        return sorted(self.workers)

    def __len__(self) -> int:
        return len(self.workers)

    # ---- calls ----------------------------------------------------------------------------------
    def broadcast(self, method: str, *args: Any, key: Any = None) -> dict[int, Any]:
        """Call ``method`` on every live worker and record it for joiners.

        A later broadcast with the same ``key`` replaces the recorded one (e.g. the latest
        ``set_params``), so the log does not grow with every epoch.
        """
        key = (method, len(self._setup)) if key is None else key
        self._setup.pop(key, None)  # re-inserted last: replayed after what it depends on
        self._setup_version += 1  # spares replay what is newer than what they were given
        self._setup[key] = (method, args, self._setup_version)
        return self.call_all(method, *args)

    def call_all(self, method: str, *args: Any) -> dict[int, Any]:
        """Call ``method`` on every live worker; dead ones are dropped from the pool."""
        refs = {rank: getattr(h, method).remote(*args) for rank, h in self.workers.items()}
        return self.gather(refs)

    def gather(self, refs: dict[int, Any]) -> dict[int, Any]:
        """Results of per-rank calls; a worker whose actor died is dropped and left out
        (below ``min_workers``, this waits for replacements, which replay the set-up, unless
        the pool is :attr:`stopping`)."""
        out = {}
        # a worker that does not answer within the call deadline is hung: stop it
        deadline = self.deadlines.call()
        _, late = waits.wait(list(refs.values()), deadline)
        self.hung([rank for rank, ref in refs.items() if ref in late], "call")
        for rank, ref in refs.items():
            try:  # (a stopped worker's call fails within moments of its kill)
                out[rank] = waits.get(ref, deadline, f"worker {rank} call")
            except (self._ray.exceptions.RayActorError, waits.DeadlineMissed) as err:
                self.lost(rank, err)
        if len(self.workers) < self.spec.min_workers and not self.stopping:
            self.short_of_workers("call")  # replacements replay the set-up
        return out

    def source(self, src: Any) -> tuple[int, list]:
        """``(id, [ref])`` of a row source's reader (:meth:`RowSource.reader`), put in the
        object store once; workers read the rows through it."""
        entry = self._sources.get(src)
        if entry is None:
            self._source_ids += 1
            entry = (self._source_ids, [self._ray.put(src.reader())])
            self._sources[src] = entry
        return entry

    def readers_to_send(self, rank: int, sources: dict) -> dict:
        """The ``{id: [ref]}`` of ``sources`` that worker ``rank`` was not sent yet (it keeps
        every reader it gets); they count as sent from now on."""
        held = self._readers_held.setdefault(rank, set())
        new = {sid: ref for sid, ref in sources.items() if sid not in held}
        held.update(new)
        return new


def describe_event(kind: str, rank: int | None, extra: dict) -> str:
    """A membership event as a sentence for the log (the event dict keeps the figures)."""
    who = "worker" if rank is None else f"worker {rank}"
    if kind == "join":
        spare = " from the spares" if extra.get("spare") else ""
        return f"{who} joined{spare} (set up in {extra.get('setup_s', 0) * 1e3:.1f} ms)"
    if kind == "spare":
        return f"{who} is ready as a spare (set up in {extra.get('setup_s', 0) * 1e3:.1f} ms)"
    if kind == "leave":
        reason = extra.get("reason")
        return f"{who} left" + (f" ({reason})" if reason else "")
    if kind == "start_failed":
        return f"{who} failed to start: {extra.get('error', '?')}"
    if kind == "lost":
        step = extra.get("step")
        where = "" if step is None else f" at step {step}"
        return f"{who} lost{where}: {extra.get('error', '?')}"
    if kind == "recovered":
        lost = ", ".join(str(r) for r in extra.get("ranks_lost", [])) or "?"
        seconds = extra.get("seconds_to_step")
        took = "" if seconds is None else f" {seconds:.2f} s after the loss"
        return (f"{extra.get('during', 'step')} {extra.get('step')} completed{took}, "
                f"without worker(s) {lost} ({extra.get('slices_recomputed', 0)} slice(s) "
                "recomputed)")
    details = ", ".join(f"{k}={v}" for k, v in extra.items() if k != "pid")
    return f"{kind} {who}" + (f" ({details})" if details else "")
