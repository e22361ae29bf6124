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
from .sparse import RowSparseArray
from .sparse.table_init import TableInit
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


def _check_param_names(call: str, param_names: Any, param_arrays: Sequence) -> None:
    """ValueError unless there is a kvstore key for every parameter."""
    if param_names is None or len(param_names) < len(param_arrays):
        got = "None" if param_names is None else f"{len(param_names)} names"
        raise ValueError(f"{call}: param_names must name each of the {len(param_arrays)} "
                         f"parameters (their kvstore keys), got {got}")


def _create_kvstore(kvstore: Any, num_device: int, arg_params: dict) -> tuple[Any, bool]:
    """Decide whether a module on ``num_device`` devices uses a kvstore, and where the
    optimizer runs (MXNet's ``mx.model._create_kvstore``).

    A type name on one device (and not 'dist...') means no kvstore: the module updates
    locally. Otherwise a store is created (or the given one used) and the optimizer runs
    in it, unless ``MXNET_UPDATE_ON_KVSTORE=0``, the store cannot run optimizers, or a
    'local' store would hold a parameter above 16M elements.

    Parameters
    ----------
    kvstore : KVStore, str or None
        A store, a type name ('local', 'device', 'dist_sync', ...) or None (no store).
    num_device : int
        How many devices of this process hold a copy of the parameters.
    arg_params : dict of str to array
        The parameters (their sizes decide about a 'local' store).

    Returns
    -------
    (KVStore or None, bool)
        The store to use and whether the optimizer runs in it (``update_on_kvstore``);
        ``(None, False)`` without a store.

    Raises
    ------
    TypeError, ValueError
        For a ``kvstore`` that is neither a store, None nor a known type name.
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

    The in-process names ('local', 'device', None) and stores of those types mean a new
    'dist_sync' store there (with the given store's gradient compression): the workers'
    gradients always meet on KVServers. 'dist_async' needs the optimizer on the servers.
    """
    _check_kvstore_arg(kvstore)
    update_on_kvstore = bool(int(os.environ.get(UPDATE_ON_KVSTORE_ENV, "1")))
    if isinstance(kvstore, kvs.KVStoreBase) and kvstore.type.startswith("dist"):
        kv = kvstore
    elif isinstance(kvstore, kvs.KVStoreBase) and not isinstance(kvstore, kvs.LocalKVStore):
        raise ValueError(f"a module on workers needs a dist kvstore (or a 'local' or "
                         f"'device' one, which means 'dist_sync'), got type {kvstore.type!r}")
    elif isinstance(kvstore, kvs.KVStoreBase):  # e.g. an MXNet script's kv.create('device')
        logger.info("kvstore of type %r: workers aggregate through KVServers, using a "
                    "'dist_sync' store", kvstore.type)
        kv = kvs.create("dist_sync")
        if kvstore.compression_threshold is not None:
            kv.set_gradient_compression({"type": "2bit",
                                         "threshold": kvstore.compression_threshold})
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
    """Put each parameter into the kvstore (MXNet's ``mx.model._initialize_kvstore``).

    Parameters
    ----------
    kvstore : KVStore
        The store, from :func:`_create_kvstore`.
    param_arrays : list of list of array
        Per parameter, its copy on each device (an executor group's ``param_arrays``).
    arg_params : dict of str to array
        The parameter values to store.
    param_names : list of str
        The name of each entry of ``param_arrays`` (its kvstore key).
    update_on_kvstore : bool
        Whether the store runs the optimizer; then the stored value is also broadcast to
        every device copy, so all devices start from the store's value (a row_sparse copy
        gets its rows from ``row_sparse_pull`` instead).
    """
    _check_param_names("_initialize_kvstore", param_names, param_arrays)
    for name, on_devices in zip(param_names, param_arrays):
        if update_on_kvstore and isinstance(on_devices[0], RowSparseArray):
            # a table: the store keeps it (a dist store by row range over its servers); the
            # devices get the rows each batch needs from Module.prepare's row_sparse_pull
            value = arg_params[name]  # a TableInit: the servers make the rows themselves
            kvstore.init(name, value if isinstance(value, TableInit)
                         else RowSparseArray.full(value))
        elif update_on_kvstore:
            kvstore.broadcast(name, arg_params[name], out=on_devices)
        else:
            kvstore.init(name, arg_params[name])


def _update_params_on_kvstore(param_arrays: Sequence[list], grad_arrays: Sequence[list],
                              kvstore: Any, param_names: Sequence[str]) -> None:
    """One update with the optimizer in the kvstore (MXNet's
    ``mx.model._update_params_on_kvstore``): push every device's gradient, the store sums
    them and updates, and every device copy pulls the new weight.

    Parameters
    ----------
    param_arrays, grad_arrays : list of list of array
        Per parameter, its weight / gradient on each device (an executor group's
        ``param_arrays`` / ``grad_arrays``); a parameter whose first gradient is None
        (fixed) is skipped.
    kvstore : KVStore
        The store, with its optimizer set (``kvstore.set_optimizer``).
    param_names : list of str
        The kvstore key of each parameter.
    """
    _check_param_names("_update_params_on_kvstore", param_names, param_arrays)
    for index, (weights, grads) in enumerate(zip(param_arrays, grad_arrays)):
        if grads[0] is None:  # fixed parameter
            continue
        kvstore.pushpull(param_names[index], grads, out=weights, priority=-index)


def _update_params(param_arrays: Sequence[list], grad_arrays: Sequence[list],
                   updater: Callable, num_device: int, kvstore: Any = None,
                   param_names: Sequence[str] | None = None) -> None:
    """One update with the optimizer on the devices (MXNet's ``mx.model._update_params``):
    sum gradients through the kvstore (if any), then each device applies ``updater`` to its
    own copy.

    Device ``k``'s copy of parameter ``i`` has update index ``i * num_device + k``, so each
    copy keeps its own optimizer state (the index scheme ``param_idx2name`` follows).

    Parameters
    ----------
    param_arrays, grad_arrays : list of list of array
        Per parameter, its weight / gradient on each device; a parameter whose first
        gradient is None (fixed) is skipped.
    updater : callable
        ``updater(indices, grads, weights)``, e.g. ``rm.optimizer.get_updater(opt)``; called
        once per device with that device's updates.
    num_device : int
        Devices per parameter (the stride of the update indices).
    kvstore : KVStore, optional
        When given, gradients are summed across devices through it first (in place).
    param_names : list of str, optional
        The kvstore key of each parameter; needed with ``kvstore``.
    """
    if kvstore:
        _check_param_names("_update_params", param_names, param_arrays)
    per_device: list[list] = [[] for _ in range(num_device)]
    for index, (weights, grads) in enumerate(zip(param_arrays, grad_arrays)):
        if grads[0] is None:
            continue
        if kvstore:
            kvstore.pushpull(param_names[index], grads, priority=-index)
        for k, (w, g) in enumerate(zip(weights, grads)):
            # a row_sparse parameter in one process holds every row: its table updates
            per_device[k].append((index * num_device + k, g,
                                  w.table() if isinstance(w, RowSparseArray) else w))
    for updates in per_device:
        if updates:
            indices, grads, weights = zip(*updates)
            updater(list(indices), list(grads), list(weights))
