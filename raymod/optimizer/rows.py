"""Row_sparse gradients: an optimizer's dense rule run on just the rows a gradient holds.

MXNet's lazy (``lazy_update=True``) and sparse updates change, for a ``row_sparse`` gradient,
only the rows the gradient holds: the weight's and every state's. For SGD, Adam, AdaGrad and
Ftrl the per-row formula of those kernels is the dense formula itself, so here the dense rule
is written once and :func:`update_rows` runs it on the gathered rows, then scatters them back.
"""
from __future__ import annotations

from typing import Any, Callable

from ..sparse.row_sparse import RowSparseArray

__all__ = ["is_row_sparse", "densify", "update_rows"]

#: a dense update rule: ``rule(weight, grad, state)`` changes weight and state in place
Rule = Callable[[Any, Any, Any], None]


def is_row_sparse(grad: Any) -> bool:
    """Whether ``grad`` is a :class:`~raymod.sparse.RowSparseArray`."""
    return isinstance(grad, RowSparseArray)


def densify(grad: Any) -> Any:
    """``grad`` as a dense array: ``grad.todense()`` for a row_sparse one, else ``grad``."""
    return grad.todense() if isinstance(grad, RowSparseArray) else grad


def check_shape(grad: RowSparseArray, weight: Any) -> None:
    """ValueError unless the row_sparse ``grad`` has ``weight``'s shape.

    The dense path would fail on a mismatch by itself; the row path must check, since a
    held row of shape ``(1, k)`` would broadcast silently onto a weight row of ``(m, k)``.
    """
    if tuple(grad.shape) != tuple(weight.shape):
        raise ValueError(f"row_sparse gradient of shape {tuple(grad.shape)} for a weight of "
                         f"shape {tuple(weight.shape)}")


def update_rows(rule: Rule, weight: Any, grad: RowSparseArray, state: Any) -> None:
    """Run ``rule`` on the rows ``grad.indices`` of ``weight`` and ``state`` only.

    The rows are gathered (copies), updated by ``rule(rows_of_weight, grad.data,
    rows_of_state)`` and written back; every other row of the weight and states is left
    bit-identical. A gradient holding no rows changes nothing, as MXNet's lazy kernels return
    early then; one holding every row runs ``rule`` on the arrays themselves.

    Parameters
    ----------
    rule : callable
        ``rule(weight, grad, state)``: the optimizer's dense update, in place.
    weight : ndarray
        The dense weight (numpy or cupy), changed in place.
    grad : RowSparseArray
        The gradient; ``grad.indices`` are ascending and unique, so the scatter is exact.
    state : None, ndarray, or tuple/list of them
        The dense states, each of the weight's shape, changed in place.
    """
    check_shape(grad, weight)
    rows = grad.indices
    if rows.shape[0] == 0:
        return
    if grad.is_full:  # every row: no gather/scatter needed (indices are then 0..n-1)
        rule(weight, grad.data, state)
        return
    weight_rows = weight[rows]
    state_rows = _take(state, rows)
    rule(weight_rows, grad.data, state_rows)
    weight[rows] = weight_rows
    _put(state, state_rows, rows)


def _take(state: Any, rows: Any) -> Any:
    """Copies of the rows ``rows`` of every array in ``state`` (same nesting, None kept)."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(_take(s, rows) for s in state)
    return state[rows]


def _put(state: Any, state_rows: Any, rows: Any) -> None:
    """Write what :func:`_take` gathered back into the rows ``rows`` of ``state``."""
    if state is None:
        return
    if isinstance(state, (tuple, list)):
        for s, r in zip(state, state_rows):
            _put(s, r, rows)
        return
    state[rows] = state_rows
