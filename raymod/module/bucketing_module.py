"""``BucketingModule``: one network per bucket key (e.g. sequence length), shared parameters.

``sym_gen(key)`` builds the network of a bucket. The default bucket is bound first; every
other bucket is bound on demand with the default bucket's module as ``shared_module``, so
all buckets use the same parameter (and gradient) memory and the same optimizer.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Hashable
from typing import Any, Callable

from .. import checkpoint as _ckpt
from ..context import cpu
from ..initializer import Uniform
from ..symbol import NameManager, Symbol
from .base_module import BaseModule
from .lifecycle import Stage, StageError
from .module import Module
from .placement import workers_for

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """A module that switches between networks by each batch's ``bucket_key``.

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key) -> (symbol, data_names, label_names)``. Every bucket's
        symbol must have the same parameters (names and shapes).
    default_bucket_key : hashable
        The bucket bound by :meth:`bind`; the others share its memory, so it should be the
        largest (``BucketSentenceIter.default_bucket_key``).
    logger, context, work_load_list, fixed_param_names, state_names, group2ctxs, \
compression_params
        As for :class:`Module`; passed to every bucket's module.
    workers : optional
        Passed to every bucket's :class:`Module` as ``workers`` when given; when not, the
        workers of an enclosing ``rm.mod.default_workers`` block (if any) are.

    Examples
    --------
    >>> it = rm.rnn.BucketSentenceIter(sentences, 32, buckets=[10, 20, 30])
    >>> mod = rm.mod.BucketingModule(sym_gen, default_bucket_key=it.default_bucket_key)
    >>> mod.fit(it, eval_metric=rm.metric.Perplexity(-1), num_epoch=5)
    """

    def __init__(self, sym_gen: Callable, default_bucket_key: Hashable = None,
                 logger: Any = logging, context: Any = cpu(), work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None, group2ctxs: Any = None,
                 compression_params: dict | None = None, workers: Any = None):
        super().__init__(logger=logger)
        if not callable(sym_gen):
            raise TypeError(f"sym_gen must be callable (bucket_key -> (symbol, data_names, "
                            f"label_names)), got {type(sym_gen).__name__}")
        if default_bucket_key is None:
            raise ValueError("BucketingModule needs a default_bucket_key (e.g. the "
                             "iterator's default_bucket_key)")
        self._sym_gen = sym_gen
        self._default_bucket_key = default_bucket_key
        self._context = context
        self._work_load_list = work_load_list
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params
        if workers is None:  # the buckets' modules are made at bind: they follow the
            workers, _ = workers_for(self, None)  # default in force now (default_workers)
        self._workers = workers
        self._call_sym_gen(default_bucket_key)  # fail at construction, not at bind
        self._buckets: dict = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key = None
        self._grad_req: Any = "write"
        self._monitor = None
        # the module that last ran update() marks only itself dirty; track it here
        self._params_dirty = False
        # parameters held while no executors exist (BucketingModule.load, force_rebind)
        self._arg_params: dict | None = None
        self._aux_params: dict | None = None
        self._preload_opt_states: str | None = None

    # ---- buckets ----------------------------------------------------------------------------
    def _call_sym_gen(self, key: Hashable) -> tuple[Symbol, list, list]:
        """``sym_gen(key)``, checked; under a fresh NameManager so auto-names (``embedding0``)
        are the same in every bucket, which parameter sharing relies on."""
        with NameManager():
            out = self._sym_gen(key)
        if not isinstance(out, (tuple, list)) or len(out) != 3 or not isinstance(out[0], Symbol):
            raise TypeError(f"sym_gen({key!r}) must return (symbol, data_names, label_names), "
                            f"got {out!r:.200}")
        symbol, data_names, label_names = out
        return symbol, list(data_names or []), list(label_names or [])

    def _new_module(self, key: Hashable, data_shapes: Any) -> Module:
        """An unbound Module for bucket ``key``; ValueError when the batch's names disagree."""
        symbol, data_names, label_names = self._call_sym_gen(key)
        if data_shapes is None:
            raise ValueError(f"bucket {key!r} is not bound yet: its data shapes are needed "
                             "(the batch has no provide_data)")
        # malformed entries are left to Module.bind, which names them in a TypeError
        provided = [d[0] for d in data_shapes if isinstance(d, (tuple, list)) and d]
        if len(provided) == len(data_shapes) and sorted(provided) != sorted(data_names):
            raise ValueError(f"sym_gen({key!r}) returned data_names {data_names}, but the "
                             f"data provides {provided}")
        extra = {} if self._workers is None else {"workers": self._workers}
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names, state_names=self._state_names,
                      group2ctxs=self._group2ctxs, compression_params=self._compression_params,
                      **extra)

    def _reset_bind(self) -> None:
        """Drop every bucket's executors; parameter values are kept on the host."""
        if self.params_initialized and self.binded:
            self._arg_params, self._aux_params = self.get_params()
        self._stage = Stage.PARAMS_LOADED if self.params_initialized else Stage.CREATED
        self._buckets, self._curr_module, self._curr_bucket_key = {}, None, None

    def switch_bucket(self, bucket_key: Hashable, data_shapes: Any,
                      label_shapes: Any = None) -> None:
        """Make ``bucket_key`` the current bucket, binding its module on first use.

        A new bucket shares the default bucket's parameters, gradients (``grad_req`` as
        bound) and input buffers, and its optimizer once one is installed.

        Parameters
        ----------
        bucket_key : hashable
            The bucket; ``sym_gen(bucket_key)`` builds its network.
        data_shapes : list of DataDesc or (str, tuple)
            Usually ``data_batch.provide_data``; only used for a new bucket.
        label_shapes : list of DataDesc or (str, tuple), optional
            Usually ``data_batch.provide_label``.
        """
        self._require(Stage.BOUND, "switch_bucket")
        if bucket_key not in self._buckets:
            module = self._new_module(bucket_key, data_shapes)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        self._curr_module = self._buckets[bucket_key]
        self._curr_bucket_key = bucket_key

    # ---- descriptions -----------------------------------------------------------------------
    @property
    def data_names(self) -> list:
        """Names of the data inputs (of the current bucket, or the default one)."""
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self) -> list:
        """Names of the outputs (of the current bucket, or the default one)."""
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

    @property
    def data_shapes(self) -> list:
        """DataDesc of each data input of the current bucket."""
        self._require(Stage.BOUND, "data_shapes")
        return self._curr_module.data_shapes

    @property
    def label_shapes(self) -> list | None:
        """DataDesc of each label input of the current bucket, or None."""
        self._require(Stage.BOUND, "label_shapes")
        return self._curr_module.label_shapes

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output of the current bucket."""
        self._require(Stage.BOUND, "output_shapes")
        return self._curr_module.output_shapes

    @property
    def symbol(self) -> Symbol:
        """The network of the current bucket."""
        self._require(Stage.BOUND, "symbol")
        return self._curr_module.symbol

    # ---- parameters -------------------------------------------------------------------------
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``: current values (shared by all buckets), host arrays."""
        self._require(Stage.PARAMS_READY, "get_params")
        if self._params_dirty:  # another bucket may have updated the shared memory
            self._curr_module._params_dirty = True
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def init_params(self, initializer: Any = Uniform(0.01), arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialize the parameters shared by all buckets (see :meth:`Module.init_params`)."""
        if self.params_initialized and not force_init:
            return
        self._require(Stage.BOUND, "init_params")
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self._stage = self._stage.after_params()

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assign parameter values for all buckets (see :meth:`BaseModule.set_params`)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             force_init=force_init, allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            return
        self._require(Stage.BOUND, "set_params")
        self._curr_module.set_params(arg_params, aux_params, allow_missing=True,
                                     force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = True  # the host copies are stale now
        self._stage = self._stage.after_params()

    def get_states(self, merge_multi_context: bool = True) -> list:
        """Values of the state inputs of the current bucket (see :meth:`Module.get_states`)."""
        self._require(Stage.PARAMS_READY, "get_states")
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs of the current bucket (see :meth:`Module.set_states`)."""
        self._require(Stage.PARAMS_READY, "set_states")
        self._curr_module.set_states(states, value)

    # ---- setup ------------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind the default bucket; other buckets are bound by :meth:`switch_bucket`.

        Parameters
        ----------
        data_shapes, label_shapes, for_training, inputs_need_grad
            As for :meth:`Module.bind`, for the default bucket (``data_iter.provide_data``).
        force_rebind : bool, default False
            Drop all buckets and bind again; parameters and optimizer are kept.
        shared_module : None
            Must be None: a BucketingModule shares memory only between its own buckets.
        grad_req : str, list or dict, default 'write'
            Used for every bucket; with 'add' gradients accumulate across buckets.
        """
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise ValueError("shared_module is not supported by BucketingModule")
        # set up the new default module completely before touching any state, so a bad
        # input (names, shapes, a checkpoint that does not fit) leaves the module as it was
        module = self._new_module(self._default_bucket_key, data_shapes)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=grad_req)
        if self.params_initialized:
            arg_params, aux_params = (self.get_params() if self.binded
                                      else (self._arg_params, self._aux_params))
            module.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                               force_init=True)
        if self.optimizer_initialized:  # rebinding keeps the optimizer, as Module does
            module.borrow_optimizer(self._buckets[self._default_bucket_key])
        if self._monitor is not None:
            module.install_monitor(self._monitor)
        self._reset_bind()
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._grad_req = grad_req
        self._buckets[self._default_bucket_key] = module
        self._curr_module, self._curr_bucket_key = module, self._default_bucket_key
        self._stage = module.stage
        self._arg_params = self._aux_params = None  # the modules hold them now
        self._params_dirty = False

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Install an optimizer on the current bucket; every other bucket borrows it.

        See :meth:`Module.init_optimizer`; ``rescale_grad`` follows the current bucket's
        batch size.
        """
        self._require(Stage.PARAMS_READY, "init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        if self._params_dirty:
            self._curr_module._params_dirty = True
        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        self._stage = self._stage.after_optimizer()
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None
        self._share_optimizer()

    def _share_optimizer(self) -> None:
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on every bucket, and on buckets bound later.

        Parameters
        ----------
        mon : Monitor
            Gets every op output during forward.
        """
        self._require(Stage.BOUND, "install_monitor")
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ---- computation ------------------------------------------------------------------------
    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Bind the bucket of the next batch ahead of time; the current bucket stays current.

        Parameters
        ----------
        data_batch : DataBatch
            The next batch (``bucket_key``, ``provide_data``, ``provide_label``).
        sparse_row_id_fn : callable, optional
            Passed to the bucket module's ``prepare``.
        """
        self._require(Stage.PARAMS_READY, "prepare")
        current = self._curr_bucket_key
        self._switch_to_batch(data_batch)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(current, None, None)

    def _switch_to_batch(self, data_batch: Any) -> None:
        key = getattr(data_batch, "bucket_key", None)
        # a batch without a bucket key (a plain iterator's) runs on the default bucket
        self.switch_bucket(self._default_bucket_key if key is None else key,
                           getattr(data_batch, "provide_data", None),
                           getattr(data_batch, "provide_label", None))

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Switch to the batch's bucket (binding it if new), then run forward.

        Parameters
        ----------
        data_batch : DataBatch
            Its ``bucket_key`` picks the bucket (None: the default bucket).
        is_train : bool, optional
            Default: as bound.
        """
        self._require(Stage.PARAMS_READY, "forward")
        self._switch_to_batch(data_batch)
        self._curr_module.forward(data_batch, is_train=is_train)

    @property
    def pool(self) -> Any:
        """The Ray worker pool every bucket runs on (None in process); see
        :attr:`BaseModule.pool`."""
        default = self._buckets.get(self._default_bucket_key)
        return None if default is None else default.pool

    def close(self) -> None:
        """Stop the Ray worker actors every bucket runs on (raymod addition; a no-op in
        process). Bind again before further use."""
        default = self._buckets.get(self._default_bucket_key)
        self._reset_bind()  # keeps the parameter values on the host
        if default is not None:
            default.close()

    def _fit_batch(self, data_batch: Any, eval_metric: Any,
                   on_done: Callable[[], None] | None = None) -> None:
        """Train on one batch in its bucket's module (on workers: one call per worker)."""
        self._require(Stage.OPTIMIZER_READY, "fit")
        self._switch_to_batch(data_batch)
        self._params_dirty = True
        self._curr_module._fit_batch(data_batch, eval_metric, on_done)

    def _fit_defers_steps(self) -> bool:
        return self._curr_module is not None and self._curr_module._fit_defers_steps()

    def _fit_drain(self) -> None:
        if self._curr_module is not None:
            self._curr_module._fit_drain()

    def backward(self, out_grads: Any = None) -> None:
        """Backward pass of the current bucket (see :meth:`Module.backward`)."""
        self._require(Stage.PARAMS_READY, "backward")
        self._curr_module.backward(out_grads=out_grads)

    def update(self) -> None:
        """Apply the shared optimizer to the current bucket's gradients."""
        self._require(Stage.OPTIMIZER_READY, "update")
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last forward pass (see :meth:`Module.get_outputs`)."""
        self._require(Stage.PARAMS_READY, "get_outputs")
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs (see :meth:`Module.get_input_grads`)."""
        self._require(Stage.PARAMS_READY, "get_input_grads")
        if not self.inputs_need_grad:
            raise StageError("call bind(..., inputs_need_grad=True) before get_input_grads")
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Accumulate ``eval_metric`` over the current bucket's last outputs."""
        self._require(Stage.PARAMS_READY, "update_metric")
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    # ---- files ------------------------------------------------------------------------------
    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = True,
                        save_optimizer_states: bool = False) -> None:
        """Save the default bucket's symbol and the parameters, in MXNet's layout.

        Writes ``prefix-symbol.json`` (default bucket), ``prefix-%04d.params`` and, with
        ``save_optimizer_states``, ``prefix-%04d.states``.

        Parameters
        ----------
        prefix : str
            Path prefix.
        epoch : int
            Number written into the params file name.
        remove_amp_cast : bool, default True
            Accepted for MXNet compatibility (raymod graphs hold no AMP casts).
        save_optimizer_states : bool, default False
            Also save the optimizer states.
        """
        self._require(Stage.PARAMS_READY, "save_checkpoint")
        arg_params, aux_params = self.get_params()
        _ckpt.save_checkpoint(prefix, epoch, self._buckets[self._default_bucket_key].symbol,
                              arg_params, aux_params, remove_amp_cast=remove_amp_cast)
        if save_optimizer_states:
            self.save_optimizer_states(_ckpt.states_file(prefix, epoch))

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen: Callable | None = None,
             default_bucket_key: Hashable = None, load_optimizer_states: bool = False,
             **kwargs: Any) -> BucketingModule:
        """A BucketingModule holding a checkpoint's parameters (bind it next).

        Parameters
        ----------
        prefix : str
            Path prefix of ``prefix-symbol.json`` and ``prefix-%04d.params``.
        epoch : int
            Which checkpoint.
        sym_gen : callable
            Required: the checkpoint holds only the default bucket's symbol.
        default_bucket_key : hashable
            Required.
        load_optimizer_states : bool, default False
            Load ``prefix-%04d.states`` when ``init_optimizer`` is called.
        **kwargs
            Other constructor arguments (``context``...).
        """
        if sym_gen is None or default_bucket_key is None:
            raise ValueError("BucketingModule.load needs sym_gen and default_bucket_key")
        states = _ckpt.states_file(prefix, epoch)
        if load_optimizer_states and not os.path.exists(states):
            raise FileNotFoundError(f"optimizer states {states!r} not found (save with "
                                    "save_optimizer_states=True)")
        _, arg_params, aux_params = _ckpt.load_checkpoint(prefix, epoch)
        mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        mod._arg_params, mod._aux_params = arg_params, aux_params
        mod._stage = mod._stage.after_params()
        mod._preload_opt_states = states if load_optimizer_states else None
        return mod

    def save_optimizer_states(self, fname: str) -> None:
        """Save the shared optimizer's states (see :meth:`Module.save_optimizer_states`)."""
        self._require(Stage.OPTIMIZER_READY, "save_optimizer_states")
        self._curr_module.save_optimizer_states(fname)

    def load_optimizer_states(self, fname: str) -> None:
        """Load optimizer states into the shared optimizer (all buckets)."""
        self._require(Stage.OPTIMIZER_READY, "load_optimizer_states")
        self._curr_module.load_optimizer_states(fname)
        self._share_optimizer()  # loading may replace the updater's optimizer
