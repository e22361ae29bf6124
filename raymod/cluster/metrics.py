"""Training figures as Ray metrics: the dashboard's metrics view and Prometheus see them.

:class:`RayMetrics` is a batch-end callback; a module on Ray workers feeds one on its own
during ``fit`` (see ``BaseModule._fit_batch_end``). It reads figures the driver already
keeps (the executor group's step timings, the worker pool's membership events) and sets:

=================================  =====================================================
``raymod_samples_per_second``      samples trained per second since the last report
``raymod_step_seconds``            driver wall time per step (fused worker step)
``raymod_push_seconds``            workers' time pushing gradients, per step (summed)
``raymod_wait_seconds``            workers' time waiting for / reading new weights, per step
``raymod_recoveries``              worker and KVServer recoveries so far (a counter)
``raymod_live_workers``            live worker actors
=================================  =====================================================

Each carries the tag ``fit`` (the fit's actor namespace, see :mod:`raymod.cluster.naming`;
``in-process`` for a module without workers). Ray exports them from the driver's node on
its metrics export port (``rm.cluster.init()['metrics_export_port']``) with the ``ray_``
prefix, every few seconds.
"""
from __future__ import annotations

import time
from typing import Any

from . import naming

__all__ = ["RayMetrics"]

_GAUGES = {
    "raymod_samples_per_second": "Training samples per second since the last report",
    "raymod_step_seconds": "Driver wall time per training step",
    "raymod_push_seconds": "Workers' seconds pushing gradients per step (summed over workers)",
    "raymod_wait_seconds": "Workers' seconds waiting for and reading weights per step "
                           "(summed over workers)",
    "raymod_live_workers": "Live worker actors of the fit",
}
_instruments: dict[str, Any] = {}


def _instrument(name: str) -> Any:
    """One Ray metric object per name and process (Ray wants them made once)."""
    if name not in _instruments:
        from ray.util import metrics
        if name == "raymod_recoveries":
            _instruments[name] = metrics.Counter(
                name, "Worker and KVServer recoveries (steps completed despite losses)",
                tag_keys=("fit",))
        else:
            _instruments[name] = metrics.Gauge(name, _GAUGES[name], tag_keys=("fit",))
    return _instruments[name]


class RayMetrics:
    """Batch-end callback exporting a fit's figures as Ray metrics (see the module notes).

    Parameters
    ----------
    frequent : int, default 1
        Report every ``frequent`` batches (the figures cover every batch since the last
        report).
    """

    def __init__(self, frequent: int = 1):
        self.frequent = max(1, int(frequent))
        self._last: dict[int, tuple] = {}   # id(module) -> (time, steps, wall, phases, events)
        #: the figures last reported (name -> value), for logs and tests
        self.figures: dict[str, float] = {}

    def __call__(self, param: Any) -> None:
        module = (getattr(param, "locals", None) or {}).get("self")
        module = getattr(module, "_curr_module", module)  # a BucketingModule's bucket
        if module is None or param.nbatch % self.frequent:
            return
        pool = getattr(module, "_pool", None)
        group = getattr(module, "_exec_group", None)
        timings = getattr(getattr(group, "state", None), "timings", None)
        now = time.perf_counter()
        steps = timings.steps if timings is not None else getattr(module, "_global_step", 0)
        wall = timings.wall if timings is not None else 0.0
        phases = dict(timings.phases) if timings is not None else {}
        events = list(pool.events) if pool is not None else []
        last = self._last.get(id(module))
        self._last[id(module)] = (now, steps, wall, phases, len(events))
        fit = (naming.namespace_of(pool) if pool is not None else None) or "in-process"
        tags = {"fit": fit}
        figures = {}
        if pool is not None:
            figures["raymod_live_workers"] = float(len(pool))
        recoveries = sum(e["event"] in ("recovered", "kvserver_recovered")
                         for e in events[last[4] if last else 0:])
        if last is not None and steps > last[1]:
            done = steps - last[1]
            batch = getattr(group, "batch_size", None) or getattr(module, "_batch_size", 0)
            figures["raymod_samples_per_second"] = done * batch / max(now - last[0], 1e-9)
            if timings is not None:
                figures["raymod_step_seconds"] = (wall - last[2]) / done
                figures["raymod_push_seconds"] = (phases.get("push", 0.0) -
                                                  last[3].get("push", 0.0)) / done
                figures["raymod_wait_seconds"] = (phases.get("refresh", 0.0) -
                                                  last[3].get("refresh", 0.0)) / done
        for name, value in figures.items():
            _instrument(name).set(value, tags=tags)
        if recoveries:
            _instrument("raymod_recoveries").inc(recoveries, tags=tags)
        self.figures.update(figures)
