"""``DataParallelExecutorGroup``: one process, one executor per device, a batch split across them."""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from .. import threads
from ..array_view import show
from ..base import NUMERIC_KINDS, MXNetError, as_logger, check_input_dtype
from ..context import Context, as_numpy
from ..sparse import cast_storage, is_sparse
from ..symbol.symbol import Symbol
from .slicing import batch_axis, split_input_slice, take_slice


def _desc(item) -> tuple[str, tuple, Any, str | None]:
    """(name, shape, dtype, layout) of a DataDesc or a ``(name, shape)`` pair."""
    if hasattr(item, "name") and hasattr(item, "shape"):
        return (item.name, tuple(item.shape), getattr(item, "dtype", np.float32),
                getattr(item, "layout", None))
    if len(item) == 4:  # already normalised
        return item[0], tuple(item[1]), item[2], item[3]
    return item[0], tuple(item[1]), np.float32, None


def check_batch_dtypes(what: str, names: Sequence[str], arrays) -> None:
    """TypeError naming the input when an array of a batch is not bool/int/uint/float
    (strings, objects): checked once per batch and input, before anything is loaded."""
    for name, array in zip(names, arrays or ()):
        dtype = getattr(array, "dtype", None)
        if dtype is None:
            continue
        kind = getattr(dtype, "kind", None)
        if kind is None or kind not in NUMERIC_KINDS:
            check_input_dtype(what, name, dtype)


