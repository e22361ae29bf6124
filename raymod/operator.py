"""``rm.operator``: operators written in Python by the user, as MXNet 1.x's ``mx.operator``.

A custom op is two classes. A :class:`CustomOpProp` subclass describes it (names of its
inputs, outputs and auxiliary states, shape and dtype inference, which values backward
reads) and makes the op; a :class:`CustomOp` subclass computes it, writing into
preallocated arrays with :meth:`CustomOp.assign`. Register the prop under a name and use the
op in a graph with ``rm.sym.Custom``::

    @rm.operator.register("mysoftmax")
    class MySoftmaxProp(rm.operator.CustomOpProp):
        def __init__(self, axis="1"):          # attributes arrive as strings
            super().__init__(need_top_grad=False)
            self.axis = int(axis)
        ...
        def create_operator(self, ctx, shapes, dtypes):
            return MySoftmax(self.axis)

    out = rm.sym.Custom(data, label, op_type="mysoftmax", axis=1, name="softmax")

The arrays a custom op sees are numpy arrays on CPU contexts and CuPy arrays on GPU ones.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from .base import MXNetError

__all__ = ["CustomOp", "CustomOpProp", "register", "get_prop", "registered", "pack_props",
           "unpack_props"]

# op_type -> CustomOpProp subclass
_PROPS: dict[str, type] = {}


class CustomOp:
    """The computation of a custom operator; subclass and override :meth:`forward` and
    :meth:`backward`.

    One instance is made per graph node and input shapes, by the prop's ``create_operator``,
    so an instance may keep state between its forward and backward.
    """

    def __init__(self):
        pass

    def forward(self, is_train: bool, req: list[str], in_data: list, out_data: list,
                aux: list) -> None:
        """Compute the outputs into ``out_data``.

        Parameters
        ----------
        is_train : bool
            Whether this forward is for training.
        req : list of str
            Per output, how to store it: ``'write'``, ``'inplace'``, ``'add'`` or ``'null'``;
            :meth:`assign` honours it.
        in_data, out_data, aux : list of arrays
            The inputs (read only), the preallocated outputs and the auxiliary states
            (updated in place).
        """

    def backward(self, req: list[str], out_grad: list, in_data: list, out_data: list,
                 in_grad: list, aux: list) -> None:
        """Compute the input gradients into ``in_grad``.

        ``req`` has one entry per input (``'null'`` for an input whose gradient nobody
        needs). ``out_grad``, ``in_data`` and ``out_data`` hold ``None`` at the positions the
        prop's :meth:`CustomOpProp.declare_backward_dependency` did not ask for.
        """

    def assign(self, dst: Any, req: str, src: Any) -> None:
        """Store ``src`` into ``dst`` as ``req`` says: ``'write'``/``'inplace'`` overwrite,
        ``'add'`` accumulates, ``'null'`` does nothing."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[...] = src
        elif req == "add":
            dst[...] += src
        else:
            raise MXNetError(f"CustomOp.assign: req must be 'null', 'write', 'inplace' or "
                             f"'add', got {req!r}")


class CustomOpProp:
    """The description of a custom operator; subclass, override what differs from the
    defaults and register the subclass with :func:`register`.

    Its constructor receives the node's attributes (everything given to ``rm.sym.Custom``
    but the inputs, ``op_type``, ``name`` and ``attr``) as keyword strings, as in MXNet.

    Parameters
    ----------
    need_top_grad : bool, default True
        Whether backward reads the gradients of the outputs. False makes the op a loss
        head: backward runs without a head gradient (the default
        :meth:`declare_backward_dependency` then leaves ``out_grad`` out).
    """

    def __init__(self, need_top_grad: bool = True):
        self.need_top_grad_ = need_top_grad

    def list_arguments(self) -> list[str]:
        """Names of the inputs; default ``['data']``."""
        return ["data"]

    def list_outputs(self) -> list[str]:
        """Names of the outputs; default ``['output']``."""
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        """Names of the auxiliary states; default none."""
        return []

    def infer_shape(self, in_shape: list[list[int]]) -> tuple:
        """``(in_shapes, out_shapes[, aux_shapes])`` from the input shapes (lists of ints,
        ``[]`` for one not known yet). The default gives every output the first input's
        shape."""
        return in_shape, [in_shape[0]] * len(self.list_outputs()), []

    def infer_type(self, in_type: list) -> tuple:
        """``(in_types, out_types[, aux_types])`` from the input dtypes (numpy scalar types).
        The default gives everything the first input's dtype."""
        return (in_type, [in_type[0]] * len(self.list_outputs()),
                [in_type[0]] * len(self.list_auxiliary_states()))

    def declare_backward_dependency(self, out_grad: list[int], in_data: list[int],
                                    out_data: list[int]) -> list[int]:
        """The ids (from the three lists) of the values backward reads. The default is all
        of them, less ``out_grad`` when ``need_top_grad`` is false."""
        deps = list(out_grad) if self.need_top_grad_ else []
        return deps + list(in_data) + list(out_data)

    def create_operator(self, ctx: Any, in_shapes: list[list[int]],
                        in_dtypes: list) -> CustomOp:
        """The :class:`CustomOp` computing this op for inputs of these shapes (lists of
        ints) and dtypes (MXNet's dtype codes: 0 float32, 1 float64, ...), arguments then
        auxiliary states, on context ``ctx``."""
        return CustomOp()


