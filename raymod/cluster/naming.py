"""Names of raymod's actors, so that ``ray list actors`` and the dashboard show their roles.

Each worker pool opens a namespace of its own, ``raymod-fit-<n>-<driver pid>``; its workers
are ``raymod-worker-<rank>`` there, and the KVServers made after it (a module makes its pool
at bind and its kvstore at ``init_optimizer``) are ``raymod-kvserver-<shard>`` in the same
namespace. A name is never handed out twice in a namespace: a restored server is
``raymod-kvserver-<shard>-<k>``. A kvstore made with no pool gets a namespace of its own.
"""
from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import Any

__all__ = ["Scope", "worker_options", "server_options", "PREFIX"]

PREFIX = "raymod"
_counter = itertools.count(1)
_lock = threading.Lock()
_scopes: "weakref.WeakKeyDictionary[Any, Scope]" = weakref.WeakKeyDictionary()
_latest_pool: list = [None]   # the Scope of the pool made last in this process


class Scope:
    """One fit's namespace and the actor names used in it."""

    def __init__(self) -> None:
        self.namespace = f"{PREFIX}-fit-{next(_counter)}-{os.getpid()}"
        self._used: set[str] = set()

    def name(self, role: str, index: int) -> str:
        """``raymod-<role>-<index>``, or with a ``-<k>`` suffix if that was used here."""
        base = f"{PREFIX}-{role}-{index}"
        with _lock:
            name, k = base, 1
            while name in self._used:
                name, k = f"{base}-{k}", k + 1
            self._used.add(name)
        return name

    def options(self, role: str, index: int) -> dict:
        """Ray actor options naming one actor of this scope."""
        return {"name": self.name(role, index), "namespace": self.namespace}


def _scope_of(owner: Any, pool: bool) -> Scope:
    scope = _scopes.get(owner)
    if scope is None:
        scope = Scope() if pool or _latest_pool[0] is None else _latest_pool[0]
        if pool:
            _latest_pool[0] = scope
        _scopes[owner] = scope
    return scope


def worker_options(pool: Any, rank: int) -> dict:
    """Actor options naming worker ``rank`` of ``pool`` (``raymod-worker-<rank>``)."""
    return _scope_of(pool, pool=True).options("worker", rank)


def server_options(kvstore: Any, shard: int) -> dict:
    """Actor options naming KVServer ``shard`` of ``kvstore`` (``raymod-kvserver-<shard>``),
    in the namespace of the latest worker pool."""
    return _scope_of(kvstore, pool=False).options("kvserver", shard)


def standby_options(kvstore: Any, shard: int) -> dict:
    """Actor options naming the hot standby of KVServer ``shard`` of ``kvstore``
    (``raymod-kvstandby-<shard>``)."""
    return _scope_of(kvstore, pool=False).options("kvstandby", shard)


def namespace_of(owner: Any) -> str | None:
    """The namespace of a pool's or kvstore's actors (None before it made any)."""
    scope = _scopes.get(owner)
    return None if scope is None else scope.namespace
