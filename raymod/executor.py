"""``Executor``: a symbol bound to arrays on one device.

At bind time the graph becomes a :class:`Plan` (topological steps over numbered slots, which
slots each step reads and writes, which values backward keeps, when every other value can be
dropped, which inputs need a gradient). ``forward`` and ``backward`` only walk the plan.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from .array_view import plain, show_bound
from .base import MXNetError, names_list
from .context import Context
from .host_memory import keep_freed_memory
from .ops.base import Op, known
from .sparse import RowSparseArray, cast_storage, is_sparse, stype_of
from .sparse import zeros as sparse_zeros
from .sparse.plan import densifying, plan_storage
from .symbol.storage import check_stype, variable_stype
from .symbol.infer import shape_values, type_values
from .symbol.symbol import Symbol

GRAD_REQS = ("write", "add", "null")


@dataclass
class Step:
    """One op node of the plan."""

    op: Op
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    aux: tuple[int, ...]
    need_grad: tuple[bool, ...]
    keep_in: tuple[bool, ...]
    keep_out: tuple[bool, ...]
    forward: Callable = None  # op.forward, with output shapes bound for creation ops
    # per input: index of the argument whose grad array backward may write into, else -1
    grad_out: tuple[int, ...] = ()

    @property
    def has_backward(self) -> bool:
        return any(self.need_grad)


@dataclass
class Plan:
    """What an executor runs, fixed at bind; printable for debugging."""

    steps: list[Step]
    slot_shapes: list[tuple]
    slot_dtypes: list[np.dtype]
    arg_slots: list[int]
    head_slots: list[int]
    free_infer: list[tuple[int, ...]] = field(default_factory=list)
    free_train: list[tuple[int, ...]] = field(default_factory=list)

    def __str__(self) -> str:
        rows = [f"{'step':>4} {'op':<24} {'name':<24} inputs -> outputs (backward keeps)"]
        for i, st in enumerate(self.steps):
            keep = [s for s, k in zip(st.inputs, st.keep_in) if k] + \
                   [s for s, k in zip(st.outputs, st.keep_out) if k]
            rows.append(f"{i:>4} {st.op.name:<24} {st.name:<24} {list(st.inputs)} -> "
                        f"{list(st.outputs)} ({keep})")
        return "\n".join(rows)


def _plan_grad_outputs(steps: list[Step], arg_names: list[str], arg_slots: list[int],
                       grad_req: dict[str, str]) -> None:
    """Let an op write a gradient straight into an argument's grad array when it is the
    argument's only reader and the request is 'write' (no accumulation to do)."""
    readers: dict[int, int] = {}
    for st in steps:
        for s in st.inputs:
            readers[s] = readers.get(s, 0) + 1
    arg_of_slot = {s: k for k, s in enumerate(arg_slots)}
    for st in steps:
        if not st.op.writes_grad_out:
            continue
        st.grad_out = tuple(
            arg_of_slot[s] if (s in arg_of_slot and need and readers[s] == 1
                               and grad_req[arg_names[arg_of_slot[s]]] == "write") else -1
            for s, need in zip(st.inputs, st.need_grad))


def build_plan(symbol: Symbol, shapes: dict, dtypes: dict, needs_grad: dict[str, bool],
               grad_req: dict[str, str] | None = None) -> Plan:
    """Number every graph entry, order the steps and work out value lifetimes."""
    slots: dict[tuple[int, int], int] = {}
    slot_shapes, slot_dtypes = [], []

    def slot(entry: tuple[int, int]) -> int:
        if entry not in slots:
            slots[entry] = len(slot_shapes)
            slot_shapes.append(shapes[entry])
            slot_dtypes.append(dtypes[entry])
        return slots[entry]

    aux_index = {name: i for i, name in enumerate(symbol.list_auxiliary_states())}
    arg_names = symbol.list_arguments()
    variables = {n.name: n for n in symbol.topo() if n.is_variable}
    arg_slots = [slot((id(variables[n]), 0)) for n in arg_names]
    grad_slot = {s: needs_grad[n] for s, n in zip(arg_slots, arg_names)}
    steps = []
    for node in symbol.topo():
        if node.is_variable:
            continue
        op, nargs = node.op, node.num_args()
        ins = tuple(slot((id(i), k)) for i, k in node.inputs[:nargs])
        outs = tuple(slot((id(node), k)) for k in range(len(op.list_outputs())))
        no_grad = set(op.no_grad_inputs)
        need = tuple(grad_slot.get(s, False) and name not in no_grad
                     for s, name in zip(ins, op.list_arguments()))
        for s in outs:
            grad_slot[s] = any(need)
        forward = op.forward
        if op.needs_out_shapes:
            forward = functools.partial(op.forward, out_shapes=[slot_shapes[s] for s in outs],
                                        out_dtypes=[slot_dtypes[s] for s in outs])
        steps.append(Step(op, node.name, ins, outs,
                          tuple(aux_index[i.name] for i, _ in node.inputs[nargs:]), need,
                          tuple(k in op.retain_inputs for k in range(len(ins))),
                          tuple(k in op.retain_outputs for k in range(len(outs))), forward))
    head_slots = [slots[(id(n), k)] for n, k in symbol.outputs]
    if grad_req is not None:
        _plan_grad_outputs(steps, arg_names, arg_slots, grad_req)
    plan = Plan(steps, slot_shapes, slot_dtypes, arg_slots, head_slots)
    _plan_lifetimes(plan)
    return plan


