"""Custom: a node computed by a user's ``rm.operator.CustomOp`` (MXNet's ``Custom``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...array_view import show
from ...base import AttributeValueError, ShapeError
from ...context import Context, cpu, gpu
from ...operator import CustomOp, get_prop
from ..base import CODE_OF_DTYPE, Op, Param, known


def _context_of(xp) -> Context:
    """The context the executor runs on, told by its array module (CuPy: the current device)."""
    if xp is np:
        return cpu(0)
    return gpu(int(xp.cuda.runtime.getDevice()))


def _shape(value: Any) -> tuple | None:
    """A prop's shape as a tuple; ``[]`` or None (not known yet) as None."""
    return tuple(int(d) for d in value) if value is not None and len(value) else None


class Custom(Op):
    """A node whose inputs, outputs, inference and computation come from the
    :class:`raymod.operator.CustomOpProp` registered as ``op_type``.

    Every attribute other than ``op_type`` is passed to the prop's constructor as a string,
    as in MXNet, so a node built in Python and one loaded from JSON are the same. The
    inputs, outputs and auxiliary states are the prop's lists; shapes and dtypes come from
    its ``infer_shape`` / ``infer_type``. At the first forward for given input shapes and
    dtypes the prop's ``create_operator`` makes the :class:`raymod.operator.CustomOp`, which
    then serves forward and backward for them. A prop made with ``need_top_grad=False`` is a
    loss head: backward runs without a head gradient. Backward keeps what the prop's
    ``declare_backward_dependency`` names.

    Attributes
    ----------
    op_type : str
        The name the prop was registered under with ``rm.operator.register``.
    prop : CustomOpProp
        The prop instance made from this node's attributes.
    """

    name = "Custom"
    params = {"op_type": Param("str")}
    any_attrs = True
    needs_out_shapes = True

    def __init__(self, **attrs: Any):
        if attrs.get("op_type") in (None, ""):
            raise AttributeValueError("Custom: required attribute 'op_type' is missing (the name "
                                      "a CustomOpProp was registered under)")
        op_type = str(attrs.pop("op_type"))
        prop_cls = get_prop(op_type)
        # MXNet hands the prop every attribute as a string, from Python and from JSON alike
        kwargs = {k: v if isinstance(v, str) else str(v) for k, v in attrs.items()}
        try:
            prop = prop_cls(**kwargs)
        except TypeError as err:
            raise AttributeValueError(f"Custom op_type {op_type!r}: {prop_cls.__name__} does not "
                                      f"accept the attributes {sorted(kwargs)}: {err}") from None
        self.op_type = op_type
        self.prop = prop
        self.attrs = {"op_type": op_type, **kwargs}
        self.given = dict(sorted(self.attrs.items()))  # MXNet writes them sorted
        self._arguments = [str(n) for n in prop.list_arguments()]
        self._outputs = [str(n) for n in prop.list_outputs()]
        self._aux = [str(n) for n in prop.list_auxiliary_states()]
        n_in, n_out = len(self._arguments), len(self._outputs)
        # ids as MXNet numbers them: out_grad, then in_data, then out_data
        deps = set(prop.declare_backward_dependency(
            list(range(n_out)), list(range(n_out, n_out + n_in)),
            list(range(n_out + n_in, 2 * n_out + n_in))))
        self.top_grad = tuple(k in deps for k in range(n_out))
        self.retain_inputs = tuple(k for k in range(n_in) if n_out + k in deps)
        self.retain_outputs = tuple(k for k in range(n_out) if n_out + n_in + k in deps)
        self.is_loss = not prop.need_top_grad_
        # (context, input shapes, input dtypes) -> the CustomOp serving them
        self._operators: dict[tuple, CustomOp] = {}

    # --- structure -------------------------------------------------------------------------
    def list_arguments(self) -> list[str]:
        return list(self._arguments)

    def list_outputs(self) -> list[str]:
        return list(self._outputs)

    def list_auxiliary_states(self) -> list[str]:
        return list(self._aux)

    def _result(self, what: str, ret: Any, counts: tuple[int, int, int]) -> list[list]:
        """The prop's 2 or 3 lists, checked against the declared counts."""
        if not isinstance(ret, (tuple, list)) or len(ret) not in (2, 3):
            raise ShapeError(f"Custom op_type {self.op_type!r}: {what} must return 2 or 3 lists "
                             f"(inputs, outputs[, auxiliary states]), got {ret!r}")
        ret = [list(r) for r in ret] + ([[]] if len(ret) == 2 else [])
        for values, n, kind in zip(ret, counts, ("inputs", "outputs", "auxiliary states")):
            if len(values) != n:
                raise ShapeError(f"Custom op_type {self.op_type!r}: {what} returned "
                                 f"{len(values)} {kind}, the prop declares {n}")
        return ret

    # --- inference -------------------------------------------------------------------------
    def infer_shape(self, in_shapes, out_shapes):
        counts = (len(self._arguments), len(self._outputs), len(self._aux))
        nothing = [None] * counts[0], [None] * counts[1], [None] * counts[2]
        complete = all(known(s) for s in in_shapes)
        if not any(s is not None for s in in_shapes):
            return nothing
        # as MXNet, a shape not known yet reaches the prop as []
        given = [[] if s is None else [int(d) for d in s] for s in in_shapes]
        try:
            ret = self.prop.infer_shape(given)
        except Exception as err:  # noqa: BLE001 - the user's code: report or retry later
            if not complete:  # it may need shapes other ops will tell later
                return nothing
            raise ShapeError(f"Custom op_type {self.op_type!r}: infer_shape failed for input "
                             f"shapes {given}: {type(err).__name__}: {err}") from err
        return tuple([_shape(s) for s in values]
                     for values in self._result("infer_shape", ret, counts))

    def infer_type(self, in_types, out_types):
        counts = (len(self._arguments), len(self._outputs), len(self._aux))
        first = next((t for t in in_types if t is not None), None)
        if first is None:
            return [None] * counts[0], [None] * counts[1], [None] * counts[2]
        # an input of unknown dtype is taken to have the first known one, as MXNet's default
        given = [np.dtype(first if t is None else t).type for t in in_types]
        ret = self._result("infer_type", self.prop.infer_type(given), counts)
        return tuple([None if t is None else np.dtype(t) for t in values] for values in ret)

    # --- compute ---------------------------------------------------------------------------
    def operator_for(self, ctx: Context, shapes: list[tuple], dtypes: list) -> CustomOp:
        """The CustomOp for these input shapes and dtypes (made once, by the prop)."""
        key = (ctx, tuple(shapes), tuple(dtypes))
        op = self._operators.get(key)
        if op is None:
            with ctx:
                # as MXNet: shapes as lists, dtypes as MXNet's dtype codes (0 is float32)
                op = self.prop.create_operator(ctx, [list(s) for s in shapes],
                                               [CODE_OF_DTYPE[np.dtype(d)] for d in dtypes])
            if not isinstance(op, CustomOp):
                raise TypeError(f"Custom op_type {self.op_type!r}: create_operator must return "
                                f"an rm.operator.CustomOp, got {type(op).__name__}")
            self._operators[key] = op
        return op

    def forward(self, xp, inputs, aux, is_train, out_shapes=(), out_dtypes=()):
        ctx = _context_of(xp)
        arrays = list(inputs) + list(aux)
        op = self.operator_for(ctx, [tuple(a.shape) for a in arrays], [a.dtype for a in arrays])
        out_data = [xp.zeros(s, d) for s, d in zip(out_shapes, out_dtypes)]
        with ctx:  # the user's code sees NDArrays under the MXNet compatibility layer
            op.forward(is_train=is_train, req=["write"] * len(out_data),
                       in_data=show(list(inputs), ctx), out_data=show(out_data, ctx),
                       aux=show(list(aux), ctx))
        in_meta = [(tuple(a.shape), a.dtype) for a in inputs]
        return out_data, (op, ctx, in_meta, list(zip(out_shapes, out_dtypes)), list(aux))

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        op, ctx, in_meta, out_meta, aux = saved
        # the head gradients the prop asked for (zeros where the graph has none)
        out_grad = [None if not want else g if g is not None else xp.zeros(s, d)
                    for g, want, (s, d) in zip(out_grads, self.top_grad, out_meta)]
        in_grad = [xp.zeros(s, d) for s, d in in_meta]
        req = ["write" if need else "null" for need in need_grad]
        with ctx:
            op.backward(req=req, out_grad=show(out_grad, ctx), in_data=show(list(inputs), ctx),
                        out_data=show(list(outputs), ctx), in_grad=show(in_grad, ctx),
                        aux=show(list(aux), ctx))
        return [g if need else None for g, need in zip(in_grad, need_grad)]
