"""Shape and dtype inference over a symbol graph.

Each op refines the partial shapes of its inputs and outputs (MXNet's convention: ``None`` is
an unknown shape, ``0`` an unknown dimension). Passes run forward then backward over the nodes
until nothing changes, so shapes flow both ways (an RNN's begin state learns its batch size
from the data it is added to).
"""
from __future__ import annotations

import ast
from typing import Any, Callable

import numpy as np

from ..base import MXNetError, ShapeError, names_list
from ..ops.base import DTYPE_CODES, known, merge_shape


def _given(symbol, args: tuple, kwargs: dict, what: str) -> dict[str, Any]:
    arguments = symbol.list_arguments()
    if args and kwargs:
        raise MXNetError(f"infer_{what}: give inputs by position or by name, not both")
    given = dict(zip(arguments, args)) if args else dict(kwargs)
    unknown = set(given) - set(symbol.list_inputs())
    if unknown:
        raise MXNetError(f"infer_{what}: no input named {names_list(unknown)}; "
                         f"inputs: {', '.join(symbol.list_inputs())}")
    return {k: v for k, v in given.items() if v is not None}


def _propagate(symbol, values: dict, node_rule: Callable, merge: Callable, what: str) -> dict:
    """Run ``node_rule`` over op nodes until fixed point; ``values`` maps entries to values."""
    nodes = [n for n in symbol.topo() if n.op is not None]
    for sweep in range(2 * len(nodes) + 2):
        changed = False
        for node in (nodes if sweep % 2 == 0 else reversed(nodes)):
            nargs = node.num_args()
            arg_entries = [(id(i), k) for i, k in node.inputs[:nargs]]
            aux_entries = [(id(i), k) for i, k in node.inputs[nargs:]]
            out_entries = [(id(node), k) for k in range(len(node.op.list_outputs()))]
            ins = [values.get(e) for e in arg_entries]
            outs = [values.get(e) for e in out_entries]
            try:
                new_in, new_out, new_aux = node_rule(node.op, ins, outs)
            except ShapeError as err:
                raise ShapeError(f"{node.op.name} '{node.name}': {err}") from None
            groups = ((arg_entries, new_in, node.op.list_arguments()),
                      (out_entries, new_out, node.op.list_outputs()),
                      (aux_entries, new_aux, node.op.list_auxiliary_states()))
            for entries, new_values, labels in groups:
                for entry, new, label in zip(entries, new_values, labels):
                    old = values.get(entry)
                    try:
                        merged = merge(old, new)
                    except ShapeError:
                        context = ", ".join(f"{n}={v}" for n, v in
                                            zip(node.op.list_arguments(), ins) if v is not None)
                        raise ShapeError(
                            f"{node.op.name} '{node.name}': {label} {what} is {old}, but "
                            f"{new} is inferred from its inputs ({context})") from None
                    # explicit None test: numpy 2 says dtype('float64') == None
                    if (old is None) != (merged is None) or merged != old:
                        values[entry] = merged
                        changed = True
        if not changed:
            break
    return values


def _collect(symbol, values: dict):
    aux_names = set(symbol.list_auxiliary_states())
    variables = [n for n in symbol.topo() if n.is_variable]
    args = [values.get((id(n), 0)) for n in variables if n.name not in aux_names]
    aux = [values.get((id(n), 0)) for n in variables if n.name in aux_names]
    outs = [values.get((id(n), k)) for n, k in symbol.outputs]
    return args, outs, aux


def shape_values(symbol, given: dict[str, tuple]) -> dict:
    """Inferred partial shapes of every graph entry ``(id(node), output)``."""
    values: dict = {}
    for node in symbol.topo():
        if not node.is_variable:
            continue
        shape = given.get(node.name)
        if shape is None and "__shape__" in node.attrs:
            shape = ast.literal_eval(node.attrs["__shape__"])
        if shape is not None:
            if not isinstance(shape, (tuple, list)) or not all(
                    isinstance(d, (int, np.integer)) for d in shape):
                raise TypeError(f"shape of {node.name!r} must be a tuple of ints, got {shape!r}")
            values[(id(node), 0)] = tuple(int(d) for d in shape)
    return _propagate(symbol, values, lambda op, i, o: op.infer_shape(i, o),
                      lambda a, b: merge_shape(a, b), "shape")


def infer_shapes(symbol, args: tuple, kwargs: dict, partial: bool):
    """Implementation of :meth:`Symbol.infer_shape` and ``infer_shape_partial``."""
    values = shape_values(symbol, _given(symbol, args, kwargs, "shape"))
    arg_s, out_s, aux_s = _collect(symbol, values)
    if partial:
        fix = lambda shapes: [tuple(s) if s is not None else () for s in shapes]  # noqa: E731
        return fix(arg_s), fix(out_s), fix(aux_s)
    if not all(known(s) for s in arg_s + out_s + aux_s):
        return None, None, None
    return arg_s, out_s, aux_s


def _merge_dtype(a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ShapeError(f"dtype {a} vs {b}")


def type_values(symbol, given: dict[str, Any]) -> dict:
    """Inferred dtypes of every graph entry."""
    values: dict = {}
    for node in symbol.topo():
        if not node.is_variable:
            continue
        dtype = given.get(node.name)
        if dtype is None and "__dtype__" in node.attrs:
            dtype = DTYPE_CODES[int(node.attrs["__dtype__"])]
        if dtype is not None:
            values[(id(node), 0)] = np.dtype(dtype)
    return _propagate(symbol, values, lambda op, i, o: op.infer_type(i, o), _merge_dtype, "dtype")


def infer_types(symbol, args: tuple, kwargs: dict):
    """Implementation of :meth:`Symbol.infer_type`: unknown dtypes come back as None."""
    values = type_values(symbol, _given(symbol, args, kwargs, "type"))
    return _collect(symbol, values)
