"""Turning a raymod graph into ONNX nodes: the converter registry and the per-node context.

A converter is a function ``convert(ctx)`` registered for one or more raymod op names (the
op class's canonical name; aliases resolve to it). It reads the node's parsed attributes
(``ctx.attrs``), the ONNX names and known shapes of its inputs (``ctx.input(i)``,
``ctx.in_shape(i)``) and the shapes raymod inferred for its outputs (``ctx.out_shape(k)``),
and emits ONNX nodes with ``ctx.add(...)``, the last of which must write ``ctx.output(k)``.

With ``dynamic=True`` the batch size is not a constant of the graph: ``ctx.in_dims(i)`` /
``ctx.out_dims(k)`` give shapes whose batch-dependent dimensions are :class:`BatchDim`
(``scale * N + offset``), and ``ctx.shape(...)`` / ``ctx.dim(...)`` turn such shapes into
tensors computed from the input's runtime batch. A converter that would bake a shape (a
Reshape target, an Expand shape, a filled constant, an index bound) must go through them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np

from ..base import MXNetError

OPSET = 13
CONVERTERS: dict[str, Callable[["NodeContext"], None]] = {}


class UnsupportedOperatorError(MXNetError):
    """The graph holds an operator ONNX cannot express (or raymod does not convert yet)."""


class DynamicBatchError(UnsupportedOperatorError):
    """``dynamic=True`` was asked of a graph whose batch size cannot change: an operator or
    variable fixes it, or a dimension follows the batch in a way ONNX cannot compute."""


@dataclass(frozen=True)
class BatchDim:
    """A dimension that follows the batch size ``N`` of the inputs: ``scale * N + offset``.

    Adding or subtracting an int shifts ``offset`` (``dim - 1`` is the last index).
    """

    scale: int
    offset: int = 0

    def at(self, batch: int) -> int:
        """The dimension's value at batch size ``batch``."""
        return self.scale * batch + self.offset

    def __add__(self, other: int) -> "BatchDim":
        return BatchDim(self.scale, self.offset + int(other))

    __radd__ = __add__

    def __sub__(self, other: int) -> "BatchDim":
        return BatchDim(self.scale, self.offset - int(other))

    def __str__(self) -> str:
        """ONNX ``dim_param`` spelling: ``N``, ``4*N``, ``N+1``, ``2*N-3``."""
        text = "N" if self.scale == 1 else f"{self.scale}*N"
        return text if not self.offset else f"{text}{self.offset:+d}"


#: a dimension as the converters see it: a fixed int, or one that follows the batch
Dim = Union[int, BatchDim]


def converts(*op_names: str) -> Callable:
    """Register the decorated function as the converter of raymod ops ``op_names``."""
    def add(fn: Callable[["NodeContext"], None]) -> Callable[["NodeContext"], None]:
        for name in op_names:
            if name in CONVERTERS:
                raise ValueError(f"ONNX converter for {name!r} registered twice")
            CONVERTERS[name] = fn
        return fn
    return add


