"""How the driver describes a step's work to the workers: slice tasks, and windows of them.

A task is a dict for one slice of one step's global batch: ``group`` (the executor group),
``slice`` (its index), ``num_slices``, and either ``source = (id, ref)`` of a row source
with the slice's ``rows`` (a ``range`` when contiguous) or the slice's arrays by value.

Most steps read rows of one source, so the driver keeps them compact: a
:class:`SliceTasks` holds the batch's rows and its slice bounds and builds the per-slice
dicts only when something asks for them (a recovery, a replay). A window of such steps
is one list of ``(step, group, source id, rows, slices, svrg)`` pickled once for every
worker; each worker cuts out its own contiguous run of slices (:func:`expand_window`), so
planning a step costs the driver the same however many workers there are.
"""
from __future__ import annotations

import functools
from typing import Any, Iterator, Sequence

import numpy as np

__all__ = ["RankPlan", "SliceTasks", "cuts", "expand_window", "pack_window"]


@functools.lru_cache(maxsize=64)
def cuts(tasks: int, workers: int) -> tuple[int, ...]:
    """Where ``tasks`` slices are cut into ``workers`` contiguous runs, as even as possible."""
    return tuple(np.linspace(0, tasks, workers + 1).round().astype(int).tolist())


def _build(group: int, source: tuple, rows: Any, slices: Sequence[slice],
           first: int, stop: int) -> list[dict]:
    """The task dicts of slices ``first .. stop - 1``."""
    return [{"group": group, "slice": i, "source": source, "rows": rows[slices[i]],
             "num_slices": len(slices)} for i in range(first, stop)]


class SliceTasks(Sequence):
    """The tasks of one step whose slices are rows of one source, built when first read.

    Parameters
    ----------
    group : int
        The executor group's id.
    source : tuple
        ``(id, [ref])`` of the row source's reader (see ``WorkerPool.source``).
    rows : range or numpy.ndarray
        The batch's row ids in the source.
    slices : list of slice
        The batch cut into slices (the same list object for every step of a group, so
        that a window pickles it once).
    """

    def __init__(self, group: int, source: tuple, rows: Any, slices: list[slice]):
        self.group, self.source, self.rows, self.slices = group, source, rows, slices
        self._tasks: list[dict] | None = None

    def _all(self) -> list[dict]:
        if self._tasks is None:
            self._tasks = _build(self.group, self.source, self.rows, self.slices, 0,
                                 len(self.slices))
        return self._tasks

    def __len__(self) -> int:
        return len(self.slices)

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __iter__(self) -> Iterator[dict]:
        return iter(self._all())


def _share(count: int, position: int, workers: int) -> tuple[int, int]:
    """The first and the stop slice of the worker at ``position`` of ``workers``."""
    edges = cuts(count, workers)
    return edges[position], edges[position + 1]


def pack_window(steps: list[tuple[int, SliceTasks, bool]]) -> list[tuple]:
    """A window of ``(step, tasks, svrg)`` as plain data for every worker (source refs left
    out: each worker is sent a reader once)."""
    return [(step, t.group, t.source[0], t.rows, t.slices, svrg) for step, t, svrg in steps]


def expand_window(window: list[tuple], position: int, workers: int) -> list[tuple]:
    """The ``[(step, tasks, svrg), ...]`` of the worker at ``position`` of ``workers`` in a
    :func:`pack_window` window: its contiguous run of each step's slices."""
    plan = []
    for step, group, sid, rows, slices, svrg in window:
        first, stop = _share(len(slices), position, workers)
        plan.append((step, _build(group, (sid, None), rows, slices, first, stop), svrg))
    return plan


class RankPlan:
    """What one worker holds of a packed window, as ``(step, tasks, svrg)`` when iterated."""

    def __init__(self, steps: list[tuple[int, SliceTasks, bool]], position: int, workers: int):
        self.steps, self.position, self.workers = steps, position, workers

    def __iter__(self) -> Iterator[tuple[int, list[dict], bool]]:
        for step, t, svrg in self.steps:
            first, stop = _share(len(t.slices), self.position, self.workers)
            yield step, _build(t.group, t.source, t.rows, t.slices, first, stop), svrg
