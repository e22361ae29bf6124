"""The :class:`Updater`: an optimizer plus the states of every weight it updates.

``get_states`` / ``set_states`` serialise the states as an ``.npz`` archive (no pickle): one
entry per state array plus ``__meta__``, a JSON document giving how the arrays nest into each
index's state, the per-device update counts, and, when asked, the optimizer's name and
settings. Loading never runs code (``allow_pickle=False``).
"""
from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from ..array_view import plain, show
from ..context import as_numpy, context_of
from .optimizer import Optimizer, _REGISTRY, _as_list, get_array_module, registered_name

__all__ = ["Updater", "get_updater"]

_FORMAT = "raymod.optimizer.states"
_VERSION = 1
_META = "__meta__"


def _check_key(key: Any) -> Any:
    """An index usable as a JSON value: int or str."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(key)
    if isinstance(key, str):
        return key
    raise TypeError(f"optimizer index {key!r} must be an int or a str to be saved")


def _pairs(table: dict) -> list:
    """A dict with int or str keys as a JSON list of [key, value] pairs (JSON keys are str)."""
    return [[_check_key(k), v] for k, v in table.items()]


class _Encoder:
    """Flattens nested states into named host arrays plus a JSON skeleton."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def encode(self, state: Any) -> Any:
        """The JSON skeleton of ``state``; its arrays are collected in ``self.arrays``."""
        if state is None:
            return None
        if isinstance(state, (tuple, list)):
            kind = "tuple" if isinstance(state, tuple) else "list"
            return {kind: [self.encode(s) for s in state]}
        if isinstance(state, (bool, int, float, np.number)):
            return {"scalar": state.item() if isinstance(state, np.number) else state}
        if hasattr(state, "shape") and hasattr(state, "dtype"):
            name = f"a{len(self.arrays)}"
            self.arrays[name] = np.ascontiguousarray(as_numpy(state))
            return {"array": name}
        raise TypeError(f"cannot save an optimizer state of type {type(state).__name__}")


def _decode(node: Any, arrays: Any) -> Any:
    """Rebuild a state from its JSON skeleton and the loaded arrays."""
    if node is None:
        return None
    if "array" in node:
        return arrays[node["array"]]
    if "scalar" in node:
        return node["scalar"]
    if "tuple" in node:
        return tuple(_decode(n, arrays) for n in node["tuple"])
    if "list" in node:
        return [_decode(n, arrays) for n in node["list"]]
    raise ValueError(f"malformed optimizer state entry {node!r}")


def _like(state: Any, weight: Any) -> Any:
    """``state`` with every array moved to the module and device ``weight`` lives on."""
    if state is None or isinstance(state, (bool, int, float)):
        return state
    if isinstance(state, (tuple, list)):
        return type(state)(_like(s, weight) for s in state)
    xp = get_array_module(weight)
    if xp is np:
        return as_numpy(state)
    with xp.cuda.Device(context_of(weight).device_id):
        return xp.asarray(state)


