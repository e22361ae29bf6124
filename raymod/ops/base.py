"""The operator contract: one small class per MXNet op, written against an injected ``xp``.

An op class declares its MXNet name, its typed attributes (:class:`Param`), the names of its
inputs, outputs and auxiliary states, and four methods:

``infer_shape(in_shapes, out_shapes) -> (in_shapes, out_shapes, aux_shapes)``
    Shapes are ``None`` (unknown) or tuples in which ``0`` marks an unknown dimension, as in
    MXNet. Return everything that can be deduced (``None`` where nothing can); the graph merges
    the answer with what it knows and reports conflicts. Raise :class:`ShapeError` for inputs
    that cannot work together (naming the inputs and their shapes).
``infer_type(in_types, out_types) -> (in_types, out_types, aux_types)``
    The same for ``numpy.dtype`` values. The default gives every input and output the first
    known dtype.
``forward(xp, inputs, aux, is_train) -> (outputs, saved)``
    ``xp`` is numpy or cupy. Inputs must not be modified; auxiliary states are updated in
    place. ``saved`` is anything backward needs beyond the retained inputs and outputs.
``backward(xp, out_grads, inputs, outputs, saved, need_grad) -> in_grads``
    One gradient (or ``None``) per input; compute only those with ``need_grad[i]`` true.
    ``inputs``/``outputs`` hold only the positions declared in ``retain_inputs`` /
    ``retain_outputs`` (``None`` elsewhere), so the executor can free the rest after forward.
    Loss heads (``is_loss``) ignore ``out_grads`` and emit per-sample gradients summed over the
    batch, exactly as MXNet; normalisation is the optimizer's ``rescale_grad``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from ..base import AttributeValueError, ShapeError, names_list
from ..registry import Registry

REQUIRED = object()
OPS: Registry = Registry("operator", case_sensitive=True)

# MXNet's dtype codes, used by ``__dtype__`` attributes and the .params format.
DTYPE_CODES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
               6: "int64", 7: "bool", 12: "bfloat16"}
CODE_OF_DTYPE = {np.dtype(v): k for k, v in DTYPE_CODES.items() if v != "bfloat16"}


@dataclass(frozen=True)
class Param:
    """One operator attribute: its kind, default and allowed values.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``shape`` (tuple of ints),
    ``dtype``, or ``any`` (kept as given); ``optional=True`` also admits ``None``.
    """

    kind: str
    default: Any = REQUIRED
    choices: tuple | None = None
    optional: bool = False
    doc: str = ""

    def parse(self, op: str, key: str, value: Any) -> Any:
        """Convert a Python value or an MXNet attribute string to this kind, or raise."""
        if value is None or (isinstance(value, str) and value in ("None", "")
                             and not (self.kind == "str" and value == "")):
            if self.optional or self.default is None:
                return None
            raise AttributeValueError(f"{op}: attribute {key!r} must be a {self.kind}, got None")
        try:
            out = _PARSERS[self.kind](value)
        except (ValueError, TypeError, SyntaxError) as err:
            raise AttributeValueError(
                f"{op}: attribute {key!r} expects a {self.kind}, got {value!r} ({err})") from None
        if self.choices is not None and out not in self.choices:
            raise AttributeValueError(f"{op}: attribute {key!r} must be one of "
                                      f"{', '.join(map(repr, self.choices))}; got {value!r}")
        return out


def _parse_bool(v: Any) -> bool:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise ValueError("not a boolean")
    return bool(v)


def _parse_shape(v: Any) -> tuple:
    if isinstance(v, str):
        v = ast.literal_eval(v.strip() or "()")
    if isinstance(v, (int, np.integer)):
        return (int(v),)
    return tuple(None if x is None else int(x) for x in v)


def _parse_dtype(v: Any) -> np.dtype | None:
    if isinstance(v, str) and v.isdigit():
        return np.dtype(DTYPE_CODES[int(v)])
    return np.dtype(v)


def _parse_number(kind):
    def parse(v: Any):
        if isinstance(v, str):
            v = ast.literal_eval(v.strip())
        if kind is int and float(v) != int(v):
            raise ValueError("not an integer")
        return kind(v)
    return parse


_PARSERS = {"int": _parse_number(int), "float": _parse_number(float), "bool": _parse_bool,
            "str": str, "shape": _parse_shape, "dtype": _parse_dtype, "any": lambda v: v}


def format_attr(value: Any) -> str:
    """An attribute value as MXNet writes it in symbol JSON."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def _given_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (np.dtype, type)):
        return np.dtype(value).name
    return str(value)


def known(shape: Sequence[int] | None) -> bool:
    """True when a shape is fully known (not None, no 0 dimension)."""
    return shape is not None and all(d > 0 for d in shape)


def merge_shape(a: tuple | None, b: tuple | None, what: str = "shape") -> tuple | None:
    """Combine two partial shapes of one value; ``ShapeError`` if they disagree."""
    if a is None:
        return None if b is None else tuple(b)
    if b is None:
        return tuple(a)
    if len(a) != len(b):
        raise ShapeError(f"{what}: {tuple(a)} vs {tuple(b)}")
    out = []
    for x, y in zip(a, b):
        if x and y and x != y:
            raise ShapeError(f"{what}: {tuple(a)} vs {tuple(b)}")
        out.append(x or y)
    return tuple(out)