class DataParallelExecutorGroup:
    """Executors of one symbol on several devices of one process, splitting each batch.

    Parameters
    ----------
    symbol : Symbol
        The network.
    contexts : list of Context
        One executor per context; several ``rm.cpu(i)`` split work in one process.
    workload : list of float, optional
        Share of the batch per context (equal by default).
    data_shapes, label_shapes : list of DataDesc or (name, shape)
        Input shapes of the whole batch; the batch axis comes from each layout.
    param_names : list of str
        Arguments that are trainable parameters.
    for_training : bool
        Allocate gradients (otherwise every grad_req is 'null').
    inputs_need_grad : bool
        Also compute gradients of the data inputs.
    shared_group : DataParallelExecutorGroup, optional
        Share parameter, gradient and input memory with this group (bucketing).
    fixed_param_names : list of str, optional
        Parameters that get no gradient.
    grad_req : str or list or dict, default 'write'
    state_names : list of str, optional
        Arguments that are states set by the user (``set_states``), not parameters.
    """

    def __init__(self, symbol: Symbol, contexts: Sequence[Context], workload, data_shapes,
                 label_shapes, param_names: Sequence[str], for_training: bool,
                 inputs_need_grad: bool, shared_group: "DataParallelExecutorGroup | None" = None,
                 logger=logging, fixed_param_names=None, grad_req="write", state_names=None,
                 group2ctxs=None):
        self.symbol = symbol
        self.contexts = list(contexts)
        self.workload = list(workload) if workload is not None else [1] * len(self.contexts)
        if len(self.workload) != len(self.contexts):
            raise ValueError(f"workload has {len(self.workload)} entries for "
                             f"{len(self.contexts)} contexts")
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = as_logger(logger)
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.shared_data_arrays = (shared_group.shared_data_arrays if shared_group
                                   else [{} for _ in self.contexts])
        self.output_names = symbol.list_outputs()
        self.output_layouts = [batch_axis(symbol[name].attr("__layout__"))
                               for name in self.output_names]
        self.num_outputs = len(self.output_names)
        self._grad_req_arg = grad_req
        self._group2ctxs = _per_context(group2ctxs, len(self.contexts))
        self.execs: list = []
        self.batch_size = None
        self.slices: list[slice] = []
        self.bind_exec(data_shapes, label_shapes, shared_group)

    @property
    def num_device(self) -> int:
        """Devices of this group (the optimizer's per-device index stride)."""
        return len(self.contexts)

    # --- binding ------------------------------------------------------------------------------
    def _grad_reqs(self, data_names: list[str]) -> dict[str, str]:
        if not self.for_training:
            return {n: "null" for n in self.arg_names}
        req = self._grad_req_arg
        if isinstance(req, dict):
            return {n: req.get(n, "null") for n in self.arg_names}
        if isinstance(req, (list, tuple)):
            return dict(zip(self.arg_names, req))
        reqs = {}
        for name in self.arg_names:
            if name in self.param_names:
                reqs[name] = "null" if name in self.fixed_param_names else req
            elif name in data_names:
                reqs[name] = req if self.inputs_need_grad else "null"
            else:
                reqs[name] = "null"
        return reqs

    def decide_slices(self, data_shapes) -> list[slice]:
        """Split the batch (read from the data shapes and layouts) over the contexts."""
        sizes = set()
        for item in data_shapes:
            name, shape, _, layout = _desc(item)
            axis = batch_axis(layout)
            if axis >= 0:
                sizes.add(shape[axis])
        if len(sizes) != 1:
            raise MXNetError(f"data inputs disagree on the batch size: {sorted(sizes)}")
        self.batch_size = sizes.pop()
        self.slices = split_input_slice(self.batch_size, self.workload)
        return self.slices

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape: bool = False):
        """Bind one executor per context for these input shapes."""
        data_shapes = [_desc(d) for d in data_shapes]
        label_shapes = [_desc(d) for d in (label_shapes or [])]
        missing = [n for n, *_ in data_shapes + label_shapes if n not in self.arg_names]
        if missing:
            raise MXNetError(f"inputs {missing} are not arguments of the symbol; "
                             f"arguments: {', '.join(self.arg_names)}")
        for what, descs in (("data", data_shapes), ("label", label_shapes)):
            for name, _, dtype, _ in descs:
                check_input_dtype(what, name, dtype)
        self.decide_slices(data_shapes)
        self.data_shapes, self.label_shapes = data_shapes, label_shapes or None
        self.data_names = [d[0] for d in data_shapes]
        self.label_names = [d[0] for d in label_shapes]
        self.data_layouts = [batch_axis(d[3]) for d in data_shapes]
        self.label_layouts = [batch_axis(d[3]) for d in label_shapes]
        reqs = self._grad_reqs(self.data_names)
        old_execs = self.execs
        execs = []
        for i, ctx in enumerate(self.contexts):
            shapes, types = {}, {}
            for name, shape, dtype, layout in data_shapes + label_shapes:
                axis = batch_axis(layout)
                n = self.slices[i].stop - self.slices[i].start
                shapes[name] = tuple(n if k == axis else d for k, d in enumerate(shape))
                types[name] = dtype
            if reshape:
                shared, names = old_execs[i], None
            elif shared_group is not None:
                shared, names = shared_group.execs[i], self.param_names + self.aux_names
            else:
                shared, names = None, None
            execs.append(self.symbol.simple_bind(
                ctx, grad_req=reqs, type_dict=types, shared_exec=shared,
                shared_arg_names=names, shared_buffer=self.shared_data_arrays[i],
                group2ctx=self._group2ctxs[i], **shapes))
        self.execs = execs
        self._collect_arrays(shared_group)

    def _collect_arrays(self, shared_group) -> None:
        index = {n: i for i, n in enumerate(self.arg_names)}
        self.data_arrays = [[(s, e.arg_dict[n]) for s, e in zip(self.slices, self.execs)]
                            for n in self.data_names]
        self.label_arrays = [[(s, e.arg_dict[n]) for s, e in zip(self.slices, self.execs)]
                             for n in self.label_names]
        self.state_arrays = [[e.arg_dict[n] for e in self.execs] for n in self.state_names]
        self.param_arrays = [[e.arg_arrays[index[n]] for e in self.execs]
                             for n in self.param_names]
        self.grad_arrays = ([[e.grad_arrays[index[n]] for e in self.execs]
                             for n in self.param_names] if self.for_training else [])
        self.aux_arrays = [[e.aux_arrays[i] for e in self.execs] for i in range(len(self.aux_names))]
        self.input_grad_arrays = ([[e.grad_dict[n] for e in self.execs] for n in self.data_names]
                                  if self.inputs_need_grad else [])
        shared = set()
        if shared_group is not None:
            for e in shared_group.execs:
                for a in list(e.arg_arrays) + list(e.grad_arrays) + list(e.aux_arrays):
                    if a is not None:
                        shared.add(id(a))
        total = 0
        for e in self.execs:
            for a in list(e.arg_arrays) + list(e.grad_arrays) + list(e.aux_arrays):
                if a is not None and id(a) not in shared and _owns_memory(a):
                    total += a.nbytes
        self._total_exec_bytes = total

    def reshape(self, data_shapes, label_shapes) -> None:
        """Rebind for new input shapes, keeping parameter memory."""
        new = ([_desc(d) for d in data_shapes], [_desc(d) for d in (label_shapes or [])] or None)
        if new == (self.data_shapes, self.label_shapes):
            return
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def rebind(self, replace: dict[int, Any]) -> None:
        """:meth:`Executor.rebind` on every executor: ``id(old array) -> new array``."""
        for e in self.execs:
            e.rebind(replace)

        def swap(block: list) -> list:
            return [replace.get(id(a), a) if a is not None else None for a in block]

        self.param_arrays = [swap(b) for b in self.param_arrays]
        self.grad_arrays = [swap(b) for b in self.grad_arrays]
        self.aux_arrays = [swap(b) for b in self.aux_arrays]

    # --- parameters ---------------------------------------------------------------------------
    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Copy parameter values into every executor."""
        for e in self.execs:
            e.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params: dict, aux_params: dict) -> None:
        """Write the device average of each parameter and auxiliary state into the dicts."""
        for names, blocks, target in ((self.param_names, self.param_arrays, arg_params),
                                      (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                mean = _host(block[0]).astype(np.float64) if len(block) > 1 else _host(block[0])
                for other in block[1:]:
                    mean = mean + _host(other)
                if len(block) > 1:
                    mean = mean / len(block)
                if name in target:
                    target[name][...] = mean
                else:
                    target[name] = np.array(mean, dtype=block[0].dtype)

    # --- running ------------------------------------------------------------------------------
    def _load(self, arrays, layouts, values) -> None:
        for targets, axis, value in zip(arrays, layouts, values):
            for s, target in targets:
                part = take_slice(value, axis, s) if axis >= 0 else value
                if tuple(part.shape) != tuple(target.shape):
                    raise MXNetError(f"input of shape {tuple(value.shape)} does not fit the bound "
                                     f"shape; slice {tuple(part.shape)} vs {tuple(target.shape)}")
                target[...] = _to_device(target, part)

    def _load_pre_sliced(self, arrays, batches: list, field: str) -> None:
        """Device i takes the whole of ``batches[i]``'s ``data`` or ``label`` arrays."""
        if len(batches) != len(self.execs):
            raise MXNetError(f"a list of {len(batches)} batches for {len(self.execs)} devices: "
                             "pre-sliced batches need one batch per device")
        for k, targets in enumerate(arrays):
            for (_, target), batch in zip(targets, batches):
                part = getattr(batch, field)[k]
                if tuple(part.shape) != tuple(target.shape):
                    raise MXNetError(f"pre-sliced {field} {k} of shape {tuple(part.shape)} does "
                                     f"not fit the device's bound shape {tuple(target.shape)}")
                target[...] = _to_device(target, part)

    def forward(self, data_batch, is_train: bool | None = None) -> None:
        """Load the batch's slices into each executor and run forward.

        ``data_batch`` is one batch (cut by the group's slices) or, as in MXNet, a list of
        one batch per device (pre-sliced: device i gets ``data_batch[i]`` whole).
        """
        if is_train is None:
            is_train = self.for_training
        # labels are loaded whenever the batch has them, as MXNet does: an inference forward
        # (score, predict) of a label-dependent output must see this batch's labels
        if isinstance(data_batch, list):  # as MXNet: a batch may be any object, even a tuple
            with_labels = bool(data_batch and data_batch[0].label and self.label_arrays)
            for batch in data_batch:
                check_batch_dtypes("data", self.data_names, batch.data)
                if with_labels:
                    check_batch_dtypes("label", self.label_names, batch.label)
            self._load_pre_sliced(self.data_arrays, data_batch, "data")
            if with_labels:
                self._load_pre_sliced(self.label_arrays, data_batch, "label")
        else:
            labels = getattr(data_batch, "label", None)
            labels = labels if labels and self.label_arrays else None
            check_batch_dtypes("data", self.data_names, data_batch.data)
            check_batch_dtypes("label", self.label_names, labels)
            self._load(self.data_arrays, self.data_layouts, data_batch.data)
            if labels:
                self._load(self.label_arrays, self.label_layouts, labels)
        threads.tick()  # a step boundary: size the BLAS pool to the cores free now
        for e in self.execs:
            e.forward(is_train=is_train)

    def backward(self, out_grads=None) -> None:
        """Backward on each executor; ``out_grads`` (whole-batch) are sliced per device."""
        if not self.for_training:
            raise MXNetError("backward needs an executor group bound with for_training=True")
        for i, (s, e) in enumerate(zip(self.slices, self.execs)):
            grads = None
            if out_grads is not None:
                grads = [take_slice(g, axis, s) if axis >= 0 else g
                         for g, axis in zip(out_grads, self.output_layouts)]
                grads = [_to_device(e.outputs[k], g) for k, g in enumerate(grads)]
            e.backward(out_grads=grads)

    def get_output_shapes(self) -> list[tuple[str, tuple]]:
        """(name, whole-batch shape) of each output."""
        shapes = []
        for k, name in enumerate(self.output_names):
            shape = list(self.execs[0].plan.slot_shapes[self.execs[0].plan.head_slots[k]])
            axis = self.output_layouts[k]
            if axis >= 0:
                shape[axis] = sum(e.plan.slot_shapes[e.plan.head_slots[k]][axis]
                                  for e in self.execs)
            shapes.append((name, tuple(shape)))
        return shapes

    def _gather(self, per_exec: list[list], layouts: list[int], merge: bool):
        if not merge:
            return per_exec
        merged = []
        for arrays, axis in zip(per_exec, layouts):
            if len(arrays) == 1:
                merged.append(arrays[0])
            elif axis >= 0:
                first = arrays[0]
                merged.append(_xp(first).concatenate([_to_device(first, a) for a in arrays],
                                                     axis=axis))
            else:
                merged.append(arrays[0])
        return merged

    def get_outputs(self, merge_multi_context: bool = True, begin: int = 0, end: int | None = None):
        """Outputs: merged along the batch axis, or ``[[out_dev0, out_dev1], ...]``."""
        end = self.num_outputs if end is None else end
        per = [[e.outputs[k] for e in self.execs] for k in range(begin, end)]
        return self._gather(per, self.output_layouts[begin:end], merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True):
        """Gradients of the data inputs (needs ``inputs_need_grad=True``)."""
        if not self.inputs_need_grad:
            raise MXNetError("get_input_grads needs bind(inputs_need_grad=True)")
        return self._gather(self.input_grad_arrays, self.data_layouts, merge_multi_context)

    def get_states(self, merge_multi_context: bool = True):
        """The state arrays (``state_names``) of every device."""
        return self._gather(self.state_arrays, [-1] * len(self.state_arrays), merge_multi_context)

    def set_states(self, states=None, value=None) -> None:
        """Set states from ``[[state_dev0, ...], ...]`` or fill them all with ``value``."""
        if (states is None) == (value is None):
            raise ValueError("set_states takes exactly one of states and value")
        if value is not None:
            for block in self.state_arrays:
                for a in block:
                    a[...] = value
            return
        for block, sources in zip(self.state_arrays, states):
            for a, src in zip(block, sources):
                a[...] = _to_device(a, src)

    def update_metric(self, eval_metric, labels, pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` with each device's outputs and its slice of ``labels``."""
        for i, (e, s) in enumerate(zip(self.execs, self.slices)):
            if pre_sliced:
                parts = labels[i]
            else:
                parts = [take_slice(lab, axis, s) if axis >= 0 else lab
                         for lab, axis in zip(labels, self.label_layouts or [0] * len(labels))]
            eval_metric.update_dict(show(dict(zip(self.label_names, parts)), e.ctx),
                                    show(dict(zip(self.output_names, e.outputs)), e.ctx))

    def install_monitor(self, monitor) -> None:
        """Attach a Monitor to every executor."""
        for e in self.execs:
            monitor.install(e)


def _per_context(group2ctxs, n: int) -> list:
    """MXNet's ``group2ctxs`` (one dict for all contexts, or a list of one per context) as a
    list of ``n`` dicts (or Nones)."""
    if group2ctxs is None or isinstance(group2ctxs, dict):
        return [group2ctxs] * n
    group2ctxs = list(group2ctxs)
    if len(group2ctxs) != n:
        raise ValueError(f"group2ctxs has {len(group2ctxs)} dicts for {n} contexts; give one "
                         "dict, or one per context")
    return group2ctxs


def _owns_memory(array) -> bool:
    """Whether ``array`` holds its own memory; an NDArray view of an array that does counts
    as that array (it is how user code sees it under the compatibility layer)."""
    if is_sparse(array):
        return True
    base = array.base
    if base is not None and type(base) is not type(array) and base.shape == array.shape:
        base = base.base
    return base is None


def _host(array) -> np.ndarray:
    """A dense host copy (or view) of a device copy of a parameter."""
    return as_numpy(array.todense() if is_sparse(array) else array)


def _xp(array):
    return np if isinstance(array, np.ndarray) else __import__("cupy")


def _to_device(like, array):
    """``array`` moved to the array module and device of ``like`` (into ``like``'s storage
    when that is sparse)."""
    if is_sparse(like):
        return array if is_sparse(array) else cast_storage(_to_device(like.data, array),
                                                           like.stype)
    if is_sparse(array):
        array = array.todense()
    if isinstance(like, np.ndarray):
        return as_numpy(array)
    cupy = __import__("cupy")
    with cupy.cuda.Device(like.device.id):
        return cupy.asarray(array)
