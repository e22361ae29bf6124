"""``export_model``: a raymod (or MXNet 1.x) network and its parameters as an ONNX file."""
from __future__ import annotations

import logging
import os
from typing import Any, Sequence

import numpy as np

from ..base import MXNetError, names_list
from ..symbol.infer import shape_values, type_values
from .graph import (CONVERTERS, OPSET, BatchDim, DynamicBatchError, GraphBuilder, NodeContext,
                    UnsupportedOperatorError)

__all__ = ["export_model", "get_operator_support", "data_inputs"]

_log = logging.getLogger(__name__)


def get_operator_support() -> list[str]:
    """Names of the raymod operators :func:`export_model` converts (aliases included)."""
    from ..ops import OPS

    return sorted(n for n in OPS.names() if OPS.get(n).name in CONVERTERS)


def _load_symbol(sym: Any):
    from ..symbol import Symbol, load

    if isinstance(sym, (str, os.PathLike)):
        if not os.path.isfile(sym):
            raise ValueError(f"export_model: sym file {os.fspath(sym)!r} does not exist")
        return load(os.fspath(sym))
    if not isinstance(sym, Symbol):
        raise TypeError(f"export_model: sym must be a Symbol or a path to a -symbol.json "
                        f"file, got {type(sym).__name__}")
    return sym


def _load_params(params: Any) -> dict[str, np.ndarray]:
    from .. import ndarray_io

    if isinstance(params, (str, os.PathLike)):
        if not os.path.isfile(params):
            raise ValueError(f"export_model: params file {os.fspath(params)!r} does not exist")
        params = ndarray_io.load(os.fspath(params))
        if not isinstance(params, dict):
            raise ValueError("export_model: the params file holds an unnamed array list; "
                             "expected named arrays (arg:NAME / aux:NAME)")
    elif isinstance(params, (list, tuple)):
        if len(params) != 2 or not all(isinstance(p, dict) for p in params):
            raise TypeError("export_model: params given as a list must be [arg_params, "
                            f"aux_params] (two dicts), got {len(params)} item(s)")
        params = {**params[0], **params[1]}
    elif not isinstance(params, dict):
        raise TypeError(f"export_model: params must be a dict, [arg_params, aux_params] or "
                        f"a .params path, got {type(params).__name__}")
    out = {}
    for key, value in params.items():
        name = key.split(":", 1)[1] if key.startswith(("arg:", "aux:")) else key
        out[name] = np.asarray(value)   # CuPy arrays are not taken: ONNX files live on host
    return out


def _label_only(sym) -> set[int]:
    """Ids of the nodes whose values reach nothing but loss-head labels (the label variables
    and, say, a Reshape of them): the inference graph leaves them out."""
    users: dict[int, list] = {}
    for node in sym.topo():
        if node.op is None:
            continue
        names = node.op.list_arguments()
        for i, (src, _) in enumerate(node.inputs):
            users.setdefault(id(src), []).append((node, names[i] if i < len(names) else None))
    heads = {id(node) for node, _ in sym.outputs}
    only: set[int] = set()
    for node in reversed(sym.topo()):
        use = users.get(id(node), [])
        if use and id(node) not in heads and all(
                (user.op.is_loss and arg == "label") or id(user) in only for user, arg in use):
            only.add(id(node))
    return only


def data_inputs(sym, params: Any = ()) -> list[str]:
    """The inputs ``export_model``'s ``in_shapes`` are given for, in order: the arguments of
    ``sym`` that are neither in ``params`` nor read only as loss-head labels."""
    only = _label_only(sym)
    labels = {n.name for n in sym.topo() if n.is_variable and id(n) in only}
    return [n for n in sym.list_arguments() if n not in params and n not in labels]


