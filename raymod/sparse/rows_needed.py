"""Which rows of each row_sparse table a batch reads, found from the graph.

A worker pulls only those rows before it computes a slice. MXNet asks the user for them
(``sparse_row_id_fn``); for the graphs sparse models are made of, the graph already says:

- ``Embedding(data, table)``: the ids in ``data`` (clipped to the table, as the op does);
- ``dot(csr, table)``, also through zero-keeping unary ops on the csr (``square(x)``): the
  csr's column ids;
- ``_square_sum(table, axis=1)`` feeding such a ``dot``: that dot's columns.

A table read any other way needs every row (``None``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..symbol.storage import variable_stype
from .csr import CSRArray

# name -> function of the batch's inputs ({name: array}) giving the row ids, or None
RowFinder = Callable[[dict], Any]


def row_finders(symbol: Any) -> dict[str, RowFinder | None]:
    """For each row_sparse variable of ``symbol``, how to find the rows a batch reads."""
    nodes = list(symbol.topo())
    readers: dict[int, list[tuple[Any, int]]] = {}
    for node in nodes:
        if node.op is not None:
            for pos, (src, _) in enumerate(node.inputs[:node.num_args()]):
                readers.setdefault(id(src), []).append((node, pos))
    out = {}
    for node in nodes:
        if node.is_variable and variable_stype(node) == "row_sparse":
            out[node.name] = _combined([_finder(reader, pos, readers)
                                        for reader, pos in readers.get(id(node), [])])
    return out


def _combined(finders: list) -> RowFinder | None:
    if not finders or any(f is None for f in finders):
        return None
    if len(finders) == 1:
        return finders[0]
    return lambda inputs: np.unique(np.concatenate([np.asarray(f(inputs)).reshape(-1)
                                                    for f in finders]))


def _finder(node: Any, pos: int, readers: dict) -> RowFinder | None:
    name = node.op.name
    if name in ("Embedding", "_contrib_SparseEmbedding") and pos == 1:
        data = _variable(node.inputs[0][0])
        if data is None:
            return None
        top = node.op.input_dim - 1
        return lambda inputs: np.clip(np.asarray(inputs[data]).astype(np.int64), 0, top)
    if name == "dot" and pos == 1 and not node.op.transpose_a and not node.op.transpose_b:
        return _csr_columns(node.inputs[0][0])
    if name == "_square_sum" and tuple(node.op.axis or ()) in ((1,), (-1,)):
        return _combined([_finder(reader, p, readers) for reader, p in readers.get(id(node), [])])
    return None


def _csr_columns(node: Any) -> RowFinder | None:
    """The columns of the csr ``node`` computes: a csr variable, through unary ops that keep
    zeros."""
    while node.op is not None and getattr(node.op, "keeps_zero", False):
        node = node.inputs[0][0]
    if not node.is_variable or variable_stype(node) != "csr":
        return None
    name = node.name
    return lambda inputs: _columns(inputs[name])


def _columns(x: Any):
    if not isinstance(x, CSRArray):
        raise TypeError(f"expected a csr batch, got {type(x).__name__}")
    return x.indices


def _variable(node: Any) -> str | None:
    return node.name if node.is_variable else None
