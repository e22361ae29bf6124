"""``Symbol``: an immutable graph of op nodes and variables, with MXNet 1.x's API."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from ..base import MXNetError, names_list
from ..ops.base import CODE_OF_DTYPE, OPS, Op, format_attr
from . import naming
from .storage import STYPE_CODES, check_stype


class Node:
    """One graph node: an op applied to inputs, or a variable (``op is None``)."""

    __slots__ = ("op", "name", "attrs", "inputs", "__weakref__")

    def __init__(self, op: Op | None, name: str, attrs: dict[str, str],
                 inputs: Sequence[tuple["Node", int]] = ()):
        self.op = op
        self.name = name
        self.attrs = attrs
        self.inputs = tuple(inputs)

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def num_args(self) -> int:
        """How many of ``inputs`` are arguments (the rest are auxiliary states)."""
        return len(self.op.list_arguments()) if self.op else 0

    def output_names(self) -> list[str]:
        if self.op is None:
            return [self.name]
        return [f"{self.name}_{o}" for o in self.op.list_outputs()]

    def __repr__(self) -> str:
        return f"Node({self.op.name if self.op else 'null'}, {self.name!r})"


Entry = tuple[Node, int]


def topological_order(heads: Sequence[Entry]) -> list[Node]:
    """Nodes reachable from ``heads``, inputs before users, in MXNet's DFS order."""
    order: list[Node] = []
    seen: set[int] = set()
    for head, _ in heads:
        stack = [(head, 0)]
        while stack:
            node, i = stack.pop()
            if id(node) in seen:
                continue
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i][0]
                if id(child) not in seen:
                    stack.append((child, 0))
            else:
                seen.add(id(node))
                order.append(node)
    return order


