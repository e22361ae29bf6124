"""Every registered operator as an imperative function: ``mx.nd.FullyConnected(x, w, b, 4)``.

:data:`FUNCTIONS` holds one function per name in the operator registry
(:data:`raymod.ops.base.OPS`), made from the op's class alone, so an op added to the
registry gets its function with nothing else to write. The functions follow MXNet 1.x's
generated ``mx.nd`` functions:

* inputs come positionally or by their input names (``data=``, ``weight=``, ``label=``),
  the auxiliary states (BatchNorm's ``moving_mean``, ``moving_var``) after the arguments;
  further positional values are the attributes in the op's declared order;
* ops taking any number of inputs (``concat``, ``add_n``, ``stack``, ``Custom``) take them
  as ``*data`` and count them into ``num_args``;
* attributes are keywords with MXNet's names, parsed by the op's :class:`~raymod.ops.base.Param`
  (a bad value raises :class:`~raymod.base.AttributeValueError` naming the attribute);
* ``out=`` (an array, or a list for several outputs) receives the result and is returned;
  ``name=`` is accepted and ignored;
* the op runs forward once with ``is_train=False`` (MXNet outside ``autograd.record``) on
  the inputs' array module (numpy, or CuPy for CuPy arrays), after the op's ``infer_shape``
  checked the input shapes; auxiliary states are updated in place;
* the result is an NDArray, or a list of them when the op shows several outputs (as a
  symbol lists them: BatchNorm shows one unless ``output_mean_var``). A result never shares
  memory with an input (``reshape`` copies, as MXNet's operator does);
* sparse inputs (``CSRNDArray``, ``RowSparseNDArray``) reach an op that computes on them as
  they are (:meth:`~raymod.ops.base.Op.takes_sparse`: ``dot`` with a csr lhs,
  ``cast_storage``, ``_sparse_retain``, the zero-preserving unary ops on csr, ...); any
  other op gets them densified and gives dense results, as MXNet's storage fallback. A
  sparse result comes back as ``CSRNDArray`` / ``RowSparseNDArray``; ``out=`` may be a
  sparse array, which takes the result in its own storage.

Ops without inputs (``_zeros``, ``_random_uniform``, ``_arange``) run on their ``ctx``
attribute's device (a Context or ``'gpu(0)'``), else on the current context.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from ...array_view import plain
from ...base import MXNetError, ShapeError
from ...context import Context, context_of, current_context
from ...ops.base import OPS, REQUIRED, Op, known, merge_shape
from ...sparse import is_sparse, stype_of
from ..ndarray import is_array, wrap
from ..sparse import unwrap

__all__ = ["FUNCTIONS", "function", "get", "invoke", "Namespace", "contrib", "op", "internal"]


def _is_input(value: Any) -> bool:
    """Whether ``value`` is an array an op takes as an input: dense or sparse."""
    return is_array(value) or is_sparse(value)


def _takes_star(op_cls: type[Op]) -> bool:
    """Whether MXNet's function takes the inputs as ``*data`` (a count attribute, or inputs
    that only the instance knows, as a custom op's)."""
    return bool(op_cls.variadic or op_cls.any_attrs)


def _slots(op_cls: type[Op]) -> tuple[str, ...]:
    """The input names of MXNet's signature: arguments, then auxiliary states."""
    return tuple(op_cls.inputs) + tuple(op_cls.aux)


def _split_call(op_name: str, op_cls: type[Op], args: tuple, kwargs: dict):
    """``(positional arrays, arrays by name, attributes)`` of one call, by MXNet's signature."""
    if _takes_star(op_cls):
        for i, a in enumerate(args):
            if not _is_input(a):
                raise TypeError(f"{op_name}: positional argument {i + 1} must be an array (it "
                                f"takes its inputs as *data; give attributes by keyword), got "
                                f"{type(a).__name__}")
        positional, slots = list(args), ()
    else:
        positional, slots = [], _slots(op_cls)
        signature = slots + tuple(op_cls.params)
        if len(args) > len(signature):
            raise TypeError(f"{op_name} takes at most {len(signature)} positional arguments "
                            f"({', '.join(signature)}), got {len(args)}")
        for key, value in zip(signature, args):
            if key in kwargs:
                raise TypeError(f"{op_name} got {key!r} both by position and by keyword")
            kwargs[key] = value
    named, attrs = {}, {}
    for key, value in kwargs.items():
        if key in slots:
            if value is not None and not _is_input(value):
                raise TypeError(f"{op_name}: input {key!r} must be an array, got "
                                f"{type(value).__name__} (a Python scalar goes into an "
                                "attribute, e.g. _plus_scalar's 'scalar')")
            if value is not None:
                named[key] = value
        elif _is_input(value) and not slots:
            named[key] = value  # arg0 of a variadic op, a custom op's input by its name
        else:
            attrs[key] = value
    return positional, named, attrs