def _shape_list(in_shapes: Any, data_names: list[str]) -> list[tuple[int, ...]]:
    if in_shapes is None or isinstance(in_shapes, (str, bytes)) or not hasattr(in_shapes,
                                                                               "__len__"):
        raise TypeError(f"export_model: in_shapes must be a list of shape tuples, one per "
                        f"input ({', '.join(data_names)}), got {in_shapes!r}")
    if len(in_shapes) > 0 and all(isinstance(d, (int, np.integer)) for d in in_shapes):
        in_shapes = [in_shapes]   # one bare shape for a one-input network
    if len(in_shapes) != len(data_names):
        raise ValueError(f"export_model: in_shapes has {len(in_shapes)} shape(s), the "
                         f"network has {len(data_names)} input(s) ({', '.join(data_names)})")
    shapes = []
    for name, shape in zip(data_names, in_shapes):
        if not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
            raise ValueError(f"export_model: the shape of input {name!r} must be positive "
                             f"ints, got {tuple(shape)!r}")
        shapes.append(tuple(int(d) for d in shape))
    return shapes


def _type_list(in_types: Any, data_names: list[str]) -> list[np.dtype]:
    types = list(in_types) if isinstance(in_types, (list, tuple)) else \
        [in_types] * len(data_names)
    if len(types) != len(data_names):
        raise ValueError(f"export_model: in_types has {len(types)} dtype(s), the network "
                         f"has {len(data_names)} input(s) ({', '.join(data_names)})")
    try:
        return [np.dtype(t) for t in types]
    except TypeError as err:
        raise TypeError(f"export_model: in_types must be numpy dtypes, got {in_types!r} "
                        f"({err})") from None


def _batch_axes(dynamic_input_shapes: Any, data_names: list[str],
                shapes: list[tuple[int, ...]]) -> list[int | None]:
    """Each input's batch axis for ``dynamic=True``: the ``None`` of its entry in
    ``dynamic_input_shapes`` (no ``None``: the input has no batch axis), axis 0 without it."""
    if dynamic_input_shapes is None:
        return [0] * len(data_names)
    if isinstance(dynamic_input_shapes, (str, bytes)) or not hasattr(dynamic_input_shapes,
                                                                     "__len__"):
        raise TypeError(f"export_model: dynamic_input_shapes must be a list of shapes, one "
                        f"per input ({', '.join(data_names)}), got {dynamic_input_shapes!r}")
    given = list(dynamic_input_shapes)
    if given and all(d is None or isinstance(d, (int, np.integer)) for d in given):
        given = [given]   # one bare shape for a one-input network
    if len(given) != len(data_names):
        raise ValueError(f"export_model: dynamic_input_shapes has {len(given)} shape(s), the "
                         f"network has {len(data_names)} input(s) ({', '.join(data_names)})")
    axes: list[int | None] = []
    for name, dyn, shape in zip(data_names, given, shapes):
        dyn = tuple(dyn)
        free = [i for i, d in enumerate(dyn) if d is None]
        fixed_ok = all(d is None or d == s for d, s in zip(dyn, shape))
        if len(dyn) != len(shape) or not fixed_ok or len(free) > 1:
            raise ValueError(f"export_model: dynamic_input_shapes entry {dyn!r} of input "
                             f"{name!r} must be its in_shapes {shape!r} with None at the batch "
                             f"axis (at most one None: only the batch size is dynamic)")
        axes.append(free[0] if free else None)
    return axes


def _probe_batches(batch: int) -> tuple[int, int]:
    """Two other batch sizes to infer shapes at: a dimension that follows the batch is then
    fitted as ``scale * N + offset`` and checked on the third point."""
    return batch + 1, 2 * batch + 3


def _shapes_at(symbol, given_shapes: dict, batched: dict[str, int], size: int) -> dict:
    """Shapes inferred with every batched input's batch axis set to ``size``."""
    given = dict(given_shapes)
    for name, axis in batched.items():
        shape = list(given[name])
        shape[axis] = size
        given[name] = tuple(shape)
    return shape_values(symbol, given)


def _fixed_batch(size: int, other: int, err: Exception) -> DynamicBatchError:
    return DynamicBatchError(
        f"ONNX export with dynamic=True: the network does not take a batch of {other} (it "
        f"is exported at {size}), so its batch size is fixed: {err}. Export with "
        f"dynamic=False, or say which inputs are batched with dynamic_input_shapes")