class Symbol:
    """A symbolic expression: one or more outputs of a graph of operators.

    Build symbols with :func:`Variable` and the operator functions of ``rm.sym``
    (``rm.sym.FullyConnected(data, num_hidden=10)``), combine them with arithmetic and
    :func:`Group`, bind them to arrays with :meth:`simple_bind` / :meth:`bind`.
    Symbols are immutable; composing returns new symbols.
    """

    __slots__ = ("_outputs", "_topo", "__weakref__")

    def __init__(self, outputs: Sequence[Entry]):
        self._outputs: tuple[Entry, ...] = tuple(outputs)
        self._topo: list[Node] | None = None

    # --- graph ------------------------------------------------------------------------------
    def topo(self) -> list[Node]:
        """Every node of the graph in topological order (cached)."""
        if self._topo is None:
            self._topo = topological_order(self._outputs)
        return self._topo

    @property
    def outputs(self) -> tuple[Entry, ...]:
        return self._outputs

    def _aux_nodes(self) -> set[int]:
        aux = set()
        for node in self.topo():
            if node.op is not None:
                for inp, _ in node.inputs[node.num_args():]:
                    aux.add(id(inp))
        return aux

    @property
    def name(self) -> str | None:
        """The name of the only output's node; None for a group."""
        return self._outputs[0][0].name if len(self._outputs) == 1 else None

    def list_arguments(self) -> list[str]:
        """Names of the variables that are arguments (data, labels, weights), in graph order."""
        aux = self._aux_nodes()
        return [n.name for n in self.topo() if n.is_variable and id(n) not in aux]

    def list_auxiliary_states(self) -> list[str]:
        """Names of the variables that hold auxiliary states (BatchNorm's moving stats)."""
        aux = self._aux_nodes()
        return [n.name for n in self.topo() if n.is_variable and id(n) in aux]

    def list_inputs(self) -> list[str]:
        """Names of every variable: arguments and auxiliary states, in graph order."""
        return [n.name for n in self.topo() if n.is_variable]

    def list_outputs(self) -> list[str]:
        """Names of the outputs, ``<node>_<output>`` for op nodes (``fc1_output``)."""
        return [node.output_names()[i] for node, i in self._outputs]

    def get_internals(self) -> "Symbol":
        """A group of every output of every node, variables included."""
        entries = []
        for node in self.topo():
            count = 1 if node.op is None else node.op.num_visible_outputs()
            entries.extend((node, i) for i in range(count))
        return Symbol(entries)

    def get_children(self) -> "Symbol | None":
        """A group of the inputs of this symbol's output node(s); None for a variable."""
        entries = [e for node, _ in self._outputs for e in node.inputs]
        return Symbol(entries) if entries else None

    def __len__(self) -> int:
        return len(self._outputs)

    def __iter__(self) -> Iterator["Symbol"]:
        return (Symbol([e]) for e in self._outputs)

    def __getitem__(self, index: int | str) -> "Symbol":
        if isinstance(index, str):
            names = self.list_outputs()
            matches = [i for i, n in enumerate(names) if n == index]
            if not matches:
                raise ValueError(f"no output named {index!r}; outputs: {names_list(names)}")
            if len(matches) > 1:
                raise ValueError(f"more than one output is named {index!r}")
            index = matches[0]
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"Symbol index must be an int or str, got {type(index).__name__}")
        if not -len(self) <= index < len(self):
            raise IndexError(f"output index {index} out of range for {len(self)} output(s)")
        return Symbol([self._outputs[index]])

    # --- attributes ---------------------------------------------------------------------------
    def _single_node(self, what: str) -> Node:
        if len(self._outputs) != 1:
            raise MXNetError(f"{what} needs a symbol with one output, this one has {len(self)}")
        return self._outputs[0][0]

    def attr(self, key: str) -> str | None:
        """The attribute ``key`` of this symbol's node (``lr_mult`` finds ``__lr_mult__``)."""
        node = self._single_node("attr")
        found = _node_attrs(node)
        return found.get(key, found.get(naming.hidden_key(key)))

    def list_attr(self, recursive: bool = False) -> dict[str, str]:
        """This node's attributes (recursive=True is MXNet's deprecated alias of attr_dict)."""
        if recursive:
            raise DeprecationWarning("list_attr(recursive=True) is deprecated; use attr_dict()")
        return dict(_node_attrs(self._single_node("list_attr")))

    def attr_dict(self) -> dict[str, dict[str, str]]:
        """``{node name: {key: value}}`` for every node that has attributes."""
        return {n.name: _node_attrs(n) for n in self.topo() if _node_attrs(n)}

    def _set_attr(self, **attrs: str) -> None:
        """Set attributes on this symbol's node in place (MXNet's escape hatch)."""
        node = self._single_node("_set_attr")
        for key, value in attrs.items():
            if not isinstance(value, str):
                raise ValueError(f"attribute {key!r} must be a str, got {value!r}")
            node.attrs[naming.hidden_key(key)] = value

    # --- composition --------------------------------------------------------------------------
    def __call__(self, *args: "Symbol", name: str | None = None, **kwargs: "Symbol") -> "Symbol":
        """Substitute free variables, by position (argument order) or by name."""
        return self._compose(*args, **kwargs)

    def _compose(self, *args: "Symbol", **kwargs: "Symbol") -> "Symbol":
        arguments = self.list_arguments()
        if len(args) > len(arguments):
            raise MXNetError(f"compose: {len(args)} positional symbols for "
                             f"{len(arguments)} arguments")
        table = dict(zip(arguments, args))
        unknown = set(kwargs) - set(self.list_inputs())
        if unknown:
            raise MXNetError(f"compose: no variable named {names_list(unknown)}; "
                             f"variables: {names_list(self.list_inputs())}")
        table.update(kwargs)
        for key, value in table.items():
            if not isinstance(value, Symbol) or len(value) != 1:
                raise TypeError(f"compose: {key!r} must be a single-output Symbol")
        # a substituted variable maps to the given entry; a rebuilt node to (node, idx)
        remap: dict[int, Any] = {}

        def lookup(entry: Entry) -> Entry:
            node, idx = entry
            new = remap.get(id(node))
            if new is None:
                return entry
            return new if isinstance(new, tuple) else (new, idx)

        for node in self.topo():
            if node.is_variable and node.name in table:
                remap[id(node)] = table[node.name].outputs[0]
            elif any(id(i) in remap for i, _ in node.inputs):
                remap[id(node)] = Node(node.op, node.name, dict(node.attrs),
                                       [lookup(e) for e in node.inputs])
        return Symbol([lookup(e) for e in self._outputs])

    # --- arithmetic ---------------------------------------------------------------------------
    def _binary(self, other: Any, op: str, scalar_op: str, hint: str) -> "Symbol":
        if isinstance(other, Symbol):
            return create(op, [self, other], {}, hint=hint)
        if isinstance(other, (int, float, np.number)):
            return create(scalar_op, [self], {"scalar": float(other)}, hint=hint + "scalar")
        return NotImplemented

    def __add__(self, other):
        return self._binary(other, "_Plus", "_PlusScalar", "_plus")

    __radd__ = __add__

    def __sub__(self, other):
        return self._binary(other, "_Minus", "_MinusScalar", "_minus")

    def __rsub__(self, other):
        return self._binary(other, "_Minus", "_RMinusScalar", "_rminus")

    def __mul__(self, other):
        return self._binary(other, "_Mul", "_MulScalar", "_mul")

    __rmul__ = __mul__

    def __truediv__(self, other):
        return self._binary(other, "_Div", "_DivScalar", "_div")

    def __rtruediv__(self, other):
        return self._binary(other, "_Div", "_RDivScalar", "_rdiv")

    def __pow__(self, other):
        return self._binary(other, "_Power", "_PowerScalar", "_power")

    def __rpow__(self, other):
        return self._binary(other, "_Power", "_RPowerScalar", "_rpower_")  # MXNet: _rpower_scalar0

    def __neg__(self):
        return self * -1.0

    def _named(self, other: Any, op: str, scalar_op: str, scalar_hint: str) -> "Symbol":
        """MXNet's newer operators (``%``, comparisons) with their own node names."""
        if isinstance(other, Symbol):
            return create(op, [self, other], {}, hint=op)
        if isinstance(other, (int, float, np.number)):
            return create(scalar_op, [self], {"scalar": other}, hint=scalar_hint)
        return NotImplemented

    def __mod__(self, other):
        return self._named(other, "_mod", "_mod_scalar", "_modscalar")

    def __rmod__(self, other):
        return self._named(other, "_mod", "_rmod_scalar", "_rmodscalar")

    # Comparisons build 0/1 nodes, as in MXNet; identity still hashes and `is` compares.
    __hash__ = object.__hash__

    def __eq__(self, other):  # type: ignore[override]
        return self._named(other, "_equal", "_equal_scalar", "_equal_scalar")

    def __ne__(self, other):  # type: ignore[override]
        return self._named(other, "_not_equal", "_not_equal_scalar", "_not_equal_scalar")

    def __gt__(self, other):
        return self._named(other, "_greater", "_greater_scalar", "_greater_scalar")

    def __ge__(self, other):
        return self._named(other, "_greater_equal", "_greater_equal_scalar",
                           "_greater_equal_scalar")

    def __lt__(self, other):
        return self._named(other, "_lesser", "_lesser_scalar", "_lesser_scalar")

    def __le__(self, other):
        return self._named(other, "_lesser_equal", "_lesser_equal_scalar",
                           "_lesser_equal_scalar")

    def __getattr__(self, name: str):
        # fluent methods: sym.reshape(...), sym.sum(axis=1), ...
        if name in _FLUENT and name in OPS:
            return lambda *args, **kwargs: create(name, [self, *args], kwargs)
        raise AttributeError(f"'Symbol' object has no attribute {name!r}")

    # --- inference ----------------------------------------------------------------------------
    def infer_shape(self, *args, **kwargs):
        """Shapes of arguments, outputs and auxiliary states from some known shapes.

        Returns ``(arg_shapes, out_shapes, aux_shapes)`` in list order, or three ``None`` when
        the given shapes do not determine every shape (use :meth:`infer_shape_partial`).
        Raises :class:`~raymod.base.ShapeError` naming the op and inputs on a conflict.
        """
        from .infer import infer_shapes
        return infer_shapes(self, args, kwargs, partial=False)

    def infer_shape_partial(self, *args, **kwargs):
        """As :meth:`infer_shape`, with ``()`` for shapes that stay unknown."""
        from .infer import infer_shapes
        return infer_shapes(self, args, kwargs, partial=True)

    def infer_type(self, *args, **kwargs):
        """Dtypes of arguments, outputs and auxiliary states (``numpy.dtype``)."""
        from .infer import infer_types
        return infer_types(self, args, kwargs)

    # --- serialisation ------------------------------------------------------------------------
    def tojson(self) -> str:
        """The graph in MXNet 1.x's symbol JSON layout."""
        from .json_io import to_json
        return to_json(self)

    def save(self, fname: str) -> None:
        """Write :meth:`tojson` to ``fname`` (a ``-symbol.json`` file)."""
        with open(fname, "w") as f:
            f.write(self.tojson())

    def __reduce__(self):
        from .json_io import load_json
        return (load_json, (self.tojson(),))

    def __copy__(self) -> "Symbol":
        return self

    def __deepcopy__(self, memo) -> "Symbol":
        return self

    def __repr__(self) -> str:
        name = self.name
        return f"<Symbol {name}>" if name else f"<Symbol group [{', '.join(self.list_outputs())}]>"

    def debug_str(self) -> str:
        """A line per node: op, name, inputs."""
        lines = []
        for node in self.topo():
            ins = ", ".join(inp.output_names()[i] for inp, i in node.inputs)
            lines.append(f"{node.op.name if node.op else 'Variable'}:{node.name}({ins})")
        return "\n".join(lines)

    # --- binding ------------------------------------------------------------------------------
    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs):
        """Allocate arrays for every argument from input shapes and bind an executor.

        Parameters
        ----------
        ctx : Context
            Device the executor runs on.
        grad_req : {'write', 'add', 'null'} or list or dict, default 'write'
            How gradients are stored, per argument or for all.
        type_dict : dict of str to dtype, optional
            Dtypes of inputs; others are inferred (float32 by default).
        stype_dict : dict of str to str, optional
            Storage types of inputs (``'csr'``, ``'row_sparse'``); others take their
            variable's ``stype`` (dense by default). A sparse argument is bound as an empty
            holder that ``arr[:] = value`` fills.
        shared_exec : Executor, optional
            Reuse this executor's arrays for arguments of the same name and shape.
        **kwargs
            Input shapes, e.g. ``data=(100, 784)``.
        """
        from ..executor import Executor
        return Executor.simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict,
                                   shared_arg_names=shared_arg_names, shared_exec=shared_exec,
                                   shared_buffer=shared_buffer, shapes=kwargs,
                                   group2ctx=group2ctx, stype_dict=stype_dict)

    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None,
             group2ctx=None, shared_exec=None):
        """Bind an executor to given arrays (list in argument order, or dict by name)."""
        from ..executor import Executor
        return Executor.bind(self, ctx, args, args_grad=args_grad, grad_req=grad_req,
                             aux_states=aux_states, group2ctx=group2ctx)

    def eval(self, ctx=None, **kwargs):
        """Bind to ``kwargs`` arrays and run forward once; returns the outputs."""
        from ..context import current_context
        ex = self.bind(ctx or current_context(), kwargs, grad_req="null")
        return ex.forward()