class GraphBuilder:
    """Collects ONNX nodes, initializers and value names while the graph is walked."""

    def __init__(self, params: dict[str, np.ndarray], shapes: dict, dtypes: dict,
                 dynamic: bool, dims: dict | None = None):
        from onnx import helper, numpy_helper

        self._helper, self._numpy_helper = helper, numpy_helper
        self.params = params
        self.shapes = shapes          # (id(node), k) -> shape tuple
        self.dtypes = dtypes          # (id(node), k) -> numpy dtype
        self.dynamic = dynamic
        # (id(node), k) -> shape with BatchDim entries (dynamic only; else the plain shapes)
        self.dims: dict = dims if dims is not None else shapes
        #: (ONNX input name, axis, step): the runtime batch size is that axis's length over
        #: step (the entries one batch item takes there); set by the exporter
        self.batch_source: tuple[str, int, int] | None = None
        self.nodes: list = []
        self.initializers: dict[str, Any] = {}
        self.names: dict[tuple[int, int], str] = {}
        self._taken: set[str] = set()
        self._dim_values: dict[BatchDim, str] = {}

    def fresh(self, hint: str) -> str:
        """A value name not used yet, built from ``hint``."""
        name, i = hint, 0
        while name in self._taken:
            i += 1
            name = f"{hint}_{i}"
        self._taken.add(name)
        return name

    def const(self, hint: str, value: Any, dtype: Any = None) -> str:
        """An initializer holding ``value``; returns its name."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        self.initializers[name] = self._numpy_helper.from_array(arr, name)
        return name

    def param(self, name: str, dtype: np.dtype | None) -> str:
        """The initializer of parameter ``name`` (added on first use, cast to ``dtype``)."""
        if name not in self.initializers:
            value = np.asarray(self.params[name])
            if dtype is not None:
                value = value.astype(dtype, copy=False)
            self.initializers[name] = self._numpy_helper.from_array(value, name)
        return name

    def add(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str] | str | None,
            hint: str, **attrs: Any) -> str | list[str]:
        """Append one ONNX node; with ``outputs=None`` a fresh name is made; returns it."""
        single = outputs is None or isinstance(outputs, str)
        outs = [self.fresh(hint)] if outputs is None else ([outputs] if single else
                                                            list(outputs))
        self.nodes.append(self._helper.make_node(op_type, list(inputs), outs,
                                                 name=self.fresh(f"{hint}_{op_type}"), **attrs))
        return outs[0] if single else outs

    # --- the runtime batch (dynamic=True) ------------------------------------------------
    def batch_dim(self, dim: BatchDim) -> str:
        """A 1-D int64 tensor ``[dim]`` computed from the input's runtime batch size (each
        distinct ``dim`` is emitted once)."""
        if dim in self._dim_values:
            return self._dim_values[dim]
        if self.batch_source is None:   # a BatchDim exists only where an input is batched
            raise RuntimeError("ONNX export: a batch-dependent shape without a batched input")
        if dim == BatchDim(1):
            source, axis, step = self.batch_source
            # opset 13's Shape takes no start/end: gather the batch axis out of it
            shape = self.add("Shape", [source], None, "batch")
            value = self.add("Gather", [shape, self.const("batch_axis", np.asarray(
                [axis], dtype=np.int64))], None, "batch", axis=0)
            if step != 1:
                value = self.add("Div", [value, self.const("batch_step", np.asarray(
                    [step], dtype=np.int64))], None, "batch")
        else:
            value = self.batch_dim(BatchDim(1))
            if dim.scale != 1:
                value = self.add("Mul", [value, self.const(f"batch_x{dim.scale}", np.asarray(
                    [dim.scale], dtype=np.int64))], None, "batch")
            if dim.offset:
                value = self.add("Add", [value, self.const("batch_offset", np.asarray(
                    [dim.offset], dtype=np.int64))], None, "batch")
        self._dim_values[dim] = value
        return value

    def shape_tensor(self, hint: str, dims: Sequence[Dim]) -> str:
        """A 1-D int64 tensor of ``dims``: an initializer when every one is an int, else a
        Concat of the fixed runs and the batch-dependent dims computed at run time."""
        dims = list(dims)
        if not any(isinstance(d, BatchDim) for d in dims):
            return self.const(hint, np.asarray(dims, dtype=np.int64))
        parts: list[str] = []
        run: list[int] = []
        for d in dims + [None]:
            if isinstance(d, (int, np.integer)):
                run.append(int(d))
                continue
            if run:
                parts.append(self.const(hint, np.asarray(run, dtype=np.int64)))
                run = []
            if d is not None:
                parts.append(self.batch_dim(d))
        return parts[0] if len(parts) == 1 else self.add("Concat", parts, None, hint, axis=0)


class NodeContext:
    """What a converter sees of one raymod node: attributes, inputs, shapes, emitters."""

    def __init__(self, builder: GraphBuilder, node, params: set[str]):
        self.b = builder
        self.node = node
        self.op = node.op
        self.attrs = node.op.attrs
        self.name = node.name
        self._params = params

    # --- reading -------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return self.node.num_args()

    def input(self, i: int) -> str:
        """ONNX name of input ``i`` (a parameter becomes an initializer on first use)."""
        src, k = self.node.inputs[i]
        if src.is_variable and src.name in self._params:
            return self.b.param(src.name, self.b.dtypes.get((id(src), 0)))
        return self.b.names[(id(src), k)]

    def aux(self, j: int) -> str:
        """ONNX name of auxiliary state ``j``."""
        return self.input(self.node.num_args() + j)

    def in_shape(self, i: int) -> tuple:
        src, k = self.node.inputs[i]
        return tuple(self.b.shapes[(id(src), k)])

    def in_dtype(self, i: int) -> np.dtype:
        src, k = self.node.inputs[i]
        return np.dtype(self.b.dtypes.get((id(src), k)) or np.float32)

    def out_shape(self, k: int = 0) -> tuple:
        return tuple(self.b.shapes[(id(self.node), k)])

    def out_dtype(self, k: int = 0) -> np.dtype:
        return np.dtype(self.b.dtypes.get((id(self.node), k)) or np.float32)

    def output(self, k: int = 0) -> str:
        """The ONNX name the node's output ``k`` must be written to."""
        return self.b.names[(id(self.node), k)]

    def in_dims(self, i: int) -> tuple[Dim, ...]:
        """Input ``i``'s shape, its batch-dependent dims as :class:`BatchDim` (dynamic)."""
        src, k = self.node.inputs[i]
        return tuple(self.b.dims[(id(src), k)])

    def out_dims(self, k: int = 0) -> tuple[Dim, ...]:
        """Output ``k``'s shape, its batch-dependent dims as :class:`BatchDim` (dynamic)."""
        return tuple(self.b.dims[(id(self.node), k)])

    def fixed_in_dim(self, i: int, axis: int, what: str) -> int:
        """Dimension ``axis`` of input ``i``, which the converter bakes into an attribute
        (``what`` says which): fails naming the op when it follows the batch."""
        dim = self.in_dims(i)[axis]
        if isinstance(dim, BatchDim):
            raise self.batch_error(f"takes its {what} from dimension {axis} of input {i}, "
                                   f"which follows the batch ({dim}); ONNX holds it as a "
                                   f"fixed attribute")
        return int(dim)

    @property
    def dynamic(self) -> bool:
        return self.b.dynamic

    # --- emitting ------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A new value name (for nodes with several outputs)."""
        return self.b.fresh(f"{self.name}_{hint}")

    def add(self, op_type: str, inputs: Sequence[str], outputs: Any = None,
            **attrs: Any) -> Any:
        return self.b.add(op_type, inputs, outputs, self.name, **attrs)

    def const(self, hint: str, value: Any, dtype: Any = None) -> str:
        return self.b.const(f"{self.name}_{hint}", value, dtype)

    def ints(self, hint: str, values: Sequence[int]) -> str:
        """An int64 1-D initializer (ONNX's axes, shapes, starts...)."""
        return self.const(hint, np.asarray(list(values), dtype=np.int64))

    def shape(self, hint: str, dims: Sequence[Dim]) -> str:
        """A 1-D int64 shape (or starts / ends) tensor: as :meth:`ints` when every dim is
        fixed, else computed from the runtime batch (:class:`BatchDim` entries)."""
        return self.b.shape_tensor(f"{self.name}_{hint}", dims)

    def reshape_target(self, hint: str, dims: Sequence[Dim],
                       source: Sequence[Dim] = ()) -> str:
        """The shape input of a Reshape to ``dims`` (of a value shaped ``source``, when
        known): fixed dims as they are; a batch-dependent one equal to the source's at the
        same axis is ONNX's 0 (copy), and one more becomes -1 (inferred), so that only a
        Reshape with several such dims computes its shape from the batch."""
        dims = list(dims)
        for i, d in enumerate(dims):
            if isinstance(d, BatchDim) and i < len(source) and source[i] == d:
                dims[i] = 0
        left = [i for i, d in enumerate(dims) if isinstance(d, BatchDim)]
        if left and -1 not in dims:
            dims[left[0]] = -1
        return self.shape(hint, dims)

    def expand_target(self, hint: str, dims: Sequence[Dim], source: Sequence[Dim]) -> str:
        """The shape input of an Expand of a value shaped ``source`` to ``dims``: a
        batch-dependent dim the source already has is 1 (Expand broadcasts both ways, so the
        source's dim stays)."""
        dims = list(dims)
        lead = len(dims) - len(source)
        for i, d in enumerate(dims):
            if isinstance(d, BatchDim) and i >= lead and source[i - lead] == d:
                dims[i] = 1
        return self.shape(hint, dims)

    def dim(self, hint: str, dim: Dim) -> str:
        """A scalar (0-d) int64 of ``dim`` (an index bound): an initializer when fixed, else
        computed from the runtime batch."""
        if not isinstance(dim, BatchDim):
            return self.const(hint, np.int64(dim))
        return self.add("Squeeze", [self.b.batch_dim(dim), self.ints(f"{hint}_axes", [0])])

    def scalar(self, hint: str, value: float, i: int = 0) -> str:
        """A scalar initializer of input ``i``'s dtype."""
        return self.const(hint, np.asarray(value, dtype=self.in_dtype(i)))

    def unsupported(self, why: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"ONNX export: operator {self.op.name} (node '{self.name}') {why}")

    def batch_error(self, why: str) -> DynamicBatchError:
        """The error to raise when ``dynamic=True`` cannot be honoured by this node."""
        return DynamicBatchError(
            f"ONNX export with dynamic=True: operator {self.op.name} (node '{self.name}') "
            f"{why}; export with dynamic=False (a fixed batch) instead")
