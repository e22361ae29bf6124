"""``Workers``: how many Ray worker actors a module runs on, and what each one gets."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Workers"]


#: the shortest default run-ahead window (steps)
MIN_RUN_AHEAD = 8
#: default window steps per live worker: a window costs the driver one Ray call per worker
#: (about 0.6 ms of its CPU on a 2-core machine, Ray's threads included), so its calls per
#: step stay 1/WINDOW_PER_WORKER however large the pool
WINDOW_PER_WORKER = 16
#: the longest default run-ahead window (steps) that the step time alone asks for
MAX_RUN_AHEAD = 64
#: seconds of steps a default window holds once step times are known: a window's fixed cost
#: (one Ray call per worker, its plan, the driver's bookkeeping) stays a small part of it
WINDOW_SECONDS = 0.05
#: the most seconds of steps a default window holds once step times are known (never
#: fewer than MIN_RUN_AHEAD steps): callbacks run at most about two of them late
MAX_WINDOW_SECONDS = 2.0


@dataclass(frozen=True)
class Workers:
    """The worker actors of a module: between ``min_workers`` and ``max_workers`` of them.

    Parameters
    ----------
    min_workers : int
        Training starts (and continues) only with at least this many workers.
    max_workers : int, optional
        Start up to this many as resources allow (default ``min_workers``).
    cpus_per_worker : float, default 1
        Ray CPUs per actor; its BLAS threads are set to match.
    gpus_per_worker : int, default 0
        GPUs per actor; an actor with 2 runs on ``[rm.gpu(0), rm.gpu(1)]``.
    resources : dict, optional
        Extra Ray custom resources per actor.
    num_slices : int, optional
        How many slices each step's global batch is cut into (default ``max_workers``).
        The slices are fixed by the batch, not by who is alive, so the training trajectory
        does not depend on membership.
    start_timeout : float, default 120
        Seconds to wait for ``min_workers`` to start before giving up.
    run_ahead : int, optional
        Steps a worker is handed at once: it computes step s+1 as soon as the servers
        publish step s's weights, with no driver round trip in between (1: one driver call
        per step). Default: :data:`WINDOW_PER_WORKER` (16) times the live workers, so that
        the driver's calls per step stay constant as the pool grows; once step
        times are known, at least as many steps as take about :data:`WINDOW_SECONDS` (at
        most :data:`MAX_RUN_AHEAD`), so that short steps do not pay a call each, and never
        more than take :data:`MAX_WINDOW_SECONDS`. Batch-end callbacks then run up to two
        windows late, in order.
    spares : int, default 0
        Workers to keep started and set up beyond the training ones, idle, when the
        cluster has room for them (they wait in Ray's queue otherwise and never hold
        training up). A lost worker's place is taken by a spare at the next step
        boundary, with no process start, import or bind on the critical path; a new
        spare is then started in the background.
    step_timeout : float, optional
        Seconds a step may take before the workers that have not pushed their slices are
        treated as hung (killed and replaced, their slices recomputed). Default (see
        :mod:`raymod.cluster.waits`): 10 times the 99th percentile of the recent step
        times, at least 5 s; 60 s more while a worker runs its first steps (it binds).
        Set-up and parameter calls get at least 20 s once steps have run, 60 s before.

    Examples
    --------
    >>> rm.mod.Module(net, workers=rm.Workers(2, 8, cpus_per_worker=2))
    """

    min_workers: int
    max_workers: int | None = None
    cpus_per_worker: float = 1
    gpus_per_worker: int = 0
    resources: dict | None = field(default=None, hash=False)
    num_slices: int | None = None
    start_timeout: float = 120.0
    run_ahead: int | None = None
    step_timeout: float | None = None
    spares: int = 0

    def __post_init__(self) -> None:
        if self.max_workers is None:
            object.__setattr__(self, "max_workers", self.min_workers)
        for name in ("min_workers", "max_workers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Workers({name}=...) must be an int >= 1, got {value!r}")
        if self.max_workers < self.min_workers:
            raise ValueError(f"Workers: max_workers ({self.max_workers}) is below "
                             f"min_workers ({self.min_workers})")
        if not self.cpus_per_worker > 0:
            raise ValueError(f"Workers(cpus_per_worker=...) must be > 0, got "
                             f"{self.cpus_per_worker!r}")
        if not isinstance(self.gpus_per_worker, int) or self.gpus_per_worker < 0:
            raise ValueError(f"Workers(gpus_per_worker=...) must be an int >= 0, got "
                             f"{self.gpus_per_worker!r}")
        if self.run_ahead is not None and (not isinstance(self.run_ahead, int)
                                           or isinstance(self.run_ahead, bool)
                                           or self.run_ahead < 1):
            raise ValueError(f"Workers(run_ahead=...) must be an int >= 1, got "
                             f"{self.run_ahead!r}")
        if self.step_timeout is not None and not (isinstance(self.step_timeout, (int, float))
                                                  and self.step_timeout > 0):
            raise ValueError(f"Workers(step_timeout=...) must be a number of seconds > 0, "
                             f"got {self.step_timeout!r}")
        if not isinstance(self.spares, int) or isinstance(self.spares, bool) or self.spares < 0:
            raise ValueError(f"Workers(spares=...) must be an int >= 0, got {self.spares!r}")
        if self.num_slices is not None and (not isinstance(self.num_slices, int)
                                            or self.num_slices < 1):
            raise ValueError(f"Workers(num_slices=...) must be an int >= 1, got "
                             f"{self.num_slices!r}")

    def window(self, live: int, step_seconds: float | None = None) -> int:
        """Steps per run-ahead window with ``live`` workers and steps of ``step_seconds``
        (None: not known yet); see ``run_ahead``."""
        if self.run_ahead is not None:
            return self.run_ahead
        steps = max(MIN_RUN_AHEAD, WINDOW_PER_WORKER * live)
        if step_seconds:
            steps = max(steps, min(MAX_RUN_AHEAD, int(WINDOW_SECONDS / step_seconds)))
            steps = min(steps, max(MIN_RUN_AHEAD, int(MAX_WINDOW_SECONDS / step_seconds)))
        return steps

    @property
    def slices(self) -> int:
        """Slices per step."""
        return self.num_slices or self.max_workers

    @classmethod
    def coerce(cls, workers: Any) -> "Workers | None":
        """None, an int N (exactly N workers), a ``'min:max'`` string, or a Workers."""
        if workers is None or isinstance(workers, cls):
            return workers
        if isinstance(workers, int) and not isinstance(workers, bool):
            return cls(workers, workers)
        if isinstance(workers, str):
            lo, sep, hi = workers.partition(":")
            try:
                return cls(int(lo), int(hi) if sep else int(lo))
            except ValueError as err:
                raise ValueError(f"workers={workers!r}: expected 'N' or 'MIN:MAX' with ints "
                                 f"({err})") from None
        raise TypeError(f"workers must be None, an int, 'MIN:MAX' or rm.Workers, got "
                        f"{type(workers).__name__} {workers!r}")

    def actor_options(self) -> dict:
        """Ray actor options for one worker (resources and BLAS thread count)."""
        threads = str(max(1, int(self.cpus_per_worker)))
        env = {k: threads for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                    "MKL_NUM_THREADS")}
        return {"num_cpus": self.cpus_per_worker, "num_gpus": self.gpus_per_worker,
                "resources": dict(self.resources or {}), "max_restarts": 0,
                "runtime_env": {"env_vars": env}}