_FLUENT = {"reshape", "flatten", "transpose", "expand_dims", "sum", "mean", "max", "exp",
           "log", "sqrt", "square", "abs", "clip", "softmax", "log_softmax", "swapaxes",
           "slice_axis", "split", "dot", "zeros_like", "ones_like"}


def _node_attrs(node: Node) -> dict[str, str]:
    attrs = dict(node.op.given) if node.op is not None else {}
    attrs.update(node.attrs)
    return attrs


def Variable(name: str, attr: dict | None = None, shape: Sequence[int] | None = None,
             lr_mult: float | None = None, wd_mult: float | None = None, dtype=None,
             init=None, stype: str | None = None, **kwargs) -> Symbol:
    """A named input of a graph: data, a label, a weight.

    Parameters
    ----------
    name : str
        The variable's name; arguments are matched to arrays by it.
    attr : dict of str to str, optional
        Extra attributes.
    shape : tuple of int, optional
        The shape, as a hint for inference (0 marks an unknown dimension).
    lr_mult, wd_mult : float, optional
        Multipliers of the learning rate and weight decay for this parameter.
    dtype : dtype, optional
        The dtype, as a hint for type inference.
    init : Initializer, optional
        Initializer for this variable; wins over the one given to ``init_params``.
    stype : {'default', 'csr', 'row_sparse'}, optional
        Storage type: ``'csr'`` for sparse data batches, ``'row_sparse'`` for tables whose
        gradients and pulls hold only the rows a batch touches (see :mod:`raymod.sparse`).
    """
    if not isinstance(name, str):
        raise TypeError(f"Variable name must be a str, got {type(name).__name__}")
    attrs = {naming.hidden_key(k): v for k, v in naming.current_attr_scope().get(attr).items()}
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)  # MXNet writes str(shape): an int is a 1-d shape
    if shape is not None:
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"Variable {name!r}: shape must be a tuple, got {type(shape).__name__}")
        attrs["__shape__"] = format_attr(tuple(int(d) for d in shape))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(CODE_OF_DTYPE[np.dtype(dtype)])
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = str(STYPE_CODES[check_stype(stype, f"Variable {name!r}: stype")])
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise ValueError(f"Variable {name!r}: unknown argument {key!r} (extra attributes "
                             "must look like __key__)")
        attrs[key] = str(value)
    return Symbol([(Node(None, name, attrs), 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of ``symbols``, in order."""
    symbols = list(symbols)
    if not symbols or not all(isinstance(s, Symbol) for s in symbols):
        raise TypeError("Group expects a non-empty list of Symbols")
    return Symbol([e for s in symbols for e in s.outputs])


def create(op_name: str, args: Sequence[Symbol], kwargs: dict[str, Any],
           name: str | None = None, attr: dict | None = None, hint: str | None = None) -> Symbol:
    """Apply the op registered as ``op_name`` to symbols; the body of every ``rm.sym.<Op>``."""
    op_cls = OPS.get(op_name)
    kwargs = dict(kwargs)
    if not op_cls.variadic:
        args, name, attr = _positional_as_keywords(op_cls, op_name, args, kwargs, name, attr)
    name = kwargs.pop("name", name)
    attr = kwargs.pop("attr", attr)
    inputs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    node_attrs = {naming.hidden_key(k): str(v)
                  for k, v in naming.current_attr_scope().get(attr).items()}
    op_attrs = {}
    for key, value in kwargs.items():
        if key in inputs:
            continue
        if key in naming.HIDDEN_KEYS:
            node_attrs[naming.hidden_key(key)] = str(value)
        elif key.startswith("__") and key.endswith("__"):
            node_attrs[key] = str(value)
        else:
            op_attrs[key] = value
    for i, a in enumerate(args):
        if not isinstance(a, Symbol):
            raise TypeError(f"{op_name}: positional argument {i} must be a Symbol, got "
                            f"{type(a).__name__} (give attributes by keyword)")
    if op_cls.variadic and op_cls.variadic not in op_attrs:
        # inputs come positionally, or by keyword as arg0, arg1, ... (as in MXNet JSON)
        op_attrs[op_cls.variadic] = len(args) or len(inputs)
    op = op_cls(**op_attrs)
    name = naming.current().get(name, hint or op_name.lower())
    arg_names = op.list_arguments()
    slots = arg_names + op.list_auxiliary_states()
    if len(args) > len(slots):  # arguments, then auxiliary states, as in MXNet
        raise MXNetError(f"{op_name} '{name}': {len(args)} positional inputs given, it takes "
                         f"{len(slots)} ({', '.join(slots)})")
    unknown = set(inputs) - set(slots)
    if unknown:
        raise MXNetError(f"{op_name} '{name}': unknown input(s) {names_list(unknown)}; "
                         f"inputs: {', '.join(slots)}")
    # as MXNet, inputs an op creates itself carry the op's attributes and hidden keys
    inherited = dict(op.given)
    inherited.update({k: v for k, v in node_attrs.items()
                      if k in {naming.hidden_key(h) for h in naming.HIDDEN_KEYS}})
    own = op.auto_input_attrs()
    entries = []
    for i, slot in enumerate(slots):
        given = args[i] if i < len(args) else inputs.get(slot)
        if given is None:
            given = Symbol([(Node(None, f"{name}_{slot}", {**inherited, **own.get(slot, {})}), 0)])
        if len(given) != 1:
            raise MXNetError(f"{op_name} '{name}': input {slot!r} must have one output, "
                             f"it has {len(given)}")
        entries.append(given.outputs[0])
    node = Node(op, name, node_attrs, entries)
    return Symbol([(node, i) for i in range(op.num_visible_outputs())])


def _positional_as_keywords(op_cls: type, op_name: str, args: Sequence[Any], kwargs: dict,
                            name: str | None, attr: dict | None) -> tuple[list, Any, Any]:
    """Move positional arguments into ``kwargs`` by MXNet's generated signature: every input
    slot (arguments, then auxiliary states; a Symbol or None), then the attributes in the
    op's declared order, then ``name`` and ``attr``. Returns ``([], name, attr)``.

    Symbols alone are left positional (matched to the op instance's inputs, which may
    depend on its attributes, e.g. a custom op's)."""
    if all(isinstance(a, Symbol) for a in args):
        return list(args), name, attr
    slots = list(op_cls.inputs) + list(op_cls.aux)
    signature = slots + list(op_cls.params) + ["name", "attr"]
    if len(args) > len(signature):
        raise TypeError(f"{op_name} takes at most {len(signature)} positional arguments "
                        f"({', '.join(signature)}), got {len(args)}")
    for i, (key, value) in enumerate(zip(signature, args)):
        if i < len(slots):
            if value is None:
                continue
            if not isinstance(value, Symbol):
                raise TypeError(f"{op_name}: input {key!r} (positional argument {i + 1}) must be "
                                f"a Symbol, got {value!r}")
        elif key == "name":
            if not isinstance(value, str) or name is not None:
                raise TypeError(f"{op_name}: positional argument {i + 1} is 'name' (after the "
                                f"{len(op_cls.params)} attributes); expected a str given once, "
                                f"got {value!r}")
            name = value
            continue
        elif key == "attr":
            if not isinstance(value, dict) or attr is not None:
                raise TypeError(f"{op_name}: positional argument {i + 1} is 'attr'; expected a "
                                f"dict given once, got {value!r}")
            attr = value
            continue
        if key in kwargs:
            raise TypeError(f"{op_name} got attribute {key!r} both by position and by keyword")
        kwargs[key] = value
    return [], name, attr


def load_json(json_str: str) -> Symbol:
    """A symbol from MXNet 1.x symbol JSON (as written by ``tojson`` or MXNet itself)."""
    from .json_io import load_json as _load
    return _load(json_str)


def load(fname: str) -> Symbol:
    """A symbol from a ``-symbol.json`` file. Never executes code from the file."""
    with open(fname) as f:
        return load_json(f.read())
