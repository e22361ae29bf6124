"""``SequentialModule``: modules run one after another, each feeding the next.

Forward hands each module's outputs to the next module as its data; backward hands each
module's input gradients to the module before it. Parameters, optimizers and metrics are
those of the member modules.
"""
from __future__ import annotations

import copy
import logging
from typing import Any

from ..initializer import Uniform
from ..io import DataDesc
from .base_module import BaseModule
from .lifecycle import Stage

__all__ = ["SequentialModule"]


class SequentialModule(BaseModule):
    """A chain of modules: the outputs of one are the data of the next.

    Build it with :meth:`add`; ``bind``, ``init_params``, ``init_optimizer``, ``forward``,
    ``backward``, ``update`` and ``update_metric`` go to every member in order (backward
    in reverse), and ``fit``/``score``/``predict`` come from :class:`BaseModule`.

    Parameters
    ----------
    logger : Logger, default logging
        Where progress lines go.
    workers : None
        Not taken here (a ValueError says so): a member ``Module(..., workers=...)`` runs on
        Ray workers, and the chain passes arrays between its members in this process.

    Examples
    --------
    >>> seq = (rm.mod.SequentialModule()
    ...        .add(rm.mod.Module(features, label_names=None))
    ...        .add(rm.mod.Module(head), take_labels=True, auto_wiring=True))
    >>> seq.fit(train_iter, num_epoch=5)
    """

    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger: Any = logging, *, workers: Any = None):
        if workers is not None:
            raise ValueError(f"SequentialModule(workers={workers!r}): a chain has no executors "
                             "of its own; give workers= to the Modules you add (each runs "
                             "where its own workers= says)")
        super().__init__(logger=logger)
        self._modules: list[BaseModule] = []
        self._metas: list[dict] = []
        self._label_shapes: list | None = None
        self._data_shapes: list | None = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module: BaseModule, **kwargs: Any) -> "SequentialModule":
        """Append a module to the chain.

        Parameters
        ----------
        module : BaseModule
            The next module; its data are the previous module's outputs.
        take_labels : bool, default False
            Give this module the batch's labels (a loss module needs them); the metric is
            updated from the modules that take labels.
        auto_wiring : bool, default False
            Rename the incoming arrays to this module's ``data_names`` (in order), so its
            data names need not equal the previous module's output names.

        Returns
        -------
        SequentialModule
            ``self``, so calls chain.

        Notes
        -----
        Adding a module undoes ``bind``, ``init_params`` and ``init_optimizer``: call them
        (or ``fit``) again.
        """
        if not isinstance(module, BaseModule):
            raise TypeError(f"add(module=...) takes a module (BaseModule), got "
                            f"{type(module).__name__}")
        unknown = sorted(set(kwargs) - self._meta_keys)
        if unknown:
            raise ValueError(f"add() got unknown options {unknown}; known: "
                             f"{sorted(self._meta_keys)}")
        self._modules.append(module)
        self._metas.append(dict(kwargs))
        self._stage = Stage.CREATED  # the chain changed: bind and initialize it again
        self._optimizer_unbound = False
        return self

    def fit(self, train_data: Any, *args: Any, checkpoint: Any = None, resume: bool = False,
            **kwargs: Any) -> Any:
        """Train every module (see :meth:`BaseModule.fit`, whose FitResult it returns);
        ``checkpoint``/``resume`` are not supported for a chain (ValueError before anything
        is trained)."""
        if checkpoint is not None or resume:
            raise ValueError("SequentialModule.fit(checkpoint=..., resume=...) is not "
                             "supported: save each module (save_checkpoint) from an "
                             "epoch_end_callback instead")
        return super().fit(train_data, *args, **kwargs)

    # ---- descriptions -----------------------------------------------------------------------
    @property
    def data_names(self) -> list:
        """Data names of the first module (empty for an empty chain)."""
        return list(self._modules[0].data_names) if self._modules else []

    @property
    def output_names(self) -> list:
        """Output names of the last module (empty for an empty chain)."""
        return list(self._modules[-1].output_names) if self._modules else []

    @property
    def data_shapes(self) -> list:
        """Data descriptions of the first module (needs bind)."""
        self._require(Stage.BOUND, "data_shapes")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self) -> list | None:
        """Label descriptions given to bind, or None when no module takes labels."""
        self._require(Stage.BOUND, "label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> list:
        """Output shapes of the last module (needs bind)."""
        self._require(Stage.BOUND, "output_shapes")
        return self._modules[-1].output_shapes

    @property
    def symbol(self) -> Any:
        """The last module's symbol (what the epoch-end callbacks receive)."""
        return self._modules[-1].symbol if self._modules else None

    # ---- parameters -------------------------------------------------------------------------
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)`` of every module, merged into two dicts."""
        self._require(Stage.PARAMS_READY, "get_params")
        arg_params, aux_params = {}, {}
        for module in self._modules:
            args, auxs = module.get_params()
            arg_params.update(args)
            aux_params.update(auxs)
        return arg_params, aux_params

    def init_params(self, initializer: Any = Uniform(0.01), arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialize every module's parameters.

        ``arg_params``/``aux_params`` hold the values of all modules; each module takes the
        names it has. Parameter names must not repeat across modules.

        Parameters
        ----------
        initializer, arg_params, aux_params, allow_missing, force_init, allow_extra
            As in :meth:`Module.init_params`; ``allow_extra`` concerns names that no module
            has.
        """
        if self.params_initialized and not force_init:
            return
        self._require(Stage.BOUND, "init_params")
        owners = self._param_owners()
        for kind, given, index in (("arg_params", arg_params, 0), ("aux_params", aux_params, 1)):
            extra = [n for n in (given or {}) if n not in owners[index]]
            if extra and not allow_extra:
                raise ValueError(f"{kind} has {extra}, which no module of the chain has "
                                 "(pass allow_extra=True to ignore them)")
        for module in self._modules:
            module.init_params(initializer=initializer,
                               arg_params=_own(arg_params, module, 0),
                               aux_params=_own(aux_params, module, 1),
                               allow_missing=allow_missing, force_init=force_init,
                               allow_extra=allow_extra)
        self._stage = self._stage.after_params()

    def _param_owners(self) -> tuple[dict, dict]:
        """(arg name -> module index, aux name -> module index); ValueError on a repeat."""
        owners: tuple[dict, dict] = ({}, {})
        for i, module in enumerate(self._modules):
            for names, table in zip(_names_of(module), owners):
                for name in names:
                    if name in table:
                        raise ValueError(f"parameter {name!r} is in module {table[name]} "
                                         f"({type(self._modules[table[name]]).__name__}) and "
                                         f"module {i} ({type(module).__name__}) of the chain; "
                                         "names must be unique (use name= or prefixes)")
                    table[name] = i
        return owners

    # ---- setup ------------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind every module: each one's data shapes are the previous one's output shapes.

        Parameters
        ----------
        data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind, grad_req
            As in :meth:`Module.bind`. Modules after the first are bound with
            ``inputs_need_grad=True`` when training, so gradients flow back through them.
        shared_module : None
            Not supported (a chain shares no parameters with another); must be None.
        """
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise ValueError("SequentialModule.bind(shared_module=...) is not supported; "
                             f"got {type(shared_module).__name__}, expected None")
        if inputs_need_grad and not for_training:
            raise ValueError("inputs_need_grad=True needs for_training=True")
        if not self._modules:
            raise ValueError("SequentialModule.bind: the chain is empty; add() modules first")
        wants_labels = False
        shapes = list(data_shapes)
        for i, (module, meta) in enumerate(zip(self._modules, self._metas)):
            takes_labels = bool(meta.get(self.META_TAKE_LABELS, False))
            wants_labels = wants_labels or takes_labels
            if meta.get(self.META_AUTO_WIRING, False):
                names = module.data_names
                if len(names) != len(shapes):
                    raise ValueError(f"auto_wiring of module {i} ({type(module).__name__}): "
                                     f"it has {len(names)} data inputs {list(names)} but the "
                                     f"module before gives {len(shapes)} arrays")
                shapes = [_renamed(desc, name) for desc, name in zip(shapes, names)]
            module.bind(data_shapes=shapes, label_shapes=label_shapes if takes_labels else None,
                        for_training=for_training,
                        inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            shapes = module.output_shapes
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._label_shapes = label_shapes if wants_labels else None
        self._data_shapes = list(data_shapes)
        self.binded = True

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Install the optimizer in every module (see :meth:`Module.init_optimizer`).

        A name (``'sgd'``) makes one optimizer per module. An ``Optimizer`` instance goes to
        the first module and a copy of it (made before any module touched it) to each of
        the others: their update indices restart at 0, so one shared instance would mix
        their update counts and index-to-name tables (MXNet shares it; see
        ``docs/differences.md``).
        """
        self._require(Stage.PARAMS_READY, "init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        copies = ([optimizer] + [copy.deepcopy(optimizer) for _ in self._modules[1:]]
                  if not isinstance(optimizer, str) else [optimizer] * len(self._modules))
        for module, own in zip(self._modules, copies):
            module.init_optimizer(kvstore=kvstore, optimizer=own,
                                  optimizer_params=optimizer_params, force_init=force_init)
        self._stage = self._stage.after_optimizer()

    # ---- computation ------------------------------------------------------------------------
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward through the chain; each module's outputs become the next one's data.

        Parameters
        ----------
        data_batch : DataBatch
            The batch for the first module; its labels go to the modules that take them.
        is_train : bool, optional
            Training mode; default: as bound.
        """
        self._require(Stage.PARAMS_READY, "forward")
        batch = copy.copy(data_batch)  # the caller's batch keeps its data
        last = len(self._modules) - 1
        for i, module in enumerate(self._modules):
            module.forward(batch, is_train=is_train)
            if i == last:
                break
            batch.data = module.get_outputs()
            if getattr(batch, "provide_data", None) is not None:
                batch.provide_data = [DataDesc(name, tuple(out.shape)) for (name, _), out
                                      in zip(module.output_shapes, batch.data)]

    def backward(self, out_grads: Any = None) -> None:
        """Backward through the chain in reverse; each module's input gradients are the
        output gradients of the module before it.

        Parameters
        ----------
        out_grads : array or list of arrays, optional
            Gradients of the last module's outputs (None when it ends in a loss).
        """
        self._require(Stage.PARAMS_READY, "backward")
        for i in range(len(self._modules) - 1, -1, -1):
            module = self._modules[i]
            module.backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = module.get_input_grads()

    def update(self) -> None:
        """Each module applies its optimizer."""
        self._require(Stage.OPTIMIZER_READY, "update")
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last module."""
        self._require(Stage.PARAMS_READY, "get_outputs")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the first module's data (needs ``bind(inputs_need_grad=True)``)."""
        self._require(Stage.PARAMS_READY, "get_input_grads")
        if not self.inputs_need_grad:
            raise ValueError("get_input_grads needs bind(..., inputs_need_grad=True)")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` from every module that takes labels."""
        self._require(Stage.BOUND, "update_metric")
        for meta, module in zip(self._metas, self._modules):
            if meta.get(self.META_TAKE_LABELS, False):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on every module."""
        self._require(Stage.BOUND, "install_monitor")
        for module in self._modules:
            module.install_monitor(mon)

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Nothing to prepare: a chain's modules see their data only during forward."""
        super().prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)


def _names_of(module: BaseModule) -> tuple[list, list]:
    """(parameter names, auxiliary-state names) a member module holds."""
    if hasattr(module, "_param_names"):
        return list(module._param_names), list(getattr(module, "_aux_names", []))
    if module.params_initialized:
        args, auxs = module.get_params()
        return list(args), list(auxs)
    return [], []


def _own(given: dict | None, module: BaseModule, index: int) -> dict | None:
    """The entries of ``given`` that belong to ``module``."""
    if given is None:
        return None
    names = set(_names_of(module)[index])
    return {k: v for k, v in given.items() if k in names}


def _renamed(desc: Any, name: str) -> Any:
    """``desc`` (a DataDesc or a (name, shape) pair) under another name."""
    if isinstance(desc, DataDesc):
        return DataDesc(name, desc.shape, desc.dtype, desc.layout)
    return (name,) + tuple(desc[1:])
