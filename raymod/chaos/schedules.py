"""Fault schedules: which faults strike at which moments of a fit, drawn from a seed."""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..cluster.moments import MOMENTS

__all__ = ["FAULTS", "WHERE", "Fault", "Schedule", "generate"]

#: the faults a schedule can hold
FAULTS = {
    "worker_kill": "SIGKILL a worker's process",
    "worker_stop": "SIGSTOP a worker's process (hung: found by its deadline)",
    "server_kill": "SIGKILL the KVServer's process",
    "worker_node": "remove a worker's node (its raylet and processes killed)",
    "node_drain": "drain a worker's node through Ray's GCS (a preemption notice)",
    "server_node": "remove the KVServer's node",
    "start_fail": "kill a worker actor while it starts or joins",
}
_ANY = ("worker_kill", "worker_stop", "server_kill", "worker_node", "server_node", "node_drain")
_NO_STOP = ("worker_kill", "server_kill", "worker_node", "server_node", "node_drain")
#: moment -> the faults that can strike there (a stopped worker before any step time is
#: known waits out the first step's 60 s deadline: those are ``slow`` schedules)
WHERE = {
    "bind": _NO_STOP,
    "init_optimizer": _NO_STOP,
    "window.launched": _ANY,
    "window.collected": _ANY,
    "step": _ANY,
    "batch_end": _ANY,
    "recovery": ("worker_kill", "server_kill", "worker_node"),
    "worker.starting": ("start_fail",),
    "worker.joining": ("start_fail", "worker_kill"),
    "get_params": _ANY,
    "forward": _ANY,
    "checkpoint.save": _ANY,
    "svrg.full_gradient": _NO_STOP,
    "close": ("worker_kill", "worker_stop", "server_kill"),
}
assert set(WHERE) - {"batch_end"} <= set(MOMENTS)
#: how many times a fit reaches a moment, roughly (occurrences are drawn below it)
_REACHED = {"window.launched": 6, "window.collected": 6, "step": 40, "batch_end": 40,
            "worker.starting": 5, "get_params": 2, "checkpoint.save": 3}


@dataclass(frozen=True)
class Fault:
    """One fault: ``kind`` (one of :data:`FAULTS`) strikes the ``occurrence``-th time (from
    1) the fit reaches ``moment``; ``pick`` chooses among the live targets, workers in the
    order they joined (0: the longest-serving)."""

    moment: str
    occurrence: int
    kind: str
    pick: int = 0

    def __post_init__(self) -> None:
        if self.moment not in WHERE:
            raise ValueError(f"Fault(moment=...) must be one of {sorted(WHERE)}, "
                             f"got {self.moment!r}")
        if self.kind not in WHERE[self.moment]:
            raise ValueError(f"Fault(kind=...) at {self.moment!r} must be one of "
                             f"{list(WHERE[self.moment])}, got {self.kind!r}")
        if not isinstance(self.occurrence, int) or self.occurrence < 1:
            raise ValueError(f"Fault(occurrence=...) must be an int >= 1, got "
                             f"{self.occurrence!r}")

    def __str__(self) -> str:
        return f"{self.kind}@{self.moment}#{self.occurrence}"


@dataclass(frozen=True)
class Schedule:
    """The faults of one fit and how it runs.

    Parameters
    ----------
    faults : tuple of Fault
    run_ahead : int, optional
        ``Workers.run_ahead`` (None: the default windows; 1: a driver call per step).
    svrg : bool
        Train an SVRGModule (its full-gradient passes are moments too).
    spares : int
        ``Workers.spares``: idle workers started ahead of need (a promotion is a
        ``worker.joining`` moment too).
    sparse : bool
        Train the sparse model: csr batches and a row_sparse first-layer table, which the
        KVServers hold by row range and update lazily.
    seed, index : int
        Where :func:`generate` drew it (what replays it).
    """

    faults: tuple[Fault, ...]
    run_ahead: int | None = 8
    svrg: bool = False
    seed: int | None = None
    index: int | None = None
    spares: int = 0
    sparse: bool = False

    def __str__(self) -> str:
        how = (("svrg " if self.svrg else "") + ("sparse " if self.sparse else "")
               + f"run_ahead={self.run_ahead}"
               + (f" spares={self.spares}" if self.spares else ""))
        return f"[{', '.join(map(str, self.faults)) or 'no fault'}] {how}"

    @property
    def replay(self) -> str:
        """The command that runs this schedule again."""
        if self.seed is None:
            return f"Rig().run({self!r})"
        return f"python bench/bench_faults.py --seed {self.seed} --only {self.index}"


def generate(seed: int, count: int, slow: bool = False) -> list[Schedule]:
    """``count`` schedules drawn from ``seed`` (schedule ``i`` depends on ``(seed, i)`` only,
    so ``--only i`` replays it alone). ``slow``: also stop workers before any step time is
    known (each such fault costs the first step's 60 s deadline)."""
    out = []
    for index in range(count):
        rng = random.Random(f"raymod-chaos:{seed}:{index}")
        svrg = rng.random() < 0.15
        run_ahead = rng.choice([None, 1, 8])
        faults = []
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            moments = [m for m in WHERE if m != "svrg.full_gradient" or svrg]
            if run_ahead == 1:
                moments = [m for m in moments if not m.startswith("window.")]
            else:
                moments = [m for m in moments if m != "step"]
            moment = rng.choice(moments)
            kinds = [k for k in WHERE[moment]
                     if slow or k != "worker_stop" or moment in ("window.collected", "step",
                                                                 "batch_end")]
            if not kinds:
                continue
            faults.append(Fault(moment, rng.randint(1, _REACHED.get(moment, 1)),
                                rng.choice(kinds), rng.randrange(4)))
        # drawn apart, so that the faults of (seed, index) are those drawn before spares were
        spares = random.Random(f"raymod-chaos-spares:{seed}:{index}").choice([0, 1])
        sparse = not svrg and random.Random(f"raymod-chaos-model:{seed}:{index}").random() < 0.35
        out.append(Schedule(tuple(faults), run_ahead, svrg, seed, index, spares, sparse))
    return out
