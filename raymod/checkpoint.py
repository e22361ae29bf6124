"""Checkpoints in MXNet's file layout: ``prefix-symbol.json`` and ``prefix-%04d.params``.

The ``.params`` file holds every parameter as ``arg:<name>`` and every auxiliary state as
``aux:<name>`` (see :mod:`raymod.ndarray_io`), so checkpoints written by MXNet 1.x load
here and the other way round. Files are written to a temporary name and moved into
place, so a crash never leaves a half-written checkpoint.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Mapping

from . import ndarray_io
from .base import MXNetError
from .context import as_numpy
from .sparse import RowSparseArray, is_sparse
from .symbol import load as load_symbol
from .symbol.storage import variable_stype

_LOG = logging.getLogger(__name__)

__all__ = ["save_checkpoint", "load_checkpoint", "load_params", "params_dict",
           "split_params", "symbol_file", "params_file", "states_file"]


def symbol_file(prefix: str) -> str:
    """``prefix-symbol.json``."""
    return f"{prefix}-symbol.json"


def params_file(prefix: str, epoch: int) -> str:
    """``prefix-%04d.params``."""
    return "%s-%04d.params" % (prefix, epoch)


def states_file(prefix: str, epoch: int) -> str:
    """``prefix-%04d.states`` (optimizer states)."""
    return "%s-%04d.states" % (prefix, epoch)


def params_dict(arg_params: Mapping[str, Any] | None, aux_params: Mapping[str, Any] | None,
                symbol: Any = None) -> dict[str, Any]:
    """One dict with ``arg:``/``aux:`` prefixed names, as a ``.params`` file stores them.

    With ``symbol``, a parameter whose variable is row_sparse is stored as MXNet stores it:
    a row_sparse record holding every row (so MXNet loads it as a RowSparseNDArray).
    """
    tables = set() if symbol is None else {
        n.name for n in symbol.topo() if n.is_variable and variable_stype(n) == "row_sparse"}
    saved = {f"arg:{k}": RowSparseArray.full(as_numpy(v)) if k in tables else v
             for k, v in (arg_params or {}).items()}
    saved.update({f"aux:{k}": v for k, v in (aux_params or {}).items()})
    return saved


def split_params(saved: Mapping[str, Any] | list, source: str) -> tuple[dict, dict]:
    """``(arg_params, aux_params)`` from a loaded ``.params`` dict with prefixed names.

    Raises
    ------
    MXNetError
        If the file holds unnamed arrays or a name without an ``arg:``/``aux:`` prefix.
    """
    if not isinstance(saved, Mapping):
        if not saved:  # an empty dict is saved as an empty list
            return {}, {}
        raise MXNetError(f"{source} holds {len(saved)} unnamed arrays; a parameter file needs "
                         "names like 'arg:fc1_weight'")
    arg_params, aux_params = {}, {}
    for key, value in saved.items():
        kind, sep, name = key.partition(":")
        if not sep or kind not in ("arg", "aux"):
            raise MXNetError(f"invalid parameter file {source}: entry {key!r} does not start "
                             "with 'arg:' or 'aux:'")
        # a row_sparse record (MXNet's tables) becomes the dense host array raymod keeps
        (arg_params if kind == "arg" else aux_params)[name] = \
            value.todense() if is_sparse(value) else value
    return arg_params, aux_params


def save_checkpoint(prefix: str, epoch: int, symbol: Any, arg_params: Mapping[str, Any],
                    aux_params: Mapping[str, Any], remove_amp_cast: bool = True) -> None:
    """Save a model as ``prefix-symbol.json`` and ``prefix-%04d.params`` (``mx.model``).

    Parameters
    ----------
    prefix : str
        Path prefix of the files.
    epoch : int
        The number written into the params file name (``%04d``).
    symbol : Symbol or None
        The network; None skips the JSON file.
    arg_params : dict of str to array
        Parameters (numpy or cupy; saved from the host).
    aux_params : dict of str to array
        Auxiliary states (e.g. BatchNorm moving statistics).
    remove_amp_cast : bool, default True
        Accepted for MXNet compatibility; raymod graphs hold no AMP cast nodes.
    """
    if symbol is not None:
        ndarray_io.atomic_write(symbol_file(prefix), symbol.tojson())
    name = params_file(prefix, epoch)
    ndarray_io.save(name, params_dict(arg_params, aux_params, symbol))
    _LOG.info('Saved checkpoint to "%s"', name)


def load_params(prefix: str, epoch: int) -> tuple[dict, dict]:
    """``(arg_params, aux_params)`` from ``prefix-%04d.params``.

    Parameters
    ----------
    prefix : str
        Path prefix of the files.
    epoch : int
        Which params file.
    """
    name = params_file(prefix, epoch)
    return split_params(ndarray_io.load(name), repr(name))


def load_checkpoint(prefix: str, epoch: int) -> tuple[Any, dict, dict]:
    """Load a checkpoint written by :func:`save_checkpoint` or by MXNet.

    Parameters
    ----------
    prefix : str
        Path prefix of the files.
    epoch : int
        Which params file.

    Returns
    -------
    (Symbol, dict, dict)
        The network, its parameters and its auxiliary states (host numpy arrays).

    Examples
    --------
    >>> sym, arg_params, aux_params = rm.model.load_checkpoint('mlp', 3)
    """
    name = symbol_file(prefix)
    if not os.path.exists(name):
        raise FileNotFoundError(f"checkpoint symbol file {name!r} not found")
    symbol = load_symbol(name)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params