class Updater:
    """Applies an optimizer to indexed weights, creating each weight's state on first use.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer to apply.

    Attributes
    ----------
    states : dict
        Index -> state, as returned by ``optimizer.create_state_multi_precision``.
    states_synced : dict
        Index -> whether the state is known to be on its weight's device (false after
        :meth:`set_states` until the index is next updated).
    aggregate_updates : bool
        Whether the optimizer takes several weights per call (its ``aggregate_num`` > 0;
        SGD's is ``inf``, all at once): the weights then go to it in order, in lists of up to
        ``aggregate_num``.
    """

    def __init__(self, optimizer: Optimizer):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"Updater needs an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self._states: dict = {}
        self.states_synced: dict = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index: Any, grad: Any, weight: Any) -> None:
        """Update ``weight`` in place from ``grad`` (or each of lists of them).

        Parameters
        ----------
        index : int, str, or list of them
            The weights' update indices.
        grad : ndarray, RowSparseArray, or list of them
            Gradients, one per index; a list may mix dense and row_sparse ones (see
            :meth:`Optimizer.update`).
        weight : ndarray or list of ndarray
            Weights, updated in place.
        """
        indices, grads, weights = _as_list(index), _as_list(grad), _as_list(weight)
        if not len(indices) == len(grads) == len(weights):
            raise ValueError(f"got {len(indices)} indices, {len(grads)} grads and "
                             f"{len(weights)} weights")
        opt, states, synced = self.optimizer, self._states, self.states_synced
        if weights:
            opt._set_current_context(context_of(weights[0]).device_id)
        if not all(map(synced.get, indices)):  # some state is new or still on the host
            for idx, w in zip(indices, weights):
                if not synced.get(idx, False):
                    states[idx] = (self.sync_state_context(states[idx], w) if idx in states
                                   else opt.create_state_multi_precision(idx, w))
                    synced[idx] = True
        if not self.aggregate_updates:
            for idx, g, w in zip(indices, grads, weights):
                opt.update_multi_precision(idx, w, g, states[idx])
            return
        size = int(min(opt.aggregate_num, len(indices))) or 1
        for start in range(0, len(indices), size):
            chunk = indices[start:start + size]
            opt.update_multi_precision(chunk, weights[start:start + size],
                                       grads[start:start + size], [states[i] for i in chunk])

    @property
    def states(self) -> dict:
        """Update index -> optimizer state (arrays, tuples of arrays, or None); NDArray views
        under the MXNet compatibility layer. Assigning a dict replaces every state."""
        return show(self._states)

    @states.setter
    def states(self, states: dict) -> None:
        self._states = {k: _plain_state(v) for k, v in dict(states).items()}

    def sync_state_context(self, state: Any, weight: Any) -> Any:
        """``state`` moved to the array module and device of ``weight``.

        Parameters
        ----------
        state : object
            None, an array, or (nested) tuples/lists of arrays.
        weight : ndarray
            The weight the state belongs to.

        Returns
        -------
        object
            The same structure, on the weight's device.
        """
        return _like(state, weight)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """Serialise every state (and the update counts) to bytes, without pickle.

        Parameters
        ----------
        dump_optimizer : bool, default False
            Also save the optimizer's registered name, settings and multipliers, so that
            :meth:`set_states` re-creates it.

        Returns
        -------
        bytes
            An ``.npz`` archive.
        """
        encoder = _Encoder()
        opt = self.optimizer
        meta: dict[str, Any] = {
            "format": _FORMAT, "version": _VERSION,
            "states": [[_check_key(k), encoder.encode(s)] for k, s in self._states.items()],
            "update_counts": [[int(dev), _pairs(counts)]
                              for dev, counts in opt._all_index_update_counts.items()],
            "num_update": int(opt.num_update),
        }
        if dump_optimizer:
            meta["optimizer"] = {"name": registered_name(type(opt)), "config": opt.get_config(),
                                 "idx2name": _pairs(opt.idx2name),
                                 "lr_mult": _pairs(opt.lr_mult), "wd_mult": _pairs(opt.wd_mult)}
        blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **{_META: blob}, **encoder.arrays)
        return buf.getvalue()

    def set_states(self, states: bytes) -> None:
        """Load what :meth:`get_states` produced.

        States come back as host arrays and move to each weight's device when that index is
        next updated. The update counts are restored into the optimizer; when the bytes hold
        an optimizer, it is re-created and replaces ``self.optimizer``.

        Parameters
        ----------
        states : bytes
            Output of :meth:`get_states`.
        """
        try:
            archive = np.load(io.BytesIO(states), allow_pickle=False)
            meta = json.loads(archive[_META].tobytes().decode("utf-8"))
        except Exception as err:
            raise ValueError("not optimizer states saved by raymod's Updater.get_states "
                             f"({type(err).__name__}: {err})") from err
        if meta.get("format") != _FORMAT or meta.get("version") != _VERSION:
            raise ValueError(f"unsupported optimizer state format {meta.get('format')!r} "
                             f"version {meta.get('version')!r}")
        with archive:
            arrays = {name: archive[name] for name in archive.files if name != _META}
        if "optimizer" in meta:
            self.optimizer = self._rebuild_optimizer(meta["optimizer"])
            self.aggregate_updates = self.optimizer.aggregate_num > 0
        self._states = {k: _decode(node, arrays) for k, node in meta["states"]}
        self.states_synced = dict.fromkeys(self._states, False)
        opt = self.optimizer
        opt._all_index_update_counts = {dev: {k: c for k, c in pairs}
                                        for dev, pairs in meta["update_counts"]}
        opt._index_update_count = opt._all_index_update_counts.setdefault(0, {})
        opt.num_update = meta["num_update"]

    @staticmethod
    def _rebuild_optimizer(saved: dict) -> Optimizer:
        klass = _REGISTRY.get(saved["name"])
        config = dict(saved["config"])
        config["param_idx2name"] = {k: v for k, v in saved["idx2name"]}
        opt = klass.from_config(config)
        opt.lr_mult = {k: v for k, v in saved["lr_mult"]}
        opt.wd_mult = {k: v for k, v in saved["wd_mult"]}
        return opt


def get_updater(optimizer: Optimizer) -> Updater:
    """An :class:`Updater` for ``optimizer``: a callable ``(index, grad, weight)``.

    Parameters
    ----------
    optimizer : Optimizer
        The optimizer to apply.

    Returns
    -------
    Updater
        A fresh updater with no states yet.
    """
    return Updater(optimizer)


def _plain_state(state: Any) -> Any:
    """A state with any NDArray views in it back as the plain arrays the optimizer runs on."""
    if isinstance(state, (tuple, list)):
        return type(state)(_plain_state(s) for s in state)
    return plain(state) if hasattr(state, "shape") else state
