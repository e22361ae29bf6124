"""Turning a raymod graph into ONNX nodes: the converter registry and the per-node context.

A converter is a function ``convert(ctx)`` registered for one or more raymod op names (the
op class's canonical name; aliases resolve to it). It reads the node's parsed attributes
(``ctx.attrs``), the ONNX names and known shapes of its inputs (``ctx.input(i)``,
``ctx.in_shape(i)``) and the shapes raymod inferred for its outputs (``ctx.out_shape(k)``),
and emits ONNX nodes with ``ctx.add(...)``, the last of which must write ``ctx.output(k)``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..base import MXNetError

OPSET = 13
CONVERTERS: dict[str, Callable[["NodeContext"], None]] = {}


class UnsupportedOperatorError(MXNetError):
    """The graph holds an operator ONNX cannot express (or raymod does not convert yet)."""


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
                 dynamic: bool):
        from onnx import helper, numpy_helper

        self._helper, self._numpy_helper = helper, numpy_helper
        self.params = params
        self.shapes = shapes          # (id(node), k) -> shape tuple
        self.dtypes = dtypes          # (id(node), k) -> numpy dtype
        self.dynamic = dynamic
        self.nodes: list = []
        self.initializers: dict[str, Any] = {}
        self.names: dict[tuple[int, int], str] = {}
        self._taken: set[str] = set()

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

    def scalar(self, hint: str, value: float, i: int = 0) -> str:
        """A scalar initializer of input ``i``'s dtype."""
        return self.const(hint, np.asarray(value, dtype=self.in_dtype(i)))

    def unsupported(self, why: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"ONNX export: operator {self.op.name} (node '{self.name}') {why}")