def _bind_inputs(op_name: str, op: Op, positional: list, named: dict) -> tuple[list, list]:
    """The given arrays in the instance's order, ``(arguments, auxiliary states)``."""
    arg_names, aux_names = op.list_arguments(), op.list_auxiliary_states()
    slots = arg_names + aux_names
    if len(positional) > len(slots):
        raise MXNetError(f"{op_name}: {len(positional)} input arrays given, it takes "
                         f"{len(slots)} ({', '.join(slots) or 'none'})")
    given = dict(zip(slots, positional))
    for key, value in named.items():
        if key in given:
            raise TypeError(f"{op_name} got input {key!r} both by position and by keyword")
        if key not in slots:
            raise MXNetError(f"{op_name}: unknown input {key!r}; with these attributes it "
                             f"takes {', '.join(slots) or 'no inputs'}")
        given[key] = value
    missing = [s for s in slots if s not in given]
    if missing:
        raise MXNetError(f"{op_name}: missing input(s) {', '.join(map(repr, missing))}; "
                         f"it takes {', '.join(slots)}")
    return [given[n] for n in arg_names], [given[n] for n in aux_names]


def _device(op_name: str, arrays: list, ctx_attr: Any) -> Context:
    """Where the op runs: the inputs' device (all must share one), else the ``ctx``
    attribute of an op without inputs, else the current context."""
    if arrays:
        devices = {context_of(unwrap(a).data if is_sparse(a) else a) for a in arrays}
        if len(devices) > 1:
            raise MXNetError(f"{op_name}: the inputs are on different devices "
                             f"({', '.join(sorted(map(str, devices)))}); copy them to one")
        return devices.pop()
    if isinstance(ctx_attr, Context):
        return ctx_attr
    found = re.fullmatch(r"\s*(cpu|gpu|cpu_pinned)\((\d+)\)\s*", str(ctx_attr or ""))
    return Context(found[1], int(found[2])) if found else current_context()


def _inferred(op_name: str, op: Op, args: list, aux: list) -> tuple[list, list]:
    """Output shapes and dtypes from the op's inference on the inputs, after checking the
    inputs' shapes against what the op infers for them."""
    n_out = len(op.list_outputs())
    try:
        in_s, out_s, aux_s = op.infer_shape([tuple(a.shape) for a in args], [None] * n_out)
        names = op.list_arguments() + op.list_auxiliary_states()
        for name, array, want in zip(names, args + aux, list(in_s) + list(aux_s)):
            merge_shape(tuple(array.shape), want, f"input {name!r} has shape "
                        f"{tuple(array.shape)}, the op expects")
    except ShapeError as err:
        said = str(err)  # some ops name themselves already
        raise ShapeError(said if said.startswith((f"{op_name}:", f"{op.name}:"))
                         else f"{op_name}: {said}") from None
    _, out_t, _ = op.infer_type([a.dtype for a in args], [None] * n_out)
    return list(out_s), list(out_t)


def _unshared(xp, output: Any, inputs: list) -> Any:
    """``output``, copied if it is (a view of) an input or shares memory with one (MXNet's
    results are new arrays); sparse arrays are compared by their stored arrays."""
    held = [p for i in inputs for p in (i._parts() if is_sparse(i) else (i,))]
    mine = output._parts() if is_sparse(output) else (output,)
    if any(output is i for i in inputs) or \
            any(xp.may_share_memory(o, i) for o in mine for i in held):
        return output.copy()
    return output


def _op_inputs(op: Op, args: list) -> list:
    """The arrays the op computes on: plain arrays, and the raymod sparse arrays inside
    sparse NDArrays when the op takes them as they are, else their dense copies (MXNet's
    storage fallback)."""
    inputs = [unwrap(a) if is_sparse(a) else plain(a) for a in args]
    if any(is_sparse(a) for a in inputs) and \
            not op.takes_sparse([stype_of(a) for a in inputs]):
        inputs = [a.todense() if is_sparse(a) else a for a in inputs]
    return inputs


def _store(op_name: str, out: Any, results: list) -> Any:
    """Write ``results`` into ``out`` (one array, or a list/tuple of them); returns ``out``."""
    targets = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(targets) != len(results):
        raise MXNetError(f"{op_name}: out= has {len(targets)} array(s), the op gives "
                         f"{len(results)} output(s)")
    for i, (target, value) in enumerate(zip(targets, results)):
        if not _is_input(target):
            raise TypeError(f"{op_name}: out= must hold arrays, got {type(target).__name__}")
        if tuple(target.shape) != tuple(value.shape):
            raise MXNetError(f"{op_name}: out= array {i} has shape {tuple(target.shape)}, "
                             f"the output has {tuple(value.shape)}")
        if is_sparse(target) or is_sparse(value):
            # a sparse out= takes the result in its own storage (a dense result is cast), a
            # dense one takes a sparse result densified
            if is_sparse(target):
                wrap(target)[:] = wrap(value)
            else:
                target[...] = unwrap(value).todense()
            continue
        if isinstance(target, np.ndarray) != isinstance(value, np.ndarray):
            # across host and device: copy explicitly (CuPy converts neither way by itself)
            value = value.get() if isinstance(target, np.ndarray) else \
                context_of(target).xp.asarray(value)
        target[...] = value
    return out


