"""Storage through an executor's plan: which values are sparse, and where ops need them dense.

Arguments are stored as the arrays bound to them are; each op then says what it makes of its
inputs' storage (:meth:`Op.infer_storage`), for its outputs and for its inputs' gradients.
An argument's gradient is row_sparse when the argument is, or when every op reading it gives
it a row_sparse gradient: the tables whose updates and pulls touch only a batch's rows. An
op that does not compute on a sparse input as it is (:meth:`Op.takes_sparse`) gets it
densified, with its sparse output gradients (MXNet's storage fallback); a one-time log line
names the op, since a dense copy of a table or a batch can be large.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from .storage import is_sparse

log = logging.getLogger(__name__)


def plan_storage(steps: list, arg_slots: list[int], arg_stypes: list[str],
                 nslots: int) -> tuple[list[str], list[str], list[bool]]:
    """Storage of every slot, of every argument's gradient, and which steps fall back.

    Parameters
    ----------
    steps : list of Step
        The plan's steps, in order.
    arg_slots, arg_stypes : list
        Each argument's slot and storage.
    nslots : int
        How many slots the plan has.

    Returns
    -------
    slot_stypes : list of str
    grad_stypes : list of str, one per argument
    fallback : list of bool, one per step
    """
    stypes = ["default"] * nslots
    for s, stype in zip(arg_slots, arg_stypes):
        stypes[s] = stype
    grad_votes: dict[int, list[str]] = {}
    fallback = []
    for st in steps:
        ins = [stypes[s] for s in st.inputs]
        if all(t == "default" for t in ins):
            outs, grads = st.op.infer_storage(ins)  # a sparse output from dense inputs
            fallback.append(False)                  # (cast_storage) still counts
        elif st.op.takes_sparse(ins):
            outs, grads = st.op.infer_storage(ins)
            fallback.append(False)
        else:
            outs, grads = st.op.infer_storage(["default"] * len(ins))
            fallback.append(True)
        for s, stype in zip(st.outputs, outs):
            stypes[s] = stype
        for s, stype in zip(st.inputs, grads):
            grad_votes.setdefault(s, []).append(stype)
    grad_stypes = []
    for s, own in zip(arg_slots, arg_stypes):
        votes = grad_votes.get(s, [])
        sparse = own == "row_sparse" or (votes and all(v == "row_sparse" for v in votes))
        grad_stypes.append("row_sparse" if sparse else "default")
    # an op that reads a slot whose gradient may come back sparse from another reader must
    # take sparse output gradients, or fall back
    sparse_grads = {s for s, votes in grad_votes.items() if "row_sparse" in votes}
    for i, st in enumerate(steps):
        if not fallback[i] and any(s in sparse_grads for s in st.outputs) \
                and not st.op.takes_sparse([stypes[s] for s in st.inputs]):
            fallback[i] = True
    return stypes, grad_stypes, fallback


def densifying(fn: Callable, what: str) -> Callable:
    """``fn`` (an op's forward or backward) called with its sparse arguments densified."""
    logged = []

    def run(xp, first: list, second: list, *rest: Any, **kwargs: Any):
        if any(is_sparse(v) for v in first) or any(is_sparse(v) for v in second):
            if not logged:
                logged.append(True)
                log.info("%s computes on dense copies of its sparse values (storage fallback)",
                         what)
            first = [v.todense() if is_sparse(v) else v for v in first]
            second = [v.todense() if is_sparse(v) else v for v in second]
        return fn(xp, first, second, *rest, **kwargs)
    return run
