"""The runner's ``--workers``: an MXNet script's modules trained on Ray workers.

``raymod run --workers N|MIN:MAX [--cpus-per-worker C] [--gpus-per-worker G] SCRIPT ARGS``
(and ``python -m raymod.compat`` with the same options, or with ``RAYMOD_WORKERS`` set) runs
the script inside ``rm.mod.default_workers(...)``: every ``Module``, ``BucketingModule``,
``SVRGModule`` and user subclass of them that the script makes without ``workers=`` trains on
that many Ray worker actors. This module reads the options (:func:`workers_from_options`),
connects to Ray (:func:`connect`) and stops what the script left running (:func:`close_all`).
"""
from __future__ import annotations

import logging
import math
import os
from typing import Iterable, Sequence

from ..cluster.workers import Workers

__all__ = ["WORKERS_ENV", "OPTIONS", "UsageError", "split_options", "workers_from_options",
           "connect", "close_all"]

_LOG = logging.getLogger(__name__)

#: workers for ``python -m raymod.compat`` / ``raymod run`` when ``--workers`` is not given
#: (``N`` or ``MIN:MAX``, as the flag)
WORKERS_ENV = "RAYMOD_WORKERS"
#: the runner's own options, given before SCRIPT
OPTIONS = ("--workers", "--cpus-per-worker", "--gpus-per-worker", "--spares")
_EXPECTED = {"--workers": "N or MIN:MAX with 1 <= MIN <= MAX",
             "--cpus-per-worker": "a number > 0", "--gpus-per-worker": "an integer >= 0",
             "--spares": "an integer >= 0"}


#: modules of a script that may hold their workers at once on the runner's local cluster
#: (its logical CPUs are shares of the machine's cores, which the workers share anyway)
MODULES_AT_ONCE = 8


class UsageError(ValueError):
    """A bad runner option or ``RAYMOD_WORKERS``: one line naming it, what it expects and
    what it got (exit status 2, before the script runs)."""


def split_options(argv: Sequence[str]) -> tuple[dict, list]:
    """``({option: value}, [SCRIPT, ARGS...])``: the runner's options before SCRIPT, as
    ``--workers 2`` or ``--workers=2``; everything from SCRIPT on is the script's, verbatim.

    Raises
    ------
    UsageError
        For an option before SCRIPT that is not one of :data:`OPTIONS`, or one without a
        value.
    """
    argv = list(argv)
    options: dict = {}
    while argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        name, eq, value = argv.pop(0).partition("=")
        if name not in OPTIONS:
            raise UsageError(f"unknown option {name!r} before SCRIPT (expected one of "
                             f"{', '.join(OPTIONS)}); the script's own options go after it")
        if not eq:
            if not argv:
                raise UsageError(f"{name}: expected {_EXPECTED[name]}, got nothing")
            value = argv.pop(0)
        options[name] = value
    return options, argv


def workers_from_options(workers: str | None, cpus_per_worker: str | None = None,
                         gpus_per_worker: str | None = None, spares: str | None = None,
                         env: dict | None = None) -> Workers | None:
    """The workers the runner's options ask for (None: the script runs in process).

    Parameters
    ----------
    workers : str or None
        ``--workers`` as typed: ``'N'`` or ``'MIN:MAX'``. None: ``$RAYMOD_WORKERS`` if set
        (``env``, default ``os.environ``), else in process.
    cpus_per_worker, gpus_per_worker : str or None
        ``--cpus-per-worker`` (default 1) and ``--gpus-per-worker`` (default 0) as typed.
    spares : str or None
        ``--spares`` (default 0) as typed: workers kept started and set up, idle, to take a
        lost one's place (``Workers.spares``).

    Raises
    ------
    UsageError
        Naming the option (or ``RAYMOD_WORKERS``), the expected and the actual value; also
        for ``--cpus-per-worker`` / ``--gpus-per-worker`` without workers.
    """
    env = os.environ if env is None else env
    name = "--workers"
    if workers is None and env.get(WORKERS_ENV, "").strip():
        name, workers = WORKERS_ENV, env[WORKERS_ENV]
    if workers is None:
        for option, value in (("--cpus-per-worker", cpus_per_worker),
                              ("--gpus-per-worker", gpus_per_worker), ("--spares", spares)):
            if value is not None:
                raise UsageError(f"{option} {value}: needs --workers (or {WORKERS_ENV}); "
                                 "without workers the script trains in this process")
        return None
    low, sep, high = workers.strip().partition(":")
    try:
        bounds = (int(low), int(high) if sep else int(low))
    except ValueError:
        bounds = (0, 0)
    if not 1 <= bounds[0] <= bounds[1]:
        raise UsageError(f"{name}: expected {_EXPECTED['--workers']}, got {workers!r}")
    cpus = _parsed("--cpus-per-worker", cpus_per_worker, float, lambda v: math.isfinite(v)
                   and v > 0, 1.0)
    gpus = _parsed("--gpus-per-worker", gpus_per_worker, int, lambda v: v >= 0, 0)
    spare = _parsed("--spares", spares, int, lambda v: v >= 0, 0)
    return Workers(bounds[0], bounds[1], cpus_per_worker=cpus, gpus_per_worker=gpus,
                   spares=spare)


def _parsed(name: str, text: str | None, kind: type, ok, default: float) -> float:
    """``text`` as ``kind`` (``default`` when None), or UsageError naming ``name``."""
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise UsageError(f"{name}: expected {_EXPECTED[name]}, got {text!r}")
    return value


def connect(workers: Workers) -> bool:
    """Connect this process to Ray for ``workers``; True when this call started a cluster.

    Already connected: nothing. Otherwise ``$RAY_ADDRESS`` (set by ``ray job submit``) is
    joined, or a loopback-only local cluster is started with raymod's helper
    (``rm.cluster.init``), with the CPUs that :data:`MODULES_AT_ONCE` modules'
    ``min_workers`` ask for, so that they start on a small machine (sharing its cores): a
    script's second module (a ``SequentialModule``'s next member, a module loaded beside
    the one that trained) gets workers of its own at once.

    Raises
    ------
    UsageError
        When a local cluster has fewer GPUs than ``min_workers`` x ``gpus_per_worker``
        (rather than waiting for workers that cannot start).
    """
    from ..base import MXNetError
    from ..cluster import local
    if local.is_initialized():
        return False
    try:
        info = local.init_for_workers(workers, os.environ.get("RAY_ADDRESS") or None,
                                      modules=MODULES_AT_ONCE)
    except MXNetError as err:  # too few GPUs on the local cluster
        raise UsageError(f"--gpus-per-worker: {err}") from None
    _LOG.info("Ray cluster %s (%s) for %s", info["address"],
              "local" if info["local"] else "joined", workers)
    return True


def close_all(modules: Iterable) -> None:
    """Stop the worker actors (and the KVServers they started) of ``modules``; a module
    that fails to close is logged, the others still close."""
    for mod in list(modules):
        try:
            mod.close()
        except Exception as err:  # noqa: BLE001 - the script's own outcome matters more
            _LOG.warning("closing %s on workers failed: %s", type(mod).__name__, err)
