"""Killing an actor's process for sure, wherever it runs.

``ray.kill`` asks the actor's process to exit; a process that is stopped (SIGSTOP, a debugger,
a frozen machine) never hears it and stays behind, holding its memory and its CPU slot. A
hung worker or server is therefore also killed by its pid, with SIGKILL (which a stopped
process cannot ignore), from a zero-CPU Ray task placed on the actor's own node. The pid is
checked against the process's start time first, so that a pid reused by another process
after the actor died is never touched.
"""
from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["identity", "reap"]


def identity() -> dict:
    """This process's pid, start time and node: what :func:`reap` needs later (an actor
    reports it when it starts)."""
    import psutil
    import ray
    return {"pid": os.getpid(), "started": psutil.Process().create_time(),
            "node": ray.get_runtime_context().get_node_id()}


def _sigkill(pid: int, started: float) -> bool:
    import psutil
    try:
        if abs(psutil.Process(pid).create_time() - started) > 1e-3:
            return False  # the pid belongs to a newer process now
        os.kill(pid, signal.SIGKILL)
        return True
    except (psutil.NoSuchProcess, ProcessLookupError, PermissionError):
        return False


def reap(handle: Any, who: dict | None) -> Any:
    """Kill the actor ``handle`` through Ray and, when ``who`` (its :func:`identity`) is
    known, SIGKILL its process on its node.

    Returns
    -------
    ObjectRef or None
        The kill task's answer (True if it killed the process), to wait on where the caller
        must know the process is gone (``close``); None without ``who``.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    ray.kill(handle, no_restart=True)
    if not who or "started" not in who:
        return None
    try:
        where = NodeAffinitySchedulingStrategy(who["node"], soft=False)
    except ValueError:  # not a node Ray knows (ray.kill is all there is to do)
        return None
    task = ray.remote(num_cpus=0, max_retries=0)(_sigkill).options(scheduling_strategy=where)
    return task.remote(who["pid"], who["started"])