def register(reg_name: str) -> Callable[[type], type]:
    """Class decorator registering a :class:`CustomOpProp` subclass as ``op_type=reg_name``.

    Registering a name again replaces the earlier class, as in MXNet.
    """
    if not isinstance(reg_name, str) or not reg_name:
        raise TypeError(f"rm.operator.register: the name must be a non-empty str, "
                        f"got {reg_name!r}")

    def do_register(prop_cls: type) -> type:
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError(f"rm.operator.register({reg_name!r}): expected a CustomOpProp "
                            f"subclass, got {prop_cls!r}")
        _PROPS[reg_name] = prop_cls
        return prop_cls
    return do_register


def get_prop(op_type: str) -> type:
    """The prop class registered as ``op_type``; ``MXNetError`` naming it if none is."""
    try:
        return _PROPS[op_type]
    except KeyError:
        known = ", ".join(repr(n) for n in sorted(_PROPS)) or "none"
        raise MXNetError(f"Custom: op_type {op_type!r} is not registered; decorate its "
                         f"CustomOpProp subclass with @rm.operator.register({op_type!r}) "
                         f"before building or loading the graph (registered: {known})") from None


def registered(op_types: Sequence[str] | None = None) -> dict[str, type]:
    """The registered prop classes (of ``op_types`` only, if given), by op_type."""
    if op_types is None:
        return dict(_PROPS)
    return {t: get_prop(t) for t in op_types}


def _cloudpickle():
    try:
        from ray import cloudpickle
    except ImportError:  # plain cloudpickle works the same where Ray is absent
        import cloudpickle
    return cloudpickle


def pack_props(symbol: Any) -> bytes | None:
    """The prop classes of the ``Custom`` nodes of ``symbol``, pickled by value (their
    modules need not be importable where they are unpacked: a test file, a notebook), or
    None when the symbol has no custom op. Ray workers get them with the symbol's JSON and
    register them with :func:`unpack_props` before loading it.

    Classes defined in ``raymod`` itself travel by reference. The module of a prop is
    pickled by value, so the CustomOp classes and helpers it defines travel along; ones it
    imports from elsewhere must be importable on the workers.
    """
    types = sorted({n.op.op_type for n in symbol.topo()
                    if n.op is not None and n.op.name == "Custom"})
    if not types:
        return None
    props = registered(types)
    cp = _cloudpickle()
    modules = {c.__module__ for c in props.values()} - {"__main__"}
    added = [m for m in modules if not m.startswith("raymod.") and m in sys.modules
             and m not in cp.list_registry_pickle_by_value()]
    for m in added:
        cp.register_pickle_by_value(sys.modules[m])
    try:
        return cp.dumps(props)
    finally:
        for m in added:
            cp.unregister_pickle_by_value(sys.modules[m])


def unpack_props(blob: bytes | None) -> list[str]:
    """Register the prop classes packed by :func:`pack_props`; returns their op_types."""
    if not blob:
        return []
    props = _cloudpickle().loads(blob)
    for op_type, prop_cls in props.items():
        register(op_type)(prop_cls)
    return sorted(props)