def _plan_lifetimes(plan: Plan) -> None:
    """Drop each value after its last reader, unless it is a head, an argument or kept."""
    last_use = {}
    for i, st in enumerate(plan.steps):
        for s in st.outputs:
            last_use.setdefault(s, i)
        for s in st.inputs:
            last_use[s] = i
    kept = set()
    for st in plan.steps:
        if st.has_backward:
            kept.update(s for s, k in zip(st.inputs, st.keep_in) if k)
            kept.update(s for s, k in zip(st.outputs, st.keep_out) if k)
    pinned = set(plan.head_slots) | set(plan.arg_slots)
    infer = [[] for _ in plan.steps]
    train = [[] for _ in plan.steps]
    for s, i in last_use.items():
        if s in pinned:
            continue
        infer[i].append(s)
        if s not in kept:
            train[i].append(s)
    plan.free_infer = [tuple(f) for f in infer]
    plan.free_train = [tuple(f) for f in train]


def _normalise_grad_req(grad_req, arg_names: list[str]) -> dict[str, str]:
    if isinstance(grad_req, str):
        reqs = {n: grad_req for n in arg_names}
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise MXNetError(f"grad_req: {len(grad_req)} entries for {len(arg_names)} arguments")
        reqs = dict(zip(arg_names, grad_req))
    elif isinstance(grad_req, Mapping):
        unknown = set(grad_req) - set(arg_names)
        if unknown:
            raise MXNetError(f"grad_req names unknown argument(s) {names_list(unknown)}")
        reqs = {n: grad_req.get(n, "null") for n in arg_names}
    else:
        raise TypeError(f"grad_req must be a str, list or dict, got {type(grad_req).__name__}")
    for name, req in reqs.items():
        if req not in GRAD_REQS:
            raise MXNetError(f"grad_req of {name!r} must be one of {GRAD_REQS}, got {req!r}")
    return reqs


def _array_contexts(symbol: Symbol, ctx: Context, group2ctx: dict | None) -> dict:
    """Argument name -> the context its arrays report, from ``ctx_group`` attributes.

    All host memory is one: on a CPU executor a variable whose group maps to ``cpu(i)``
    reports ``cpu(i)``, as in MXNet (the arrays are where they are). A group mapped to
    another device kind keeps the executor's context (raymod runs a graph on one device).
    """
    if not group2ctx:
        return {}
    found = {}
    for node in symbol.topo():
        group = node.attrs.get("__ctx_group__") if node.is_variable else None
        target = group2ctx.get(group) if group is not None else None
        if isinstance(target, (list, tuple)):
            target = target[0] if target else None
        if target is not None and target.device_type == ctx.device_type:
            found[node.name] = target
    return found