class Op:
    """Base class of every operator; see the module docstring for the contract."""

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    params: ClassVar[dict[str, Param]] = {}
    inputs: ClassVar[tuple[str, ...]] = ("data",)
    outputs: ClassVar[tuple[str, ...]] = ("output",)
    aux: ClassVar[tuple[str, ...]] = ()
    retain_inputs: ClassVar[tuple[int, ...]] = ()
    retain_outputs: ClassVar[tuple[int, ...]] = ()
    # name of the count attribute of an op taking any number of inputs (Concat's num_args)
    variadic: ClassVar[str | None] = None
    # loss heads ignore out_grads; their backward runs even without a head gradient
    is_loss: ClassVar[bool] = False
    # inputs that never take a gradient (labels, indices)
    no_grad_inputs: ClassVar[tuple[str, ...]] = ()
    # ops that create arrays from nothing (zeros) get ``out_shapes``/``out_dtypes`` keywords
    # in forward, since the same op instance serves executors of different shapes
    needs_out_shapes: ClassVar[bool] = False
    # ops whose backward accepts ``grad_out``: per input, an array to write that gradient
    # into (or None); the executor passes a parameter's own grad array, saving a copy
    writes_grad_out: ClassVar[bool] = False
    # ops taking attributes not declared in ``params`` (Custom: its prop's); every key of a
    # JSON node but ``__hidden__`` ones is then an op attribute
    any_attrs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.name:
            OPS.register(cls, name=cls.name)
            for alias in cls.aliases:
                OPS.register(cls, name=alias)

    def __init__(self, **attrs: Any):
        unknown = set(attrs) - set(self.params)
        if unknown:
            raise AttributeValueError(
                f"{self.name}: unknown attribute(s) {names_list(unknown)}; "
                f"known: {names_list(self.params) or 'none'}")
        self.attrs: dict[str, Any] = {}
        for key, spec in self.params.items():
            if key in attrs:
                value = spec.parse(self.name, key, attrs[key])
            elif spec.default is REQUIRED:
                raise AttributeValueError(f"{self.name}: required attribute {key!r} is missing")
            else:
                value = spec.default if spec.default is None else spec.parse(self.name, key,
                                                                             spec.default)
            self.attrs[key] = value
            setattr(self, key, value)
        # what the user gave, as MXNet writes it (str(value)) for JSON
        self.given = {k: _given_str(v) for k, v in attrs.items()}
        self.check()

    def check(self) -> None:
        """Validate attribute combinations (override; raise AttributeValueError)."""

    # --- structure -------------------------------------------------------------------------
    def list_arguments(self) -> list[str]:
        if self.variadic:
            return [f"arg{i}" for i in range(self.attrs[self.variadic])]
        return list(self.inputs)

    def list_outputs(self) -> list[str]:
        return list(self.outputs)

    def num_visible_outputs(self) -> int:
        return len(self.list_outputs())

    def list_auxiliary_states(self) -> list[str]:
        return list(self.aux)

    def auto_input_attrs(self) -> dict[str, dict[str, str]]:
        """Extra attributes for inputs this op creates itself, e.g. ``{"gamma": {"__init__": ...}}``."""
        return {}

    # --- inference -------------------------------------------------------------------------
    def infer_shape(self, in_shapes: list, out_shapes: list) -> tuple[list, list, list]:
        raise NotImplementedError(f"{self.name} does not implement infer_shape")

    def infer_type(self, in_types: list, out_types: list) -> tuple[list, list, list]:
        first = next((t for t in list(in_types) + list(out_types) if t is not None), None)
        return ([first] * len(in_types), [first] * len(out_types),
                [first] * len(self.list_auxiliary_states()))

    def takes_sparse(self, in_stypes: list[str]) -> bool:
        """True when forward and backward compute on inputs stored as ``in_stypes`` as they
        are; otherwise the executor hands them their sparse inputs (and sparse output
        gradients) densified, as MXNet's storage fallback does."""
        return False

    def infer_storage(self, in_stypes: list[str]) -> tuple[list[str], list[str]]:
        """Storage types of the outputs, and of the inputs' gradients, for inputs stored as
        ``in_stypes`` (``'default'``, ``'csr'``, ``'row_sparse'``). Dense unless an op
        that computes on sparse values says otherwise."""
        return (["default"] * len(self.list_outputs()), ["default"] * len(in_stypes))

    # --- compute ---------------------------------------------------------------------------
    def forward(self, xp, inputs: list, aux: list, is_train: bool) -> tuple[list, Any]:
        raise NotImplementedError

    def backward(self, xp, out_grads: list, inputs: list, outputs: list, saved: Any,
                 need_grad: list[bool]) -> list:
        raise NotImplementedError(f"{self.name} has no gradient")

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(f'{k}={v}' for k, v in self.given.items())})"


class ElementwiseOp(Op):
    """Ops whose inputs and outputs all share one shape (unary and same-shape binary ops)."""

    def infer_shape(self, in_shapes, out_shapes):
        shape = None
        for s in list(in_shapes) + list(out_shapes):
            shape = merge_shape(shape, s, f"{self.name}: inputs and output must share a shape")
        return [shape] * len(in_shapes), [shape] * len(out_shapes), []


def sum_to_shape(xp, grad, shape: tuple):
    """Reduce a broadcast gradient back to ``shape`` (summing the broadcast axes)."""
    if grad.shape == tuple(shape):
        return grad
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape)
                                      if d == 1 and grad.shape[i + lead] != 1)
    return grad.sum(axis=axes, keepdims=True).reshape(shape) if axes else grad.reshape(shape)


def get_op(name: str) -> type[Op]:
    """The op class registered under an MXNet name (case-sensitive aliases resolve too)."""
    return OPS.get(name)