def _batch_step(symbol, given_shapes: dict, batched: dict[str, int], size: int) -> int:
    """How many entries of the inputs' batch axis one batch item takes: 1, unless the
    network takes only whole multiples of some step there (a mean and a log-variance
    stacked along axis 0 and split apart, say); then the batch counts those steps."""
    first = None
    for step in range(1, min(size, 16) + 1):
        if size % step:
            continue
        try:
            _shapes_at(symbol, given_shapes, batched, size + step)
            return step
        except (MXNetError, ValueError) as err:
            first = first or err
    raise _fixed_batch(size, size + 1, first)


def _batch_dims(symbol, given_shapes: dict, batched: dict[str, int], batch: int, step: int,
                shape_of: dict) -> dict:
    """Every graph entry's shape with the dims that follow the batch as :class:`BatchDim`.

    Shapes are inferred again at two other batch sizes (each batched input's batch axis
    changed, to ``step`` times the batch); a graph that cannot take them fixes its batch
    somewhere, and the error of raymod's shape inference names the operator. Batch 1 is
    inferred too, where squeeze without an axis drops the batch axis.
    """
    probes = _probe_batches(batch)
    probed = []
    for other in probes:
        try:
            probed.append(_shapes_at(symbol, given_shapes, batched, other * step))
        except (MXNetError, ValueError) as err:
            raise _fixed_batch(batch * step, other * step, err) from None
    try:   # a network that cannot take batch 1 (slicing the batch axis) still exports
        single = [(1, _shapes_at(symbol, given_shapes, batched, step))] if batch != 1 else []
    except (MXNetError, ValueError):
        single = []
    seen = list(zip(probes, probed)) + single
    nodes = list(symbol.topo())
    owner = {(id(n), k): n for n in nodes
             for k in range(len(n.output_names()) if n.op is not None else 1)}

    def rank_of(values: dict, key) -> int | None:
        shape = values.get(key)
        return None if shape is None else len(shape)

    varies = {key for key, shape in shape_of.items() if shape is not None and any(
        rank_of(p, key) not in (None, len(shape)) for _, p in seen)}
    _check_rank_changes(nodes, owner, varies, shape_of, seen)
    dims = {}
    for key, shape in shape_of.items():
        if shape is None:   # an entry shape inference left open (a dropped label, say)
            dims[key] = None
            continue
        out: list = []
        for i, d in enumerate(shape):
            v1, v2 = (tuple(p.get(key) or ())[i:i + 1] or (None,) for p in probed)
            v1, v2 = v1[0], v2[0]
            if v1 == d and v2 == d:
                out.append(int(d))
                continue
            scale = (v1 - d) // (probes[0] - batch) if v1 is not None else 0
            dim = BatchDim(scale, d - scale * batch)   # probes[0] is batch + 1
            if scale == 0 or dim.at(probes[0]) != v1 or dim.at(probes[1]) != v2:
                node = owner[key]
                what = f"operator {node.op.name}" if node.op is not None else "variable"
                raise DynamicBatchError(
                    f"ONNX export with dynamic=True: {what} (node '{node.name}') output "
                    f"{key[1]} has dimension {i} = {d}, {v1}, {v2} at batch {batch}, "
                    f"{probes[0]}, {probes[1]}: not a whole multiple of the batch plus a "
                    f"constant, which ONNX cannot compute; export with dynamic=False")
            out.append(dim)
        dims[key] = tuple(out)
    return dims


def _check_rank_changes(nodes: list, owner: dict, varies: set, shape_of: dict,
                        seen: list[tuple[int, dict]]) -> None:
    """Refuse a graph where a value's rank changes with the batch (squeeze without an axis
    drops a batch axis of 1 too): an ONNX graph holds one rank for it."""
    if not varies:
        return
    order = {id(n): i for i, n in enumerate(nodes)}
    first = min(varies, key=lambda key: (order[key[0]], key[1]))   # where it starts
    node = owner[first]
    at, other = next((b, p[first]) for b, p in seen if p.get(first) is not None
                     and len(p[first]) != len(shape_of[first]))
    squeeze = node.op is not None and node.op.name == "squeeze"
    why = ("squeeze without an axis drops the batch axis too when the batch is 1; give it "
           "an axis" if squeeze else "an ONNX graph holds one rank for each value")
    what = f"operator {node.op.name}" if node.op is not None else "variable"
    raise DynamicBatchError(
        f"ONNX export with dynamic=True: {what} (node '{node.name}') changes the rank of "
        f"its output with the batch size ({shape_of[first]} at the exported batch, {other} "
        f"at batch {at}): {why}; export with dynamic=False")


