"""MXNet's ``mx.model`` helpers: checkpoints, and how a module updates its parameters.

``save_checkpoint`` / ``load_checkpoint`` / ``load_params`` live in :mod:`raymod.checkpoint`
and are re-exported here under MXNet's names. The kvstore helpers decide whether a
kvstore is used and where the optimizer runs (:func:`_create_kvstore`, a pure decision),
then carry that out (:func:`_initialize_kvstore`, :func:`_update_params_on_kvstore`,
:func:`_update_params`); Module, BucketingModule and SVRGModule share them.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from . import kvstore as kvs
from .callback import BatchEndParam
from .checkpoint import load_checkpoint, load_params, save_checkpoint
from .kvstore.base import _REGISTRY as _KV_REGISTRY

__all__ = ["save_checkpoint", "load_checkpoint", "load_params", "BatchEndParam"]

#: environment variable: "0" keeps the optimizer out of the kvstore (MXNet's name)
UPDATE_ON_KVSTORE_ENV = "MXNET_UPDATE_ON_KVSTORE"
#: a 'local' kvstore updates on the host only below this many elements per parameter
_LOCAL_UPDATE_MAX_SIZE = 16 * 1024 * 1024


def _check_kvstore_arg(kvstore: Any) -> None:
    """TypeError/ValueError for a kvstore argument no kvstore can be made from."""
    if kvstore is None or isinstance(kvstore, kvs.KVStoreBase):
        return
    if not isinstance(kvstore, str):
        raise TypeError(f"kvstore must be a KVStore, a type name or None, got "
                        f"{type(kvstore).__name__}")
    if kvstore.lower() not in _KV_REGISTRY and not kvstore.lower().startswith("dist"):
        raise ValueError(f"unknown kvstore type {kvstore!r}; known types: "
                         f"{', '.join(_KV_REGISTRY.names())}, dist_sync, dist_async, "
                         "dist_device_sync")


def _create_kvstore(kvstore: Any, num_device: int, arg_params: dict) -> tuple[Any, bool]:
    """``(kvstore or None, update_on_kvstore)`` for a module on ``num_device`` devices.

    A type name on one device (and not 'dist...') means no kvstore: the module updates
    locally. Otherwise a store is created (or the given one used) and the optimizer runs
    in it, unless ``MXNET_UPDATE_ON_KVSTORE=0``, the store cannot run optimizers, or a
    'local' store would hold a parameter above 16M elements.
    """
    _check_kvstore_arg(kvstore)
    update_on_kvstore = bool(int(os.environ.get(UPDATE_ON_KVSTORE_ENV, "1")))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, kvs.KVStoreBase):
        kv = kvstore
    elif num_device == 1 and "dist" not in kvstore:
        kv = None
    else:
        kv = kvs.create(kvstore)
        largest = max((int(np.prod(p.shape)) for p in arg_params.values()), default=0)
        if kvstore == "local" and largest > _LOCAL_UPDATE_MAX_SIZE:
            update_on_kvstore = False
    if kv is None:
        return None, False
    return kv, update_on_kvstore and kv.is_capable(kvs.KVStoreBase.OPTIMIZER)


def _create_dist_kvstore(kvstore: Any, logger: Any) -> tuple[Any, bool]:
    """``(dist kvstore, update_on_kvstore)`` for a module on Ray workers.

    The in-process names ('local', 'device', None) mean 'dist_sync' there: the workers'
    gradients always meet on KVServers. 'dist_async' needs the optimizer on the servers.
    """
    _check_kvstore_arg(kvstore)
    update_on_kvstore = bool(int(os.environ.get(UPDATE_ON_KVSTORE_ENV, "1")))
    if isinstance(kvstore, kvs.KVStoreBase):
        if not kvstore.type.startswith("dist"):
            raise ValueError(f"a module on workers needs a dist kvstore, got type "
                             f"{kvstore.type!r}")
        kv = kvstore
    else:
        name = kvstore.lower() if isinstance(kvstore, str) else "dist_sync"
        if not name.startswith("dist"):
            logger.info("kvstore %r: workers aggregate through KVServers, using 'dist_sync'",
                        kvstore)
            name = "dist_sync"
        kv = kvs.create(name)
    if kv.type == "dist_async" and not update_on_kvstore:
        raise ValueError(f"dist_async needs the optimizer on the servers, but "
                         f"{UPDATE_ON_KVSTORE_ENV}=0")
    return kv, update_on_kvstore


def _initialize_kvstore(kvstore: Any, param_arrays: Sequence[list], arg_params: dict,
                        param_names: Sequence[str], update_on_kvstore: bool) -> None:
    """Put each parameter into the kvstore; with update_on_kvstore also copy it to devices."""
    for name, on_devices in zip(param_names, param_arrays):
        if update_on_kvstore:
            kvstore.broadcast(name, arg_params[name], out=on_devices)
        else:
            kvstore.init(name, arg_params[name])


def _update_params_on_kvstore(param_arrays: Sequence[list], grad_arrays: Sequence[list],
                              kvstore: Any, param_names: Sequence[str]) -> None:
    """Push every device's gradient; the kvstore's optimizer updates; pull the new weights."""
    for index, (weights, grads) in enumerate(zip(param_arrays, grad_arrays)):
        if grads[0] is None:  # fixed parameter
            continue
        kvstore.pushpull(param_names[index], grads, out=weights, priority=-index)


def _update_params(param_arrays: Sequence[list], grad_arrays: Sequence[list],
                   updater: Callable, num_device: int, kvstore: Any = None,
                   param_names: Sequence[str] | None = None) -> None:
    """Update on the devices: sum gradients through the kvstore (if any), then each device
    applies ``updater`` to its own copy.

    Device ``k``'s copy of parameter ``i`` has update index ``i * num_device + k``, so each
    copy keeps its own optimizer state (the index scheme ``param_idx2name`` follows).
    """
    per_device: list[list] = [[] for _ in range(num_device)]
    for index, (weights, grads) in enumerate(zip(param_arrays, grad_arrays)):
        if grads[0] is None:
            continue
        if kvstore:
            kvstore.pushpull(param_names[index], grads, priority=-index)
        for k, (w, g) in enumerate(zip(weights, grads)):
            per_device[k].append((index * num_device + k, g, w))
    for updates in per_device:
        if updates:
            indices, grads, weights = zip(*updates)
            updater(list(indices), list(grads), list(weights))