class Executor:
    """A bound symbol: arrays for every argument, gradient and auxiliary state on ``ctx``.

    Made by :meth:`Symbol.simple_bind` or :meth:`Symbol.bind`; not constructed directly.
    """

    def __init__(self, symbol: Symbol, ctx: Context, arg_arrays: list, grad_arrays: list,
                 aux_arrays: list, grad_req: dict[str, str], plan: Plan,
                 group2ctx: dict | None = None):
        self._symbol = symbol
        self._ctx = ctx
        self._xp = ctx.xp
        if self._xp is np:  # steps reuse their freed blocks instead of faulting pages back in
            keep_freed_memory()
        self._grad_req = grad_req
        self.plan = plan
        self._arg_names = symbol.list_arguments()
        self.slot_stypes, _, fallback = plan_storage(
            plan.steps, plan.arg_slots, [stype_of(a) for a in arg_arrays], len(plan.slot_shapes))
        self._aux_names = symbol.list_auxiliary_states()
        # user code sees the arrays through array_view.show (NDArray views under the MXNet
        # compatibility layer); kernels and the step below use the plain arrays
        self._group2ctx = group2ctx
        self._arg_ctx = _array_contexts(symbol, ctx, group2ctx)
        grad_arrays = self._grads = [plain(g) for g in grad_arrays]
        aux_arrays = self._aux_plain = [plain(a) for a in aux_arrays]
        self.arg_arrays = [self._show_arg(n, a) for n, a in zip(self._arg_names, arg_arrays)]
        self.grad_arrays = [None if g is None else self._show_arg(n, g)
                            for n, g in zip(self._arg_names, grad_arrays)]
        self.aux_arrays = [show_bound(a, ctx) for a in aux_arrays]
        self.arg_dict = dict(zip(self._arg_names, self.arg_arrays))
        self.grad_dict = {n: g for n, g in zip(self._arg_names, self.grad_arrays)
                          if g is not None}
        self.aux_dict = dict(zip(self._aux_names, self.aux_arrays))
        # one spare slot past the graph's always holds None: backward reads it for the values
        # an op does not retain, so gathering them is a plain lookup
        self._values: list = [None] * (len(plan.slot_shapes) + 1)
        for slot, array in zip(plan.arg_slots, arg_arrays):  # pinned: never freed
            self._values[slot] = plain(array)
        # what forward and backward read per step, resolved once
        self._forward_steps = [(densifying(st.forward, st.name) if fall else st.forward,
                                st.inputs, st.outputs, st.aux, st, free_i, free_t)
                               for st, free_i, free_t, fall in
                               zip(plan.steps, plan.free_infer, plan.free_train, fallback)]
        none = len(plan.slot_shapes)
        self._backward_steps = [
            (i, densifying(st.op.backward, st.name) if fallback[i] else st.op.backward,
             st.outputs, st.op.is_loss,
             tuple(s if k else none for s, k in zip(st.inputs, st.keep_in)),
             tuple(s if k else none for s, k in zip(st.outputs, st.keep_out)),
             st.need_grad,
             tuple((k, s) for k, (s, need) in enumerate(zip(st.inputs, st.need_grad)) if need),
             {"grad_out": [grad_arrays[k] if k >= 0 else None for k in st.grad_out]}
             if st.grad_out else {})
            for i, st in reversed(list(enumerate(plan.steps))) if st.has_backward]
        self._grad_targets = [(name, s, g, grad_req[name] == "write")
                              for name, s, g in zip(self._arg_names, plan.arg_slots, grad_arrays)
                              if g is not None]
        self._saved: list = [None] * len(plan.steps)
        self._forwarded = False
        # as MXNet, backward may follow an inference forward: an executor that computes
        # gradients keeps what backward reads in both modes
        self._keep_for_backward = bool(self._backward_steps)
        # default head gradients: None for loss heads (they ignore it), ones otherwise
        loss_slots = {s for st in plan.steps if st.op.is_loss for s in st.outputs}
        self._head_defaults: list | None = None
        self._zero_grads: dict[int, Any] = {}  # see _missing_grad
        self._loss_heads = [s in loss_slots for s in plan.head_slots]
        self._monitor = None
        # set once an executor shares its outputs' memory with another (see reshape)
        self._output_buffers: list | None = None
        # as MXNet's, the outputs exist from bind on (zeros until the first forward)
        with ctx.scope():
            self.outputs: list = [show_bound(self._values[s] if self._values[s] is not None
                                       else self._xp.zeros(plan.slot_shapes[s],
                                                           plan.slot_dtypes[s]), ctx)
                                  for s in plan.head_slots]

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def simple_bind(cls, symbol: Symbol, ctx: Context, grad_req="write", type_dict=None,
                    shared_arg_names=None, shared_exec: "Executor | None" = None,
                    shared_buffer: dict | None = None, shapes: dict | None = None,
                    group2ctx: dict | None = None, stype_dict: dict | None = None) -> "Executor":
        """See :meth:`Symbol.simple_bind`."""
        shapes = dict(shapes or {})
        for name, shape in shapes.items():
            if not isinstance(shape, (tuple, list)) or not all(
                    isinstance(d, (int, np.integer)) for d in shape):
                raise TypeError(f"simple_bind: shape of {name!r} must be a tuple of ints, "
                                f"got {type(shape).__name__}")
        arg_names = symbol.list_arguments()
        reqs = _normalise_grad_req(grad_req, arg_names)
        values, types = cls._infer(symbol, shapes, type_dict or {}, "simple_bind")
        xp = ctx.xp
        variables = {n.name: n for n in symbol.topo() if n.is_variable}
        shared_args = set(shared_arg_names) if shared_arg_names is not None else None
        plan = build_plan(symbol, values, types, {n: r != "null" for n, r in reqs.items()},
                          reqs)
        stypes = {n: variable_stype(variables[n]) for n in arg_names}
        for name, stype in (stype_dict or {}).items():
            if name not in stypes:
                raise MXNetError(f"simple_bind: stype_dict names {name!r}, which is not an "
                                 f"argument; arguments: {', '.join(arg_names)}")
            stypes[name] = check_stype(stype, f"simple_bind: stype_dict[{name!r}]")
        _, grad_stypes, _ = plan_storage(plan.steps, plan.arg_slots,
                                         [stypes[n] for n in arg_names], len(plan.slot_shapes))
        grad_stypes = dict(zip(arg_names, grad_stypes))

        def allocate(name: str, pool: dict | None, buffer_ok: bool, stype: str = "default"):
            key = (id(variables[name]), 0)
            shape, dtype = values[key], types[key]
            if pool is not None and name in pool:
                old = pool[name]
                if tuple(old.shape) == shape and old.dtype == dtype and stype_of(old) == stype:
                    return old
            if stype != "default":  # a holder: a batch's or a pull's contents go into it
                with ctx.scope():
                    return sparse_zeros(stype, shape, dtype, xp)
            if buffer_ok and shared_buffer is not None:
                old = shared_buffer.get(name)
                size = int(np.prod(shape))
                if old is not None and old.dtype == dtype and old.size >= size:
                    return old.reshape(-1)[:size].reshape(shape)
                with ctx.scope():
                    new = xp.zeros(shape, dtype)
                shared_buffer[name] = new
                return new
            with ctx.scope():
                return xp.zeros(shape, dtype)

        def shares(name: str) -> bool:
            return shared_exec is not None and (shared_args is None or name in shared_args)

        args, grads = [], []
        for name in arg_names:
            is_param = shared_args is not None and name in shared_args
            args.append(allocate(name, shared_exec.arg_dict if shares(name) else None,
                                 not is_param, stypes[name]))
            grads.append(None if reqs[name] == "null" else
                         allocate(name, shared_exec.grad_dict if shares(name) else None, False,
                                  grad_stypes[name]))
        aux = [allocate(n, shared_exec.aux_dict if shared_exec else None, False)
               for n in symbol.list_auxiliary_states()]
        return cls(symbol, ctx, args, grads, aux, reqs, plan, group2ctx)

    @classmethod
    def bind(cls, symbol: Symbol, ctx: Context, args, args_grad=None, grad_req="write",
             aux_states=None, group2ctx: dict | None = None) -> "Executor":
        """See :meth:`Symbol.bind`."""
        arg_names = symbol.list_arguments()
        aux_names = symbol.list_auxiliary_states()
        args = cls._as_list(args, arg_names, "args", required=True)
        aux = cls._as_list(aux_states, aux_names, "aux_states", required=bool(aux_names))
        if args_grad is None:
            grads = [None] * len(arg_names)
            reqs = {n: "null" for n in arg_names}
        else:
            grads = cls._as_list(args_grad, arg_names, "args_grad", required=False)
            reqs = _normalise_grad_req(grad_req, arg_names)
            reqs = {n: (r if g is not None else "null") for (n, r), g in zip(reqs.items(), grads)}
        shapes = {n: tuple(a.shape) for n, a in zip(arg_names + aux_names, args + aux)}
        dtypes = {n: a.dtype for n, a in zip(arg_names + aux_names, args + aux)}
        values, types = cls._infer(symbol, shapes, dtypes, "bind")
        for name, g, a in zip(arg_names, grads, args):
            if g is not None and tuple(g.shape) != tuple(a.shape):
                raise MXNetError(f"bind: gradient array of {name!r} has shape {tuple(g.shape)}, "
                                 f"the argument has {tuple(a.shape)}")
        plan = build_plan(symbol, values, types, {n: r != "null" for n, r in reqs.items()},
                          reqs)
        return cls(symbol, ctx, args, grads, aux, reqs, plan, group2ctx)

    @staticmethod
    def _as_list(arrays, names: list[str], what: str, required: bool) -> list:
        if arrays is None:
            arrays = {}
        if isinstance(arrays, Mapping):
            missing = [n for n in names if n not in arrays]
            if missing and required:
                raise MXNetError(f"bind: {what} is missing {names_list(missing)}; "
                                 f"needed: {', '.join(names)}")
            extra = set(arrays) - set(names)
            if extra:
                raise MXNetError(f"bind: {what} has unknown name(s) {names_list(extra)}")
            return [arrays.get(n) for n in names]
        arrays = list(arrays)
        if len(arrays) != len(names):
            raise MXNetError(f"bind: {what} has {len(arrays)} arrays, expected {len(names)} "
                             f"({', '.join(names)})")
        return arrays

    @staticmethod
    def _infer(symbol: Symbol, shapes: dict, dtypes: dict, what: str):
        names = symbol.list_inputs()
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise MXNetError(f"{what}: several different variables are named "
                             f"{names_list(duplicates)}; variable names must be unique")
        values = shape_values(symbol, shapes)
        unknown = [n.name for n in symbol.topo()
                   if n.is_variable and not known(values.get((id(n), 0)))]
        if unknown:
            given = ", ".join(f"{k}={v}" for k, v in shapes.items())
            raise MXNetError(f"{what}: cannot infer the shape of {names_list(unknown)} from the "
                             f"given shapes ({given or 'none'}); give them explicitly")
        unknown_entries = [e for n in symbol.topo() if n.op is not None
                           for e in ((id(n), k) for k in range(len(n.op.list_outputs())))
                           if not known(values.get(e))]
        if unknown_entries:
            raise MXNetError(f"{what}: some operator outputs have no inferable shape")
        types = type_values(symbol, {k: np.dtype(v) for k, v in dtypes.items()})
        float32 = np.dtype("float32")
        for key in values:
            types.setdefault(key, float32)
        return values, types

    # --- running ------------------------------------------------------------------------------
    def forward(self, is_train: bool = False, **kwargs) -> list:
        """Run the graph. ``kwargs`` are copied into the named argument arrays first."""
        xp = self._xp
        for name, value in kwargs.items():
            target = self.arg_dict.get(name)
            if target is None:
                raise MXNetError(f"forward: unknown argument {name!r}; arguments: "
                                 f"{', '.join(self._arg_names)}")
            if tuple(value.shape) != tuple(target.shape):
                raise MXNetError(f"forward: {name!r} has shape {tuple(value.shape)}, the executor "
                                 f"was bound with {tuple(target.shape)} (use reshape)")
            target[...] = value if is_sparse(target) else xp.asarray(value)
        vals, saved, aux, monitor = self._values, self._saved, self._aux_plain, self._monitor
        # what ops save for backward (BatchNorm: its centred data) is dropped at once by an
        # executor with nothing to differentiate, as the values inference frees are
        keep_saved = self._keep_for_backward
        train_frees = is_train or keep_saved
        with self._ctx.scope():
            for i, (forward, inputs, outputs, aux_ids, st, free_infer, free_train) in \
                    enumerate(self._forward_steps):
                outs, kept = forward(xp, [vals[s] for s in inputs],
                                     [aux[k] for k in aux_ids] if aux_ids else [], is_train)
                saved[i] = kept if keep_saved else None
                for s, o in zip(outputs, outs):
                    vals[s] = o
                if monitor is not None:
                    self._report(st, outs)
                for s in free_train if train_frees else free_infer:
                    vals[s] = None
        self._forwarded = True
        ctx = self._ctx
        if self._output_buffers is None:
            self.outputs = [show_bound(vals[s], ctx) for s in self.plan.head_slots]
        else:  # shared with a reshaped executor: results go into the one memory
            for target, s in zip(self._output_buffers, self.plan.head_slots):
                target[...] = vals[s]
            self.outputs = [show_bound(b, ctx) for b in self._output_buffers]
        return self.outputs

    def backward(self, out_grads=None, is_train: bool = True) -> None:
        """Gradients of the outputs' heads into :attr:`grad_arrays`, per ``grad_req``.

        ``out_grads`` are the head gradients (one per output); loss heads ignore them and
        other heads default to ones. As in MXNet it may follow ``forward(is_train=False)``:
        it is then the gradient of the function that forward computed (inference Dropout
        passes gradients through; inference BatchNorm treats its moving statistics as
        constants).
        """
        if not self._forwarded:
            raise MXNetError("backward needs a forward first")
        xp, plan, vals, saved = self._xp, self.plan, self._values, self._saved
        grads: list = [None] * len(plan.slot_shapes)
        if out_grads is not None:
            if not isinstance(out_grads, (list, tuple)):
                out_grads = [out_grads]
            if len(out_grads) != len(plan.head_slots):
                raise MXNetError(f"backward: {len(out_grads)} out_grads for "
                                 f"{len(plan.head_slots)} outputs")
            for s, g in zip(plan.head_slots, out_grads):
                grads[s] = g if is_sparse(g) else xp.asarray(g)
        else:
            if self._head_defaults is None:
                self._head_defaults = [None if loss else self._ones_like_slot(s)
                                       for s, loss in zip(plan.head_slots, self._loss_heads)]
            for s, g in zip(plan.head_slots, self._head_defaults):
                grads[s] = g
        monitor = self._monitor
        with self._ctx.scope():
            for (i, backward, outputs, is_loss, kept_in, kept_out, need_grad, grad_inputs,
                 extra) in self._backward_steps:
                if len(outputs) == 1:  # most ops: no generator expressions to run
                    ogs = [grads[outputs[0]]]
                    if ogs[0] is None and not is_loss:
                        continue
                else:
                    ogs = [grads[s] for s in outputs]
                    if not is_loss and any(g is None for g in ogs):
                        if all(g is None for g in ogs):
                            continue
                        ogs = [self._missing_grad(s) if g is None else g
                               for s, g in zip(outputs, ogs)]
                in_grads = backward(xp, ogs, [vals[s] for s in kept_in],
                                    [vals[s] for s in kept_out], saved[i], list(need_grad),
                                    **extra)
                if monitor is not None:
                    self._report_backward(plan.steps[i], in_grads)
                for k, s in grad_inputs:
                    g = in_grads[k]
                    if g is not None:
                        grads[s] = g if grads[s] is None else grads[s] + g
                for s in outputs:
                    grads[s] = None
            for name, s, target, write in self._grad_targets:
                g = grads[s]
                if g is target:  # the op wrote it in place (grad_out)
                    continue
                if g is None:
                    if write:
                        target[...] = 0
                    continue
                if tuple(g.shape) != tuple(target.shape):
                    raise MXNetError(f"backward: gradient of {name!r} has shape "
                                     f"{tuple(g.shape)}, expected {tuple(target.shape)}")
                if is_sparse(g) and not is_sparse(target):
                    g = g.todense()
                elif is_sparse(target) and not is_sparse(g):  # a dense gradient, stored
                    g = cast_storage(g, target.stype)       # as its argument's holder
                if write:
                    target[...] = g
                else:
                    target += g

    def forward_backward(self, **kwargs) -> list:
        """``forward(is_train=True, **kwargs)`` then ``backward()``."""
        outputs = self.forward(is_train=True, **kwargs)
        self.backward()
        return outputs

    def _ones_like_slot(self, s: int):
        with self._ctx.scope():
            return self._xp.ones(self.plan.slot_shapes[s], self.plan.slot_dtypes[s])

    def _missing_grad(self, s: int):
        """The zero gradient of an output nothing reads (BatchNorm's mean and variance, say):
        made once per slot and shared, as ops never write into their output gradients
        (read-only under numpy, so one that did would fail loudly)."""
        zeros = self._zero_grads.get(s)
        if zeros is None:
            zeros = self._zero_grads[s] = self._zeros_like_slot(s)
            if isinstance(zeros, np.ndarray):
                zeros.flags.writeable = False
        return zeros

    def _zeros_like_slot(self, s: int):
        with self._ctx.scope():
            return self._xp.zeros(self.plan.slot_shapes[s], self.plan.slot_dtypes[s])

    # --- monitor ------------------------------------------------------------------------------
    def set_monitor_callback(self, callback, monitor_all: bool = False) -> None:
        """Call ``callback(name, array)`` for every op output during forward (and its
        inputs if ``monitor_all``), and every input gradient during backward."""
        self._monitor = (callback, monitor_all)

    def _report(self, st: Step, outs: list) -> None:
        callback, monitor_all = self._monitor
        if monitor_all:
            for name, s in zip(st.op.list_arguments(), st.inputs):
                callback(f"{st.name}_{name}", self._values[s])
        for name, o in zip(st.op.list_outputs(), outs):
            callback(f"{st.name}_{name}", o)

    def _report_backward(self, st: Step, in_grads: list) -> None:
        """Report each input's gradient under MXNet's backward-node names; one the graph
        does not need (a label's, or of an input with grad_req 'null') as zeros."""
        callback = self._monitor[0]
        single = len(st.inputs) == 1
        for k, (s, g) in enumerate(zip(st.inputs, in_grads)):
            if g is None:
                g = self._zeros_like_slot(s)
            callback(f"{st.name}_backward_output" + ("" if single else str(k)), g)

    # --- views --------------------------------------------------------------------------------
    @property
    def output_dict(self) -> dict[str, Any]:
        return dict(zip(self._symbol.list_outputs(), self.outputs))

    @property
    def symbol(self) -> Symbol:
        return self._symbol

    @property
    def ctx(self) -> Context:
        return self._ctx

    @property
    def grad_req(self) -> dict[str, str]:
        return dict(self._grad_req)

    def copy_params_from(self, arg_params: dict, aux_params: dict | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copy values into this executor's argument and auxiliary arrays, by name."""
        for params, table, what in ((arg_params, self.arg_dict, "argument"),
                                    (aux_params or {}, self.aux_dict, "auxiliary state")):
            for name, value in params.items():
                target = table.get(name)
                if target is None:
                    if allow_extra_params:
                        continue
                    raise MXNetError(f"copy_params_from: no {what} named {name!r}")
                if tuple(value.shape) != tuple(target.shape):
                    raise MXNetError(f"copy_params_from: {name!r} has shape {tuple(value.shape)}, "
                                     f"expected {tuple(target.shape)}")
                if is_sparse(target) and not is_sparse(value):
                    # a dense parameter value fills a row_sparse holder: every row is held
                    value = RowSparseArray.full(self._xp.array(value, dtype=target.dtype))
                target[...] = value if is_sparse(target) else self._xp.asarray(value)

    def rebind(self, replace: dict[int, Any]) -> None:
        """Use other memory for some bound arrays: ``replace`` maps ``id(old array)`` to
        the array (same shape and dtype) that takes its place from the next forward on.

        A worker binds parameters to the KVStore server's published block and gradients to
        its own push block this way, so a step copies neither. Call it between steps: a
        forward already run keeps what it read.
        """
        if not replace:
            return
        get = replace.get

        # a worker rebinds its parameters every step: one pass finds (and checks) the
        # replaced entries, and only those are written, into copies of the lists
        found: dict[str, list] = {"arg": [], "grad": [], "aux": []}
        # an entry may be named by the array user code sees (an NDArray view under the
        # compatibility layer) or by the plain array behind it (a group that was rebound)
        behind = {"arg": [self._values[s] for s in self.plan.arg_slots], "grad": self._grads,
                  "aux": self._aux_plain}
        for kind, arrays in (("arg", self.arg_arrays), ("grad", self.grad_arrays),
                             ("aux", self.aux_arrays)):
            for i, old in enumerate(arrays):
                new = None if old is None else get(id(old), get(id(behind[kind][i])))
                if new is None or new is old:
                    continue
                if new.shape != old.shape or new.dtype != old.dtype:
                    raise MXNetError(f"rebind: an array of shape {tuple(old.shape)} "
                                     f"{old.dtype} cannot become {tuple(new.shape)} {new.dtype}")
                found[kind].append((i, new))
        if found["arg"]:
            self.arg_arrays, self.arg_dict = list(self.arg_arrays), dict(self.arg_dict)
            for i, new in found["arg"]:
                name = self._arg_names[i]
                self.arg_arrays[i] = self.arg_dict[name] = self._show_arg(name, new)
                self._values[self.plan.arg_slots[i]] = plain(new)
        if found["aux"]:
            self.aux_arrays, self.aux_dict = list(self.aux_arrays), dict(self.aux_dict)
            self._aux_plain = list(self._aux_plain)
            for i, new in found["aux"]:
                self.aux_arrays[i] = self.aux_dict[self._aux_names[i]] = \
                    show_bound(new, self._ctx)
                self._aux_plain[i] = plain(new)
        if found["grad"]:  # gradients sit in more places; they move rarely (a new push block)
            grads = list(self._grads)
            moved = {}  # id(old plain array) -> new plain array
            self.grad_arrays = list(self.grad_arrays)
            for i, new in found["grad"]:
                moved[id(grads[i])] = grads[i] = plain(new)
                self.grad_arrays[i] = self._show_arg(self._arg_names[i], new)
            self._grads = grads
            self.grad_dict = {n: g for n, g in zip(self._arg_names, self.grad_arrays)
                              if g is not None}

            def swap(a):
                return a if a is None else moved.get(id(a), a)

            self._grad_targets = [(n, s, swap(g), w) for n, s, g, w in self._grad_targets]
            self._backward_steps = [
                step[:-1] + ({"grad_out": [swap(g) for g in step[-1]["grad_out"]]}
                             if step[-1] else {},)
                for step in self._backward_steps]

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **kwargs) -> "Executor":
        """A new executor for new input shapes, on the memory of this one (MXNet's semantics).

        Shapes are inferred from ``kwargs`` alone. An array whose shape stays is shared as
        is; one that shrinks (or keeps its size) becomes a view of the first elements of the
        old one, so writes to either show in both; one that grows needs
        ``allow_up_sizing=True`` and gets new memory. An argument not in ``kwargs`` (or an
        auxiliary state) may change shape only with ``partial_shaping=True``. Do not run the
        two executors at once: they share arrays.

        Parameters
        ----------
        partial_shaping : bool, default False
            Let arguments not named in ``kwargs`` change shape.
        allow_up_sizing : bool, default False
            Let arrays grow beyond their current size (allocating new ones).
        **kwargs
            New shapes of inputs, e.g. ``data=(32, 784)``.
        """
        values = shape_values(self._symbol, kwargs)
        variables = {n.name: n for n in self._symbol.topo() if n.is_variable}

        def resized(name: str, array, given: bool):
            shape = values.get((id(variables[name]), 0))
            if shape is None or tuple(shape) == tuple(array.shape):
                return array
            shape = tuple(shape)
            if is_sparse(array):  # a holder: the next batch fills it
                with self._ctx.scope():
                    return sparse_zeros(array.stype, shape, array.dtype, self._xp)
            if not (given or partial_shaping):
                raise MXNetError(f"reshape: the shape of {name!r}, not given, changes from "
                                 f"{tuple(array.shape)} to {shape}; pass "
                                 "partial_shaping=True if this is intended")
            size = int(np.prod(shape))
            if size > array.size:
                if not allow_up_sizing:
                    raise MXNetError(f"reshape: the new shape {shape} of {name!r} is larger "
                                     f"than the original {tuple(array.shape)}; set "
                                     "allow_up_sizing=True to allocate new arrays (binding "
                                     "the largest shape first and shrinking is cheaper)")
                with self._ctx.scope():
                    return self._xp.zeros(shape, array.dtype)
            return array.reshape(-1)[:size].reshape(shape)

        args = [resized(n, a, n in kwargs) for n, a in zip(self._arg_names, self.arg_arrays)]
        grads = [None if g is None else resized(n, g, n in kwargs)
                 for n, g in zip(self._arg_names, self.grad_arrays)]
        aux = [resized(n, a, False) for n, a in zip(self._aux_names, self.aux_arrays)]
        new = Executor.bind(self._symbol, self._ctx, args, args_grad=grads,
                            grad_req=self._grad_req, aux_states=aux, group2ctx=self._group2ctx)
        # outputs share memory too, as in MXNet: from now on both executors write their
        # results into buffers (this one's own, the new one's a view of them where it fits)
        own = self._pin_outputs()
        new._output_buffers = [
            buf.reshape(-1)[:out.size].reshape(out.shape)
            if out.size <= buf.size and out.dtype == buf.dtype else plain(out)
            for buf, out in zip(own, new.outputs)]
        new.outputs = [show_bound(b, self._ctx) for b in new._output_buffers]
        return new

    def _show_arg(self, name: str, array: Any) -> Any:
        """An argument's (or its gradient's) array as user code sees it, with the context of
        its ``ctx_group``."""
        return show_bound(array, self._arg_ctx.get(name, self._ctx))

    def _pin_outputs(self) -> list:
        """Give the outputs buffers of their own that every later forward writes into."""
        if self._output_buffers is None:
            with self._ctx.scope():
                self._output_buffers = [self._xp.array(plain(o), copy=True)
                                        for o in self.outputs]
            self.outputs = [show_bound(b, self._ctx) for b in self._output_buffers]
        return self._output_buffers

    def debug_str(self) -> str:
        """The plan, one line per step."""
        return str(self.plan)
