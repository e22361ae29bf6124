"""``Module``: a symbol, its executors on one or more devices, its parameters and optimizer.

The module talks to its devices only through an executor group (bind, reshape, forward,
backward, parameter and output access): a :class:`~raymod.parallel.DataParallelExecutorGroup`
in process, or a ``RayExecutorGroup`` on Ray workers. What else differs between the two
(making the group and the kvstore, running the update, fused fit steps) is the module's
placement (:mod:`raymod.module.placement`), chosen once from ``workers=``.
"""
from __future__ import annotations

import copy
import logging
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from .. import checkpoint as _ckpt
from .. import optimizer as opt
from ..array_view import show
from ..base import MXNetError, check_input_dtype, names_list
from ..context import Context, as_numpy, cpu
from ..initializer import InitDesc, Uniform
from ..io import DataDesc
from ..model import _check_kvstore_arg
from ..ndarray_io import atomic_write
from ..sparse import stype_of
from ..sparse.table_init import TableInit
from ..parallel import ExecutorGroup
from ..parallel.executor_group import check_batch_dtypes
from ..symbol import Symbol
from .base_module import (BaseModule, _check_input_names, _check_optimizer_arg,
                          _parse_data_desc)
from .lifecycle import Stage, StageError
from .placement import Placement, placement_for, workers_for

_LOG = logging.getLogger(__name__)

__all__ = ["Module"]