def _output_name(name: str) -> str:
    """MXNet's exported output names: ``fc1_output`` -> ``fc1``, ``split_output1`` ->
    ``split1``."""
    if name.endswith("_output"):
        return name[:-len("_output")]
    stem, _, tail = name.rpartition("_output")
    return stem + tail if stem and tail.isdigit() else name


def export_model(sym: Any, params: Any, in_shapes: Sequence[Sequence[int]] | None = None,
                 in_types: Any = np.float32, onnx_file_path: str = "model.onnx",
                 verbose: bool = False, dynamic: bool = False,
                 dynamic_input_shapes: Sequence[Sequence[int | None]] | None = None) -> str:
    """Export a network and its parameters as an ONNX model file (opset 13).

    The inference graph is exported: Dropout is the identity, BatchNorm uses its moving
    statistics, loss heads become their forward (SoftmaxOutput a softmax) and their label
    inputs are dropped. Shapes are resolved with ``in_shapes`` (MXNet's special Reshape codes
    become plain shapes).

    Parameters
    ----------
    sym : Symbol or str
        The network, or the path of its ``-symbol.json`` file.
    params : dict, [dict, dict] or str
        Parameters and auxiliary states: one dict (names plain or ``arg:`` / ``aux:``
        prefixed, as in a ``.params`` file), ``[arg_params, aux_params]``, or the path of a
        ``.params`` file.
    in_shapes : list of tuple
        One shape per data input, in the order of ``sym.list_arguments()`` (parameters and
        loss-head labels left out), e.g. ``[(1, 3, 224, 224)]``.
    in_types : dtype or list of dtype
        The inputs' element types (default float32); parameters are cast to the dtype
        inferred for them.
    onnx_file_path : str
        Where to write the model.
    verbose : bool
        Log each converted node and the graph at the end (``logging`` INFO).
    dynamic : bool
        Let the model run at any batch size: the batch axis of every input is the symbol
        ``N`` (the first axis, unless ``dynamic_input_shapes`` says otherwise), and every
        shape that follows it (RNN begin states, Reshape targets, broadcast shapes, filled
        constants, index bounds, the outputs' dims) is computed from the input at run time.
        The other dimensions stay those of ``in_shapes``.
    dynamic_input_shapes : list of tuple, optional
        With ``dynamic``: each input's ``in_shapes`` entry with ``None`` at its batch axis,
        e.g. ``[(35, None, 200)]`` for time-major data; an entry without ``None`` is an input
        that has no batch axis (a fixed table, an index list). At most one ``None`` per
        input: only the batch is dynamic. Ignored (with a warning) without ``dynamic``.

    Returns
    -------
    str
        ``onnx_file_path``.

    Raises
    ------
    UnsupportedOperatorError
        An operator has no ONNX form (the message names the operator and its node).
    DynamicBatchError
        With ``dynamic``: the network fixes its batch size (an operator's attribute or a
        variable's declared shape holds it), or a dimension follows the batch in a way ONNX
        cannot compute; a subclass of ``UnsupportedOperatorError``.

    Examples
    --------
    >>> sym, arg, aux = rm.model.load_checkpoint('lenet', 10)
    >>> rm.onnx.export_model(sym, [arg, aux], [(1, 1, 28, 28)], onnx_file_path='lenet.onnx')
    'lenet.onnx'
    """
    try:
        import onnx
        from onnx import helper
    except ImportError as err:
        raise ImportError("rm.onnx.export_model needs the onnx package: "
                          "pip install 'raymod[onnx]'") from err
    symbol = _load_symbol(sym)
    values = _load_params(params)
    inputs = set(symbol.list_inputs())
    values = {k: v for k, v in values.items() if k in inputs}
    skip = _label_only(symbol)
    _check_convertible(symbol, skip)
    data_names = data_inputs(symbol, values)
    missing_aux = [n for n in symbol.list_auxiliary_states() if n not in values]
    if missing_aux:
        raise ValueError(f"export_model: params lack the auxiliary state(s) "
                         f"{names_list(missing_aux)}")
    shapes = _shape_list(in_shapes, data_names)
    types = _type_list(in_types, data_names)
    if dynamic_input_shapes is not None and not dynamic:
        _log.warning("export_model: dynamic_input_shapes is ignored without dynamic=True")
    axes = _batch_axes(dynamic_input_shapes, data_names, shapes) if dynamic else \
        [None] * len(data_names)
    batched = {n: a for n, a in zip(data_names, axes) if a is not None}
    sizes = {n: shapes[data_names.index(n)][a] for n, a in batched.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"export_model: with dynamic=True the inputs' batch dimensions must "
                         f"agree, got {', '.join(f'{n}: {b}' for n, b in sizes.items())} "
                         f"(mark an input without a batch axis by an entry without None in "
                         f"dynamic_input_shapes)")

    given_shapes = {**{k: v.shape for k, v in values.items()}, **dict(zip(data_names, shapes))}
    # parameters take the dtype inferred from the inputs (cast on export)
    given_types = dict(zip(data_names, types))
    shape_of = shape_values(symbol, given_shapes)
    dtype_of = type_values(symbol, given_types)
    dims, step = None, 1
    if batched:
        size = next(iter(sizes.values()))
        step = _batch_step(symbol, given_shapes, batched, size)
        dims = _batch_dims(symbol, given_shapes, batched, size // step, step, shape_of)
    builder = GraphBuilder(values, shape_of, dtype_of, dynamic, dims)
    param_names = set(values)
    for node in symbol.topo():
        if node.is_variable:
            builder.names[(id(node), 0)] = builder.fresh(node.name)
            continue
        for k, out in enumerate(node.output_names()):
            single = len(node.op.list_outputs()) == 1
            builder.names[(id(node), k)] = builder.fresh(node.name if single else out)
    var_nodes = {n.name: n for n in symbol.topo() if n.is_variable}
    if batched:   # the runtime batch is read off the first batched input
        first = next(iter(batched))
        builder.batch_source = (builder.names[(id(var_nodes[first]), 0)], batched[first],
                                step)
    for node in symbol.topo():
        if node.is_variable or id(node) in skip:
            continue
        if verbose:
            _log.info("ONNX export: converting %s '%s'", node.op.name, node.name)
        CONVERTERS[node.op.name](NodeContext(builder, node, param_names))

    def info(name, dtype, shape):
        # a dim that follows the batch is symbolic: N, or its formula (say 4*N)
        dims = [str(d) if isinstance(d, BatchDim) else d for d in shape]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(
            np.dtype(dtype)), dims)

    graph_inputs = [info(builder.names[(id(var_nodes[n]), 0)], t,
                         builder.dims[(id(var_nodes[n]), 0)])
                    for n, t in zip(data_names, types)]
    graph_outputs = []
    for (node, k), name in zip(symbol.outputs, symbol.list_outputs()):
        value = builder.names[(id(node), k)]
        out = _output_name(name)
        if out != value or out in {o.name for o in graph_outputs}:
            out = builder.add("Identity", [value], builder.fresh(out), out)
        graph_outputs.append(info(out, dtype_of.get((id(node), k)) or np.float32,
                                  builder.dims[(id(node), k)]))
    graph = helper.make_graph(builder.nodes, "raymod_exported_model", graph_inputs,
                              graph_outputs, initializer=list(builder.initializers.values()))
    model = helper.make_model(graph, producer_name="raymod",
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 8)   # readable by older onnxruntime releases
    if verbose:
        _log.info("ONNX export:\n%s", helper.printable_graph(graph))
    payload = model.SerializeToString()   # once: protobuf copies of big weights are slow
    onnx.checker.check_model(payload)
    with open(onnx_file_path, "wb") as f:
        f.write(payload)
    return onnx_file_path


def _check_convertible(symbol, skip: set[int]) -> None:
    """Fail before any work when an operator has no converter, naming the first one."""
    for node in symbol.topo():
        if node.op is not None and id(node) not in skip and node.op.name not in CONVERTERS:
            raise UnsupportedOperatorError(
                f"ONNX export: operator {node.op.name} (node '{node.name}') has no ONNX "
                f"conversion; supported: see rm.onnx.get_operator_support()")