def invoke(op_name: str, args: tuple, kwargs: dict) -> Any:
    """Run the op registered as ``op_name`` once on arrays, MXNet's imperative way."""
    op_cls = OPS.get(op_name)
    kwargs = dict(kwargs)
    out = kwargs.pop("out", None)
    kwargs.pop("name", None)
    positional, named, attrs = _split_call(op_name, op_cls, args, kwargs)
    if op_cls.variadic and op_cls.variadic not in attrs:
        attrs[op_cls.variadic] = len(positional) or len(named)
    op = op_cls(**attrs)
    args_in, aux_in = _bind_inputs(op_name, op, positional, named)
    ctx = _device(op_name, args_in + aux_in, attrs.get("ctx"))
    out_shapes, out_dtypes = _inferred(op_name, op, args_in, aux_in)
    extra = {}
    if op.needs_out_shapes:
        if not all(known(s) or s == () for s in out_shapes):
            raise ShapeError(f"{op_name}: cannot infer the output shape(s) from the inputs "
                             f"and attributes (got {out_shapes})")
        extra = {"out_shapes": out_shapes, "out_dtypes": out_dtypes}
    xp = ctx.xp
    inputs = _op_inputs(op, args_in)
    with ctx.scope():
        outs, _ = op.forward(xp, inputs, [plain(a) for a in aux_in], False, **extra)
        shown = [_unshared(xp, o, inputs) for o in outs[:op.num_visible_outputs()]]
    if out is not None:
        return _store(op_name, out, shown)
    first = (args_in + aux_in)[:1]
    view_ctx = getattr(first[0], "context", None) if first else ctx
    return wrap(shown[0] if len(shown) == 1 else shown, view_ctx)


def _usage(op_name: str, op_cls: type[Op]) -> str:
    """The calling convention, as MXNet's generated signature reads."""
    star = _takes_star(op_cls)
    head = ["*data"] if star else [f"{s}=None" for s in _slots(op_cls)]
    head += [k if p.default is REQUIRED else f"{k}={p.default!r}"
             for k, p in op_cls.params.items() if k != op_cls.variadic]
    head += ["out=None", "name=None"] + (["**attributes"] if op_cls.any_attrs else [])
    return f"mx.nd.{op_name}({', '.join(head)})"


def function(op_name: str) -> Callable[..., Any]:
    """The imperative function of the op registered as ``op_name`` (made on each call: use
    :data:`FUNCTIONS` for the table)."""
    op_cls = OPS.get(op_name)

    def call(*args: Any, **kwargs: Any) -> Any:
        return invoke(op_name, args, kwargs)
    call.__name__ = call.__qualname__ = op_name
    call.__doc__ = f"{_usage(op_name, op_cls)}\n\n{op_cls.__doc__ or ''}"
    return call


#: registered name -> imperative function, for every name the registry has at import
FUNCTIONS: dict[str, Callable[..., Any]] = {name: function(name) for name in OPS.names()}


def get(name: str) -> Callable[..., Any] | None:
    """The function for ``name``, including ops registered after import; None if none."""
    fn = FUNCTIONS.get(name)
    if fn is None and name in OPS:
        fn = FUNCTIONS[name] = function(name)
    return fn


class Namespace:
    """``mx.nd.contrib``, ``mx.nd.op`` or ``mx.nd._internal``: the registered ops whose names
    ``keep`` accepts, under the name less ``prefix`` (``contrib.box_nms`` is
    ``_contrib_box_nms``)."""

    def __init__(self, label: str, prefix: str, keep: Callable[[str], bool]):
        self._label, self._prefix, self._keep = label, prefix, keep

    def __getattr__(self, short: str) -> Callable[..., Any]:
        name = self._prefix + short
        fn = None if short.startswith("__") or not self._keep(name) else get(name)
        if fn is None:
            raise AttributeError(f"{self._label} has no operator {short!r}")
        return fn

    def __dir__(self) -> list[str]:
        return sorted(n[len(self._prefix):] for n in OPS.names()
                      if n.startswith(self._prefix) and self._keep(n))

    def __repr__(self) -> str:
        return f"<{self._label}: {len(dir(self))} operators>"


#: MXNet's op modules under ``mx.nd``
contrib = Namespace("mx.nd.contrib", "_contrib_", lambda n: True)
op = Namespace("mx.nd.op", "", lambda n: not n.startswith("_"))
internal = Namespace("mx.nd._internal", "", lambda n: n.startswith("_"))