class Module(BaseModule):
    """A network (``Symbol``) bound to devices, with parameters and an optimizer.

    Parameters
    ----------
    symbol : Symbol
        The network.
    data_names : list of str, default ('data',)
        Names of the data inputs, as the iterator provides them.
    label_names : list of str, default ('softmax_label',)
        Names of the label inputs; None for a network without labels.
    logger : Logger, default logging
        Where progress lines go.
    context : Context or list of Context, default cpu()
        Devices; a batch is split over several (``[rm.cpu(0), rm.cpu(1)]`` or GPUs).
    work_load_list : list of number, optional
        Relative share of the batch per device (equal by default).
    fixed_param_names : list of str, optional
        Parameters that are never updated (no gradient is computed).
    state_names : list of str, optional
        Inputs that are neither data nor labels nor parameters: set by :meth:`set_states`
        (zero until then), e.g. RNN begin states.
    group2ctxs : dict or list of dict, optional
        Maps ``ctx_group`` attributes to contexts; accepted for compatibility, raymod places
        every node of an executor on its device.
    compression_params : dict, optional
        Gradient compression for the kvstore, e.g. ``{'type': '2bit', 'threshold': 0.5}``.
    workers : int, str, Workers or None, default None
        Where the executors run (raymod's one addition to MXNet's arguments). None: in this
        process, over ``context``, or on the workers of an enclosing
        ``rm.mod.default_workers`` block (as under ``raymod run --workers``). An int N,
        ``'MIN:MAX'`` or ``rm.Workers(...)``: on Ray worker actors (started on the cluster
        of ``rm.cluster.init()``), each owning an executor group over its own devices; the
        iterator's batch is the global batch, cut into slices over the workers, and the
        kvstore becomes a dist one (``'dist_sync'`` unless ``'dist_async'`` is asked for;
        a ``'local'`` or ``'device'`` name or store object means ``'dist_sync'``).

    Examples
    --------
    >>> net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable('data'),
    ...                            num_hidden=10, name='fc'), name='softmax')
    >>> mod = rm.mod.Module(net, context=[rm.cpu(0), rm.cpu(1)])
    >>> mod.fit(train_iter, num_epoch=5, optimizer_params={'learning_rate': 0.1})
    """

    def __init__(self, symbol: Symbol, data_names: Sequence[str] | None = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",), logger: Any = logging,
                 context: Any = cpu(), work_load_list: Sequence[float] | None = None,
                 fixed_param_names: Sequence[str] | None = None,
                 state_names: Sequence[str] | None = None, group2ctxs: Any = None,
                 compression_params: dict | None = None, workers: Any = None):
        super().__init__(logger=logger)
        if not isinstance(symbol, Symbol):
            raise TypeError(f"symbol must be a Symbol, got {type(symbol).__name__}")
        self._workers, by_default = workers_for(self, workers)
        # where the executors run: decided here, once; the module never asks again (but
        # see Placement.for_group for a default that a subclass's own bind cannot follow)
        self._placement: Placement = placement_for(self._workers, by_default)
        contexts = [context] if isinstance(context, Context) else list(context)
        if not contexts or not all(isinstance(c, Context) for c in contexts):
            raise TypeError(f"context must be a Context or a list of them, got {context!r}")
        work_load_list = [1] * len(contexts) if work_load_list is None else list(work_load_list)
        if len(work_load_list) != len(contexts):
            raise ValueError(f"work_load_list has {len(work_load_list)} entries for "
                             f"{len(contexts)} contexts")
        data_names = list(data_names or [])
        label_names = list(label_names or [])
        state_names = list(state_names or [])
        fixed_param_names = list(fixed_param_names or [])
        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)
        inputs = set(data_names + label_names + state_names)
        self._symbol = symbol
        self._context = contexts
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._data_names, self._label_names = data_names, label_names
        self._state_names, self._fixed_param_names = state_names, fixed_param_names
        self._param_names = [a for a in symbol.list_arguments() if a not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        self._compression_params = compression_params
        self._arg_params: dict | None = None
        self._aux_params: dict | None = None
        self._params_dirty = False
        # row_sparse tables on KVServers whose values are still only a recipe: the servers
        # make their rows (see raymod.sparse.table_init); the host copy is filled on request
        self._pending_tables: dict = {}
        self._optimizer = None
        self._kvstore = None
        self._update_on_kvstore = None
        self._updater = None
        self._preload_opt_states: str | None = None
        self._grad_req = None
        self._exec_group: ExecutorGroup | None = None  # made by the placement at bind
        self._data_shapes: list | None = None
        self._label_shapes: list | None = None
        self._owns_kvstore = False

    @property
    def _pool(self) -> Any:
        """The Ray worker pool (None in process, or before the first bind on workers)."""
        return self._placement.pool

    def close(self) -> None:
        """Stop this module's Ray worker actors and the KVServers it started (raymod
        addition; a no-op in process).

        The parameter values stay on the host (``get_params`` still works after a bind);
        the module must be bound again before further training.
        """
        self._placement.close(self)

    @classmethod
    def load(cls, prefix: str, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> "Module":
        """A module holding a saved checkpoint's symbol and parameters (bind it next).

        Parameters
        ----------
        prefix : str
            Path prefix: ``prefix-symbol.json``, ``prefix-%04d.params`` and, with optimizer
            states, ``prefix-%04d.states``.
        epoch : int
            Which checkpoint.
        load_optimizer_states : bool, default False
            Load the optimizer states when ``init_optimizer`` is called (the checkpoint
            must have been saved with ``save_optimizer_states=True``).
        **kwargs
            Module constructor arguments (``data_names``, ``label_names``, ``context``...).

        Examples
        --------
        >>> mod = rm.mod.Module.load('mlp', 3, load_optimizer_states=True)
        >>> mod.bind(train_iter.provide_data, train_iter.provide_label)
        """
        symbol, arg_params, aux_params = _ckpt.load_checkpoint(prefix, epoch)
        states = _ckpt.states_file(prefix, epoch)
        if load_optimizer_states and not os.path.exists(states):
            raise FileNotFoundError(f"optimizer states {states!r} not found (save with "
                                    "save_optimizer_states=True)")
        mod = cls(symbol, **kwargs)
        mod._arg_params, mod._aux_params = arg_params, aux_params
        mod._stage = mod._stage.after_params()
        mod._preload_opt_states = states if load_optimizer_states else None
        return mod

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """Save the symbol, the parameters and optionally the optimizer states.

        Writes ``prefix-symbol.json``, ``prefix-%04d.params`` and, with
        ``save_optimizer_states``, ``prefix-%04d.states``; each file atomically.
        Use ``rm.callback.module_checkpoint`` to save from ``fit``.

        Parameters
        ----------
        prefix : str
            Path prefix.
        epoch : int
            Number written into the file names.
        save_optimizer_states : bool, default False
            Also save the optimizer states (to continue training).
        remove_amp_cast : bool, default True
            Accepted for MXNet compatibility (raymod graphs hold no AMP casts).
        """
        atomic_write(_ckpt.symbol_file(prefix), self._symbol.tojson())
        name = _ckpt.params_file(prefix, epoch)
        self.save_params(name)
        _LOG.info('Saved checkpoint to "%s"', name)
        if save_optimizer_states:
            states = _ckpt.states_file(prefix, epoch)
            self.save_optimizer_states(states)
            _LOG.info('Saved optimizer state to "%s"', states)

    # ---- descriptions -----------------------------------------------------------------------
    @property
    def data_names(self) -> list:
        """Names of the data inputs."""
        return self._data_names

    @property
    def label_names(self) -> list:
        """Names of the label inputs."""
        return self._label_names

    @property
    def output_names(self) -> list:
        """Names of the outputs."""
        return self._output_names

    @property
    def data_shapes(self) -> list:
        """DataDesc of each data input, as bound (or last reshaped)."""
        self._require(Stage.BOUND, "data_shapes")
        return self._data_shapes

    @property
    def label_shapes(self) -> list | None:
        """DataDesc of each label input, or None when bound without labels."""
        self._require(Stage.BOUND, "label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output for the whole batch."""
        self._require(Stage.BOUND, "output_shapes")
        return self._exec_group.get_output_shapes()

    # ---- parameters -------------------------------------------------------------------------
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``: current values (averaged over devices), host arrays.

        The dicts are the module's own; they are refreshed from the devices when an update
        happened since the last call.
        """
        self._require(Stage.PARAMS_READY, "get_params")
        if self._params_dirty or self._pending_tables:
            self._sync_params_from_devices()
        return show((self._arg_params, self._aux_params))

    def init_params(self, initializer: Any = Uniform(0.01), arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialize parameters and auxiliary states, then copy them to every device.

        Parameters
        ----------
        initializer : Initializer, default Uniform(0.01)
            Fills each array not taken from ``arg_params``/``aux_params``. A variable's own
            ``init`` attribute wins over it (it is called with an :class:`InitDesc`).
        arg_params, aux_params : dict of str to array, optional
            Values to copy. When a dict is given, every name of that kind must be in it
            unless ``allow_missing``.
        allow_missing : bool, default False
            Let ``initializer`` fill names missing from the dicts.
        force_init : bool, default False
            Re-initialize even if parameters are already initialized (otherwise warn and
            return).
        allow_extra : bool, default False
            Tolerate names in the dicts that the network does not have.

        Raises
        ------
        RuntimeError
            A name is missing and ``allow_missing`` is False (checked first).
        ValueError
            A name is extra and ``allow_extra`` is False.
        """
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "init_params call ignored.", stacklevel=2)
            return
        self._require(Stage.BOUND, "init_params")
        self._check_param_names(arg_params, aux_params, allow_missing, allow_extra)
        attrs = self._symbol.attr_dict()
        # on workers a table is drawn a block of rows at a time and the KVServers holding
        # the rows draw them again: this host never holds it whole (same values as here)
        tables = (self._table_names() if getattr(self._exec_group, "tables_on_servers", False)
                  else set())
        for own, given in ((self._arg_params, arg_params), (self._aux_params, aux_params)):
            for name in sorted(own):
                if given is not None and name in given:
                    self._copy_param(name, given[name], own[name])
                    self._pending_tables.pop(name, None)
                elif initializer is not None:  # without one, the current value stays
                    desc = InitDesc(name, attrs.get(name))
                    plan = (TableInit.draw(initializer, desc, own[name].shape,
                                           own[name].dtype) if name in tables else None)
                    if plan is None:
                        initializer(desc, own[name])
                        self._pending_tables.pop(name, None)
                    else:
                        self._pending_tables[name] = plan
        self._params_dirty = False
        self._exec_group.set_params(self._host_params(), self._aux_params)
        self._stage = self._stage.after_params()

    def _check_param_names(self, arg_params: dict | None, aux_params: dict | None,
                           allow_missing: bool, allow_extra: bool) -> None:
        """RuntimeError for missing names, then ValueError for extra ones."""
        for kind, own, given in (("arg_params", self._param_names, arg_params),
                                 ("aux_params", self._aux_names, aux_params)):
            if given is None:
                continue
            missing = [n for n in own if n not in given]
            if missing and not allow_missing:
                raise RuntimeError(f"{kind} is missing {missing} (pass allow_missing=True to "
                                   "initialize them with the initializer)")
        for kind, own, given in (("arg_params", self._param_names, arg_params),
                                 ("aux_params", self._aux_names, aux_params)):
            extra = [n for n in (given or {}) if n not in own]
            if extra and not allow_extra:
                raise ValueError(f"{kind} has {extra}, which the network does not have "
                                 f"(pass allow_extra=True to ignore them)")

    @staticmethod
    def _copy_param(name: str, value: Any, target: np.ndarray) -> None:
        if value is target:
            return
        if tuple(value.shape) != tuple(target.shape):
            raise MXNetError(f"parameter {name!r} has shape {tuple(value.shape)}, the network "
                             f"needs {tuple(target.shape)}")
        target[...] = as_numpy(value)

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assign parameter and auxiliary-state values (see :meth:`BaseModule.set_params`).

        With ``allow_missing``, names absent from the dicts keep their current values on
        the devices.
        """
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=False, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return
        self._require(Stage.BOUND, "set_params")
        self._check_param_names(arg_params, aux_params, True, allow_extra)
        self._exec_group.set_params(
            {k: v for k, v in (arg_params or {}).items() if k in self._param_names},
            {k: v for k, v in (aux_params or {}).items() if k in self._aux_names})
        self._params_dirty = True  # the host copies are stale now
        self._stage = self._stage.after_params()

    def _params_agree(self) -> bool:
        # a subclass's own set_params still gets MXNet's call at every epoch's end
        return type(self).set_params is Module.set_params and self._placement.params_agree(self)

    def _sync_params_from_devices(self) -> None:
        """Refresh the host parameter dicts from the devices (device average); a row_sparse
        table the kvstore updates is read from the kvstore, the devices holding only the
        rows last pulled; a table still only planned (no kvstore yet) is made here."""
        self._exec_group.get_params(self._arg_params, self._aux_params)
        if self._kvstore and self._update_on_kvstore:
            if not getattr(self._exec_group, "tables_on_servers", False):  # read them above
                for name in self._table_names():
                    self._kvstore.pull(name, out=self._arg_params[name], ignore_sparse=False)
            self._pending_tables = {}
        for name, plan in self._pending_tables.items():
            plan.fill(self._arg_params[name])
        self._pending_tables = {}
        self._params_dirty = False

    def _table_names(self) -> set:
        """Names of the parameters stored as row_sparse tables."""
        group = self._exec_group
        return {n for n, arrays in zip(group.param_names, group.param_arrays)
                if stype_of(arrays[0]) == "row_sparse"}

    def _host_params(self) -> dict:
        """The parameter values to give the devices and the kvstore: the host arrays, a
        table still planned as its :class:`TableInit` (its holders make the rows)."""
        return {**self._arg_params, **self._pending_tables}

    # ---- binding ----------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: "Module | None" = None, grad_req: Any = "write") -> None:
        """Allocate executors on every device for these input shapes.

        Parameters
        ----------
        data_shapes : list of DataDesc or (str, tuple)
            Usually ``data_iter.provide_data``; names must match ``data_names``.
        label_shapes : list of DataDesc or (str, tuple), optional
            Usually ``data_iter.provide_label``.
        for_training : bool, default True
            Allocate gradients (False: inference only).
        inputs_need_grad : bool, default False
            Also compute gradients of the data inputs (:meth:`get_input_grads`).
        force_rebind : bool, default False
            Rebind even if already bound; parameters and optimizer are kept.
        shared_module : Module, optional
            A bound, initialized module whose parameters (and optimizer) this one shares,
            as bucketing does.
        grad_req : str, list or dict, default 'write'
            'write', 'add' or 'null', for all arguments or per argument.

        Notes
        -----
        Inputs are checked before anything changes: a bad shape (e.g. an array given
        where a tuple belongs) raises TypeError and leaves the module as it was.
        """
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise ValueError("inputs_need_grad=True needs for_training=True")
        data_descs, label_descs = _parse_data_desc(self._data_names, self._label_names,
                                                   data_shapes, label_shapes)
        label_descs = self._bindable_labels(label_descs)
        _check_desc_dtypes(data_descs, label_descs)
        self._check_shared(shared_module)
        if self._stage.params_initialized and shared_module is None:
            self._check_param_names(self._arg_params, self._aux_params, False, False)
            if self.binded and self._params_dirty:
                self._sync_params_from_devices()
        group = self._placement.make_group(self, data_descs, label_descs, for_training,
                                           inputs_need_grad, shared_module, grad_req)
        self._commit_bind(group, data_descs, label_descs, for_training, inputs_need_grad,
                          grad_req, shared_module)

    def _reset_bind(self) -> None:
        """Drop the executors, keeping the parameter values on the host (MXNet's helper,
        which subclasses' ``bind(force_rebind=True)`` call before binding again)."""
        if self._exec_group is not None and self._params_dirty:
            self._sync_params_from_devices()
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    def _bindable_labels(self, label_descs: list | None) -> list | None:
        """Label descriptors of labels the symbol takes (others are dropped, after a warning)."""
        if label_descs is None:
            return None
        args = set(self._symbol.list_arguments())
        kept = [d for d in label_descs if d.name in args]
        return kept or None

    def _check_shared(self, shared_module: "Module | None") -> None:
        """Raise unless ``shared_module`` (when given) can share its parameters with this one."""
        if shared_module is None:
            return
        if not isinstance(shared_module, Module):
            raise TypeError(f"shared_module must be a Module, got {type(shared_module).__name__}")
        shared_module._require(Stage.PARAMS_READY, "sharing it with bind(shared_module=...)")
        self._placement.check_shared(self, shared_module)

    def _commit_bind(self, group: Any, data_descs: list,
                     label_descs: list | None, for_training: bool, inputs_need_grad: bool,
                     grad_req: Any, shared_module: "Module | None") -> None:
        """Adopt a successfully built executor group and bring parameters onto it."""
        self._exec_group = group
        self._data_shapes, self._label_shapes = data_descs, label_descs
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._grad_req = grad_req
        self._total_exec_bytes = group._total_exec_bytes
        if shared_module is not None:
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
            self._stage = self._stage.after_bind().after_params()
        elif self._stage.params_initialized:
            group.set_params(self._host_params(), self._aux_params)
            self._stage = self._stage.after_bind()
        else:
            self._arg_params = {n: np.zeros(a[0].shape, a[0].dtype)
                                for n, a in zip(self._param_names, group.param_arrays)}
            self._aux_params = {n: np.zeros(a[0].shape, a[0].dtype)
                                for n, a in zip(self._aux_names, group.aux_arrays)}
            self._stage = self._stage.after_bind()
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Rebind for new input shapes (e.g. another batch size), keeping the parameters.

        The optimizer's ``rescale_grad`` is left as set by ``init_optimizer``.

        Parameters
        ----------
        data_shapes : list of DataDesc or (str, tuple)
            New data shapes.
        label_shapes : list of DataDesc or (str, tuple), optional
            New label shapes.
        """
        self._require(Stage.BOUND, "reshape")
        data_descs, label_descs = _parse_data_desc(self._data_names, self._label_names,
                                                   data_shapes, label_shapes)
        label_descs = self._bindable_labels(label_descs)
        _check_desc_dtypes(data_descs, label_descs)
        self._refuse_parameter_reshape(data_descs, label_descs)
        self._exec_group.reshape(data_descs, label_descs)
        self._data_shapes, self._label_shapes = data_descs, label_descs

    def _refuse_parameter_reshape(self, data_descs: list, label_descs: list | None) -> None:
        """Raise before anything changes if the new input shapes would change the shape of a
        parameter or auxiliary state (e.g. ``predict`` on data with other features): MXNet's
        executors refuse this (no ``partial_shaping`` in a module's reshape), and binding new
        memory would silently drop the trained values."""
        def shapes(descs: list) -> dict:
            known = {d.name: tuple(d.shape) for d in descs}
            args, _, aux = self._symbol.infer_shape_partial(**known)
            named = dict(zip(self._symbol.list_arguments(), args or []))
            named.update(zip(self._symbol.list_auxiliary_states(), aux or []))
            return {n: s for n, s in named.items() if n not in known}

        before = shapes(list(self._data_shapes) + list(self._label_shapes or []))
        after = shapes(list(data_descs) + list(label_descs or []))
        for name, old in before.items():
            new = after.get(name, old)
            if old and new and tuple(new) != tuple(old):
                raise MXNetError(
                    f"reshape: the new input shapes "
                    f"{[(d.name, tuple(d.shape)) for d in data_descs]} would change the shape "
                    f"of {name!r} from {tuple(old)} to {tuple(new)}; a module keeps its "
                    "parameters' shapes (bind a new module for a different input size)")

    # ---- optimizer --------------------------------------------------------------------------
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Install an optimizer, and a kvstore when several devices share the parameters.

        Parameters
        ----------
        kvstore : str or KVStore, default 'local'
            With one device a type name means no kvstore (updates run locally). With more,
            a store of that type sums the devices' gradients and, normally, runs the
            optimizer itself (``update_on_kvstore``).
        optimizer : str or Optimizer, default 'sgd'
            A registered name (created with ``rescale_grad = 1/batch_size`` unless given,
            the symbol's lr/wd multipliers, and update-index names) or an instance (which
            keeps its ``rescale_grad``, warning if it is not 1/batch_size, and gets the
            update-index names when its ``idx2name`` is empty).
        optimizer_params : dict or tuple of pairs, default (('learning_rate', 0.01),)
            Constructor arguments when ``optimizer`` is a name.
        force_init : bool, default False
            Replace an installed optimizer (otherwise warn and return).

        Notes
        -----
        ``rescale_grad`` uses the batch size the module was bound with (times the number of
        workers for ``dist_sync`` stores); a later :meth:`reshape` does not change it.
        """
        self._require(Stage.PARAMS_READY, "init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        _check_kvstore_arg(kvstore)
        _check_optimizer_arg(optimizer)
        placement = self._placement = self._placement.for_group(self)
        placement.check_trainable(self)
        if self._params_dirty:
            self._sync_params_from_devices()
        kv, update_on_kvstore, owns_kv = placement.create_kvstore(self, kvstore)
        try:  # a bad optimizer setting (learning_rate=-1) leaves the module as it was
            optimizer = self._make_optimizer(optimizer, optimizer_params, update_on_kvstore,
                                             1.0 / placement.batch_size(self, kv))
        except BaseException:
            if owns_kv:
                kv.close()
            raise
        self._owns_kvstore = owns_kv
        self._optimizer, self._kvstore = optimizer, kv
        self._update_on_kvstore, self._updater = update_on_kvstore, None
        placement.setup_kvstore(self, kv, optimizer, update_on_kvstore)
        if not update_on_kvstore:
            self._updater = opt.get_updater(optimizer)
        self._stage = self._stage.after_optimizer()
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def _kvstore_corrections(self) -> dict:
        """Correction keys the servers add to keys' gradients (SVRGModule's full gradient)."""
        return {}

    def _make_optimizer(self, optimizer: Any, optimizer_params: Any, update_on_kvstore: bool,
                        rescale_grad: float) -> opt.Optimizer:
        """The optimizer instance: created from a name, or checked when given.

        As MXNet, a given instance keeps its ``rescale_grad`` (with a warning when it is not
        ``rescale_grad``) and gets the module's update-index names only when it has none.
        """
        names = self._exec_group.param_names
        if update_on_kvstore:
            idx2name = dict(enumerate(names))
        else:  # each device updates its copy under its own index, device-major as MXNet
            n = self._exec_group.num_device
            idx2name = {i * n + k: name for k in range(n) for i, name in enumerate(names)}
        if isinstance(optimizer, opt.Optimizer):
            if optimizer.rescale_grad != rescale_grad:
                warnings.warn("Optimizer created manually outside Module but rescale_grad is "
                              f"not normalized to 1.0/batch_size/num_workers "
                              f"({optimizer.rescale_grad} vs. {rescale_grad}). Is this "
                              "intended?", stacklevel=3)
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name
            return optimizer
        params = dict(optimizer_params)
        params.setdefault("rescale_grad", rescale_grad)
        return opt.create(optimizer, sym=self._symbol, param_idx2name=idx2name, **params)

    def borrow_optimizer(self, shared_module: "Module") -> None:
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing).

        Parameters
        ----------
        shared_module : Module
            A module with an installed optimizer.
        """
        shared_module._require(Stage.OPTIMIZER_READY, "borrow_optimizer")
        self._require(Stage.PARAMS_READY, "borrow_optimizer")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self._stage = self._stage.after_optimizer()

    def save_optimizer_states(self, fname: str) -> None:
        """Save the optimizer states (the kvstore's when it runs the optimizer).

        Parameters
        ----------
        fname : str
            Output path (written atomically).
        """
        atomic_write(fname, self._optimizer_states())

    def _optimizer_states(self) -> bytes:
        """The optimizer states as bytes, from wherever the optimizer runs."""
        self._require(Stage.OPTIMIZER_READY, "save_optimizer_states")
        if self._update_on_kvstore:
            return self._placement.on_servers(self, "optimizer states",
                                              self._kvstore.get_optimizer_states)
        return self._placement.updater_states(self)

    def load_optimizer_states(self, fname: str) -> None:
        """Load optimizer states saved by :meth:`save_optimizer_states`.

        Parameters
        ----------
        fname : str
            Path of the file.
        """
        with open(fname, "rb") as f:
            self._set_optimizer_states(f.read())

    def _set_optimizer_states(self, blob: bytes) -> None:
        """Load optimizer states given as bytes (see :meth:`load_optimizer_states`)."""
        self._require(Stage.OPTIMIZER_READY, "load_optimizer_states")
        if self._update_on_kvstore:  # the kvstore's updater indexes by parameter name
            states = self._rekeyed(blob, by_name=True)
            self._placement.on_servers(self, "optimizer states",
                                       lambda: self._kvstore.set_optimizer_states(states))
        else:
            self._placement.set_updater_states(self, self._rekeyed(blob, by_name=False))

    def _rekeyed(self, blob: bytes, by_name: bool) -> bytes:
        """States re-indexed for this module's updater, so files move between set-ups.

        A kvstore's updater indexes states by parameter name; a local updater by
        ``i * num_device + k`` (parameter i, device k). A file written by one kind loads
        into the other: name -> every device's index, index -> its parameter's name.
        """
        updater = opt.Updater(copy.deepcopy(self._optimizer))
        updater.set_states(blob)
        names = self._exec_group.param_names
        n = 1 if by_name else self._exec_group.num_device
        ints = [k for k in updater.states if not isinstance(k, str)]
        if by_name == (not ints):
            return blob  # already keyed the way this updater reads them
        if by_name:  # a local updater's file: device copies agree, take each parameter's first
            stride = max(1, len(ints) // max(len(names), 1))
            updater.states = {names[k // stride]: v for k, v in updater.states.items()
                              if k % stride == 0 and k // stride < len(names)}
        else:
            index = {name: i for i, name in enumerate(names)}
            updater.states = {index[name] * n + k: v for name, v in updater.states.items()
                              if name in index for k in range(n)}
        return updater.get_states()
    # ---- computation ------------------------------------------------------------------------
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward pass; reshapes first when the batch's shapes differ from the bound ones.

        Parameters
        ----------
        data_batch : DataBatch
            Or any object with a ``data`` list (and ``label``, ``provide_data``,
            ``provide_label`` when available).
        is_train : bool, optional
            Training mode (dropout, BatchNorm batch statistics); default: as bound.
        """
        self._require(Stage.PARAMS_READY, "forward")
        if isinstance(data_batch, list):
            self._forward_pre_sliced(data_batch, is_train)
            return
        shapes = _input_shapes(data_batch)
        if len(shapes) != len(self._data_shapes):
            raise ValueError(f"the batch has {len(shapes)} data arrays, the module was bound "
                             f"with {len(self._data_shapes)} "
                             f"({[d.name for d in self._data_shapes]})")
        # before an implicit reshape: a string or object batch changes nothing
        check_batch_dtypes("data", [d.name for d in self._data_shapes], data_batch.data)
        if self._label_shapes:
            check_batch_dtypes("label", [d.name for d in self._label_shapes],
                               getattr(data_batch, "label", None))
        if shapes != tuple(d.shape for d in self._data_shapes):
            self.reshape(*self._shapes_of(data_batch, list(data_batch.data)))
        self._exec_group.forward(data_batch, is_train)

    def _forward_pre_sliced(self, batches: list, is_train: bool | None) -> None:
        """Forward on a list of one batch per device (MXNet's pre-sliced input); the
        batches together must have the bound shapes (no implicit reshape)."""
        self._placement.check_pre_sliced(
            "forward with a list of per-device batches is not supported on workers "
            "(workers= cuts the global batch itself); pass one DataBatch")
        if not batches:
            raise ValueError("forward got an empty list of batches")
        rows = [sum(b.data[k].shape[0] for b in batches) for k in range(len(batches[0].data))]
        bound = [d.shape[0] for d in self._data_shapes]
        if rows != bound:
            raise ValueError(f"the {len(batches)} pre-sliced batches hold {rows} rows per data "
                             f"input, the module is bound for {bound}; reshape first")
        self._exec_group.forward(batches, is_train)

    def _shapes_of(self, data_batch: Any, data: list) -> tuple[list, list | None]:
        """(data descs, label descs) for an implicit reshape to ``data_batch``'s shapes.

        Names, dtypes and layouts stay as bound (a batch's own descriptors may use the
        iterator's names or dtypes); only the shapes follow the batch.
        """
        data_descs = [DataDesc(d.name, tuple(a.shape), d.dtype, d.layout)
                      for d, a in zip(self._data_shapes, data)]
        if not self._label_shapes:
            return data_descs, None
        labels = getattr(data_batch, "label", None)
        if labels and len(labels) == len(self._label_shapes):
            return data_descs, [DataDesc(d.name, tuple(a.shape), d.dtype, d.layout)
                                for d, a in zip(self._label_shapes, labels)]
        # no label arrays (inference): keep the labels bound, resized to the new batch
        first = data_descs[0]
        size = first.shape[max(DataDesc.get_batch_axis(first.layout), 0)]
        resized = []
        for d in self._label_shapes:
            axis = DataDesc.get_batch_axis(d.layout)
            shape = tuple(size if k == axis else n for k, n in enumerate(d.shape))
            resized.append(DataDesc(d.name, shape, d.dtype, d.layout))
        return data_descs, resized

    def backward(self, out_grads: Any = None) -> None:
        """Backward pass (see :meth:`BaseModule.backward`).

        Parameters
        ----------
        out_grads : array or list of arrays, optional
            Gradients of the outputs (whole batch), needed for outputs that are not loss
            heads.
        """
        self._require(Stage.PARAMS_READY, "backward")
        if out_grads is not None and not isinstance(out_grads, (list, tuple)):
            out_grads = [out_grads]
        self._exec_group.backward(out_grads=out_grads)

    def update(self) -> None:
        """Apply the optimizer to the gradients of the last backward pass.

        With ``update_on_kvstore``, gradients are pushed to the kvstore, which updates and
        sends back the weights; otherwise each device updates its own copy (gradients
        summed across devices through the kvstore first, when there is one).
        """
        self._require(Stage.OPTIMIZER_READY, "update")
        self._params_dirty = True
        self._placement.update(self)

    # the step methods a worker's fused step stands in for
    _STEP_METHODS = ("forward_backward", "forward", "backward", "update", "update_metric")

    def _user_step_override(self) -> str | None:
        """The first step method a user's subclass overrides (None: raymod's own)."""
        for name in self._STEP_METHODS:
            if not getattr(type(self), name).__module__.startswith("raymod."):
                return name
        return None

    def _fit_batch(self, data_batch: Any, eval_metric: Any,
                   on_done: Callable[[], None] | None = None) -> None:
        """Where the placement fuses steps (on workers), the whole step is one call per
        worker (see ``RayExecutorGroup``), or part of one when the workers run ahead
        (``on_done`` runs when it completes); otherwise fit calls the step methods, as
        MXNet's fit does."""
        if not self._placement.fuses_steps(self):
            super()._fit_batch(data_batch, eval_metric, on_done)
            return
        self._require(Stage.OPTIMIZER_READY, "fit")
        if _input_shapes(data_batch) != tuple(d.shape for d in self._data_shapes):
            self.reshape(*self._shapes_of(data_batch, list(data_batch.data)))
        self._params_dirty = True
        self._placement.fit_step(self, data_batch, eval_metric, on_done,
                                 self._fused_step_options())

    def _fit_defers_steps(self) -> bool:
        return self._placement.defers_steps(self)

    def _fit_drain(self) -> None:
        self._placement.drain(self)

    def _fused_step_options(self) -> dict:
        """Extra options of this module's fused step (SVRGModule adds its own)."""
        return {}

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last forward pass.

        Parameters
        ----------
        merge_multi_context : bool, default True
            Concatenate the devices' parts along the batch axis (``[out1, out2]``);
            otherwise ``[[out1_dev1, out1_dev2], [out2_dev1, out2_dev2]]``.
        """
        self._require(Stage.PARAMS_READY, "get_outputs")
        return show(self._exec_group.get_outputs(merge_multi_context=merge_multi_context),
                    self._context[0])

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs, in the order of the bound data shapes.

        Parameters
        ----------
        merge_multi_context : bool, default True
            As in :meth:`get_outputs`.
        """
        self._require(Stage.PARAMS_READY, "get_input_grads")
        if not self.inputs_need_grad:
            raise StageError("call bind(..., inputs_need_grad=True) before get_input_grads")
        return show(self._exec_group.get_input_grads(merge_multi_context=merge_multi_context),
                    self._context[0])

    def get_states(self, merge_multi_context: bool = True) -> list:
        """Values of the state inputs (``state_names``).

        Parameters
        ----------
        merge_multi_context : bool, default True
            As in :meth:`get_outputs`.
        """
        self._require(Stage.PARAMS_READY, "get_states")
        return show(self._exec_group.get_states(merge_multi_context=merge_multi_context),
                    self._context[0])

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs: from per-device arrays, or all to one value.

        Parameters
        ----------
        states : list of list of arrays, optional
            ``[[state1_dev1, state1_dev2], [state2_dev1, state2_dev2]]``.
        value : number, optional
            One scalar for every state array. Give exactly one of the two.
        """
        self._require(Stage.PARAMS_READY, "set_states")
        self._exec_group.set_states(states, value)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Accumulate ``eval_metric`` over the last forward pass's outputs.

        Parameters
        ----------
        eval_metric : EvalMetric
            The metric to update.
        labels : list of arrays
            Usually ``data_batch.label`` (whole batch); per device if ``pre_sliced``.
        pre_sliced : bool, default False
            Whether ``labels`` are already split per device.
        """
        self._require(Stage.BOUND, "update_metric")
        if pre_sliced:
            self._placement.check_pre_sliced("update_metric(pre_sliced=True) is not supported "
                                             "on workers; pass the whole batch's labels")
        self._exec_group.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on every executor.

        Parameters
        ----------
        mon : Monitor
            Gets every op output during forward.
        """
        self._require(Stage.BOUND, "install_monitor")
        self._exec_group.install_monitor(mon)

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Get ready for a batch: pull the rows of row_sparse parameters it needs.

        When the kvstore runs the optimizer, the devices' copies of a row_sparse table hold
        only the rows last pulled; ``sparse_row_id_fn(data_batch)`` names the rows the next
        batch reads, and only those are pulled.

        Parameters
        ----------
        data_batch : DataBatch or None
            The next batch (None: whatever the function pulls without one, e.g. all rows).
        sparse_row_id_fn : callable, optional
            ``data_batch -> {parameter name: row ids}``.

        Raises
        ------
        TypeError, ValueError
            The function returned no dict, a name that is not a parameter, or a row id
            outside its table (checked before any row is pulled).
        """
        self._require(Stage.BOUND, "prepare")
        if sparse_row_id_fn is None:
            return
        if not self._kvstore or not self._update_on_kvstore:
            warnings.warn(UserWarning("parameters are not updated on a kvstore: every row is "
                                      "on the devices, sparse_row_id_fn is not needed"))
            return
        row_ids = sparse_row_id_fn(data_batch)
        names = self._exec_group.param_names
        if not isinstance(row_ids, dict):
            raise TypeError(f"sparse_row_id_fn must return a dict of parameter name to row "
                            f"ids, got {type(row_ids).__name__}")
        unknown = [n for n in row_ids if n not in names]
        if unknown:
            raise ValueError(f"sparse_row_id_fn returned {names_list(unknown)}, which the "
                             f"network's parameters ({', '.join(names)}) do not include")
        pulls = {}
        for name, ids in row_ids.items():
            arrays = self._exec_group.param_arrays[names.index(name)]
            if stype_of(arrays[0]) != "row_sparse":
                warnings.warn(UserWarning(f"sparse_row_id_fn names {name!r}, which is not "
                                          "row_sparse: it is pulled whole at every update"))
                continue
            pulls[name] = (arrays, ids)
        self._placement.pull_rows(self, pulls)


def _check_desc_dtypes(data_descs: list, label_descs: list | None) -> None:
    """TypeError, before binding, for an input whose dtype no operator computes on (an
    iterator over strings or Python objects), naming the input and its dtype."""
    for what, descs in (("data", data_descs), ("label", label_descs or [])):
        for d in descs:
            check_input_dtype(what, d.name, getattr(d, "dtype", np.float32))


def _input_shapes(data_batch: Any) -> tuple:
    """Shapes of a batch's data arrays; for rows of a row source (``batch.source``), from its
    descriptors, so that rows Ray workers read themselves are not read here."""
    if getattr(data_batch, "source", None) is not None and data_batch.provide_data:
        return tuple(tuple(d.shape) for d in data_batch.provide_data)
    return tuple(tuple(a.shape) for a in data_batch.data)
