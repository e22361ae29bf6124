"""``rm.mon.Monitor``: statistics of every op's outputs, gradients and parameters, for
debugging, as MXNet 1.x's ``mx.mon.Monitor``.

Install it on executors (``Module.install_monitor(mon)``, or ``fit(monitor=mon)``), call
:meth:`Monitor.tic` before a batch's forward and :meth:`Monitor.toc` (or
:meth:`Monitor.toc_print`) after its backward. Every ``interval`` batches it records, for
each name matching ``pattern``: every op output during forward (``<node>_<output>``), every
input gradient during backward (``<node>_backward_output<k>``, or ``<node>_backward_output``
for a single-input op), and, at ``toc``, the arguments and auxiliary states of each executor.
"""
from __future__ import annotations

import logging
import math
import re
from typing import Any, Callable

import numpy as np

from .context import as_numpy

_LOG = logging.getLogger(__name__)

__all__ = ["Monitor"]


def _rms(x: Any) -> Any:
    """MXNet's default statistic: ``norm(x) / sqrt(size)``, the root mean square."""
    from .optimizer.optimizer import get_array_module
    xp = get_array_module(x)
    return xp.asarray(xp.linalg.norm(x.ravel()) / math.sqrt(max(x.size, 1)), dtype=x.dtype)


def _format(value: Any) -> str:
    """One statistic as MXNet's toc writes it: a scalar plainly, else the array, then a tab."""
    arr = as_numpy(value)
    if arr.size == 1:
        return str(arr.reshape(-1)[0]) + "\t"  # str: numpy's shortest repr of the dtype
    return str(arr) + "\t"


class Monitor:
    """Collect statistics of tensors every ``interval`` batches.

    Parameters
    ----------
    interval : int
        Record one batch in every ``interval`` (the batch whose :meth:`tic` finds the batch
        count a multiple of it).
    stat_func : callable, optional
        Array -> statistic (an array or scalar, or a list of them). Default: the root mean
        square, ``norm(x) / sqrt(x.size)``.
    pattern : str, default '.*'
        Regular expression; only names it matches (from their start) are recorded.
    sort : bool, default False
        Sort :meth:`toc`'s results by name.
    monitor_all : bool, default False
        Also record every op's inputs during forward (``<node>_<input>``).

    Notes
    -----
    A gradient the graph does not need (of a label, or of data bound with ``grad_req``
    'null') is recorded as zeros; MXNet records whatever its buffer held.
    """

    def __init__(self, interval: int, stat_func: Callable[[Any], Any] | None = None,
                 pattern: str = ".*", sort: bool = False, monitor_all: bool = False):
        if isinstance(interval, bool) or not isinstance(interval, (int, np.integer)) \
                or interval < 1:
            raise ValueError(f"Monitor: interval must be a positive int, got {interval!r}")
        self.interval = int(interval)
        self.stat_func = _rms if stat_func is None else stat_func
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all
        self.activated = False
        self.queue: list[tuple[int, str, Any]] = []
        self.step = 0
        self.exes: list = []

    def stat_helper(self, name: str, array: Any) -> None:
        """The executors' callback: record ``stat_func(array)`` while a batch is collected."""
        if self.activated and self.re_prog.match(name):
            self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe: Any) -> None:
        """Attach to an executor (several may share one monitor).

        Parameters
        ----------
        exe : Executor
            Reports its op outputs and gradients to :meth:`stat_helper` from now on.
        """
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self) -> None:
        """Start a batch: collect it if the batch count is a multiple of ``interval``."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self) -> list[tuple[int, str, str]]:
        """End the batch; its records as ``(batch count, name, formatted statistic)``.

        Adds the executors' arguments and auxiliary states matching ``pattern``. Returns an
        empty list for a batch that was not collected.
        """
        if not self.activated:
            return []
        for exe in self.exes:
            named = list(zip(exe._symbol.list_arguments(), exe.arg_arrays)) + \
                list(zip(exe._symbol.list_auxiliary_states(), exe.aux_arrays))
            for name, array in named:
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        if self.sort:
            self.queue.sort(key=lambda item: item[1])
        results = []
        for step, name, stats in self.queue:
            stats = stats if isinstance(stats, list) else [stats]
            results.append((step, name, "".join(_format(v) for v in stats)))
        self.queue = []
        return results

    def toc_print(self) -> None:
        """End the batch and log its records (at INFO, on this module's logger), one line each."""
        for step, name, value in self.toc():
            _LOG.info("Batch: {:7d} {:30s} {:s}".format(step, name, value))
