"""``SVRGModule``: a Module trained with stochastic variance-reduced gradients (SVRG).

SVRG (Johnson and Zhang, 2013) keeps a snapshot ``w~`` of the weights and the full
gradient ``mu`` at that snapshot (the mean over all batches of each batch's summed
gradient). Each step then follows ``g_b(w) - g_b(w~) + mu`` instead of ``g_b(w)``: the same
expectation, but a variance that vanishes as ``w`` and ``w~`` approach the optimum, so a
constant learning rate converges linearly instead of stalling at a noise floor.

In process the snapshot lives in an auxiliary :class:`Module` (``_mod_aux``) bound like the
main one; every training forward/backward runs both on the same batch. On Ray workers
(``workers=``) each worker keeps ``w~`` and the KVServers keep ``mu``; the two strategies are
in :mod:`raymod.module.svrg_placement`, chosen once with the module. ``fit`` is BaseModule's loop:
only the ``_fit_begin_epoch`` hook is overridden, to refresh ``w~`` and ``mu`` every
``update_freq`` epochs.

Departures from MXNet 1.9.1 (``mx.contrib.svrg_optimization``):

- ``mu`` is recomputed from scratch at every refresh; MXNet never clears its accumulator,
  so from the second refresh on it stores ``mean + previous_mu / num_batches``.
- Full-gradient kvstore keys are ``FULL_GRAD_PREFIX + name`` (reserved, checked against the
  symbol), not ``name + "_full"`` (see :mod:`raymod.optimizer.svrg`).
- ``fit`` also refreshes at its first epoch when no full gradient exists yet (resuming
  at an epoch that is not a multiple of ``update_freq``); MXNet would run with ``mu = 0``.
- ``forward(batch)`` with ``is_train`` left None trains both modules when bound for
  training (MXNet runs the snapshot module only for an explicit ``is_train=True``).

As in MXNet, ``mu`` is zero from ``init_optimizer`` until the first full-gradient pass, so
``forward``/``backward``/``update`` can be driven by hand before it (the snapshot module
then needs parameters: ``update_full_grads``, or ``_mod_aux.init_params``/``set_params``).
- Gradient compression is refused: it would also quantise ``mu`` on its way through the
  kvstore.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..context import cpu
from ..optimizer.svrg import FULL_GRAD_PREFIX, _SVRGOptimizer, full_grad_key
from ..symbol import Symbol
from .lifecycle import Stage, StageError
from .module import Module
from .placement import default_workers
from .svrg_placement import SVRGStrategy, svrg_strategy_for

__all__ = ["SVRGModule", "FullGradPartial"]


@dataclass
class FullGradPartial:
    """A part of a full-gradient pass, to be summed with the other parts.

    Attributes
    ----------
    sums : dict of str to list of arrays
        Per parameter, per device: the sum over the part's batches of each batch's summed
        gradient at the snapshot weights.
    count : float
        The part's number of batches, a padded batch counting ``1 - pad / batch_size``.
    """

    sums: dict = field(default_factory=dict)
    count: float = 0.0

    def __add__(self, other: "FullGradPartial") -> "FullGradPartial":
        if not self.sums:
            return FullGradPartial(dict(other.sums), self.count + other.count)
        if not other.sums:
            return FullGradPartial(dict(self.sums), self.count + other.count)
        sums = {name: [a + b for a, b in zip(parts, other.sums[name])]
                for name, parts in self.sums.items()}
        return FullGradPartial(sums, self.count + other.count)


class SVRGModule(Module):
    """A Module that trains with SVRG: steps along ``g_b(w) - g_b(w~) + mu``.

    Parameters
    ----------
    symbol : Symbol
        The network.
    data_names : list of str, default ('data',)
        Names of the data inputs.
    label_names : list of str, default ('softmax_label',)
        Names of the label inputs.
    logger : Logger, default logging
        Where progress lines go.
    context : Context or list of Context, default cpu()
        Devices; both the module and its snapshot run on all of them.
    work_load_list : list of number, optional
        Relative share of the batch per device.
    fixed_param_names : list of str, optional
        Parameters that are never updated.
    state_names : list of str, optional
        State inputs (see :class:`Module`).
    group2ctxs : dict or list of dict, optional
        Accepted for compatibility (see :class:`Module`).
    compression_params : dict, optional
        Must be None: compression would quantise the full gradients too.
    update_freq : int
        Recompute the snapshot and the full gradient every ``update_freq`` epochs
        (2: at epochs 0, 2, 4, ...). Required.
    workers : optional
        Passed to :class:`Module` when given (workers to run the executors on).

    Examples
    --------
    >>> net = rm.sym.LinearRegressionOutput(
    ...     rm.sym.FullyConnected(rm.sym.Variable('data'), num_hidden=1, name='fc'),
    ...     name='lro')
    >>> mod = SVRGModule(net, label_names=['lro_label'], update_freq=2)
    >>> mod.fit(train_iter, eval_metric='mse', optimizer='sgd',
    ...         optimizer_params={'learning_rate': 0.025}, num_epoch=10)
    """

    def __init__(self, symbol: Symbol, data_names: Sequence[str] | None = ("data",),
                 label_names: Sequence[str] | None = ("softmax_label",), logger: Any = logging,
                 context: Any = cpu(), work_load_list: Sequence[float] | None = None,
                 fixed_param_names: Sequence[str] | None = None,
                 state_names: Sequence[str] | None = None, group2ctxs: Any = None,
                 compression_params: dict | None = None, update_freq: int | None = None,
                 workers: Any = None):
        if isinstance(update_freq, bool) or not isinstance(update_freq, (int, np.integer)):
            raise TypeError("SVRGModule: update_freq must be a positive int (a full-gradient "
                            f"pass every update_freq epochs), got {update_freq!r}")
        if update_freq <= 0:
            raise ValueError(f"SVRGModule: update_freq must be a positive int, got {update_freq}")
        if compression_params is not None:
            raise ValueError("SVRGModule does not support gradient compression: the full "
                             "gradients pushed through the kvstore would be quantised too")
        args = dict(symbol=symbol, data_names=data_names, label_names=label_names,
                    logger=logger, context=context, work_load_list=work_load_list,
                    fixed_param_names=fixed_param_names, state_names=state_names,
                    group2ctxs=group2ctxs)
        extra = {} if workers is None else {"workers": workers}  # Module takes it when given
        super().__init__(**args, **extra)
        reserved = [n for n in self._param_names if n.startswith(FULL_GRAD_PREFIX)]
        if reserved:
            raise ValueError(f"SVRGModule: parameter names {reserved} start with "
                             f"{FULL_GRAD_PREFIX!r}, which is reserved for full-gradient keys")
        self.update_freq = int(update_freq)
        with default_workers(None):  # in process whatever the default: w~ lives here only
            self._mod_aux = Module(**args)  # when the module does (in process)
        self._svrg: SVRGStrategy = svrg_strategy_for(self._placement)  # where w~ and mu live
        self._ctx_len = len(self._context)
        self._param_dict: list[dict] | None = None  # per device: name -> this device's mu
        self._full_grads_ready = False  # mu computed (or restored), not the initial zeros
        # how far the snapshot module got on the current batch: None, "forward", "backward"
        self._aux_step: str | None = None
        self._keep_full_grads = False  # resumed mid-epoch: w~ and mu came with the checkpoint

    # ---- binding ----------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind the module and, for training, its snapshot module (see :meth:`Module.bind`).

        Shapes are checked by the main module first, so bad shapes leave both unbound.
        """
        ignored = self.binded and not force_rebind  # Module warns and returns
        super().bind(data_shapes, label_shapes, for_training, inputs_need_grad, force_rebind,
                     shared_module, grad_req)
        if for_training and not ignored:
            shared_aux = shared_module._mod_aux if isinstance(shared_module, SVRGModule) else None
            self._svrg.bind(self, data_shapes, label_shapes, force_rebind, shared_aux, grad_req)

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Reshape both modules for new input shapes (see :meth:`Module.reshape`)."""
        super().reshape(data_shapes, label_shapes)
        if self._mod_aux.binded:
            self._mod_aux.reshape(data_shapes, label_shapes)

    # ---- optimizer --------------------------------------------------------------------------
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Install ``optimizer`` wrapped in an ``_SVRGOptimizer`` (see Module.init_optimizer).

        With a kvstore, each parameter also gets a full-gradient key
        (``FULL_GRAD_PREFIX + name``), through which the devices' full gradients are summed.
        The full gradient is cleared to zeros (per device, as MXNet): ``fit`` (or
        :meth:`update_full_grads`) recomputes it.
        """
        ignored = self.optimizer_initialized and not force_init  # Module warns and returns
        super().init_optimizer(kvstore, optimizer, optimizer_params, force_init)
        if ignored:
            return
        self._full_grads_ready = False
        self._param_dict = self._zero_full_grads()
        self._svrg.init_full_grads(self)

    def _kvstore_corrections(self) -> dict:
        """On workers, mu lives on the servers, which add it to each step's gradient."""
        return {name: full_grad_key(name) for name in self._param_names
                if name not in self._fixed_param_names}

    def _make_optimizer(self, optimizer: Any, optimizer_params: Any, update_on_kvstore: bool,
                        rescale_grad: float) -> _SVRGOptimizer:
        """Module's optimizer (rescale_grad, idx2name, multipliers), wrapped for SVRG."""
        inner = super()._make_optimizer(optimizer, optimizer_params, update_on_kvstore,
                                        rescale_grad)
        return inner if isinstance(inner, _SVRGOptimizer) else _SVRGOptimizer(inner)

    # ---- full gradients ---------------------------------------------------------------------
    def _zero_full_grads(self) -> list[dict]:
        """Per device, a zero full gradient for every parameter, on that device (on
        workers: one host dict)."""
        return self._svrg.zero_full_grads(self)

    def update_full_grads(self, train_data: Any) -> None:
        """Take the snapshot ``w~ = w`` and compute the full gradient ``mu`` at it.

        ``mu`` is, per parameter, the mean over ``train_data``'s batches of each batch's
        summed gradient, the number of batches reduced by ``pad / batch_size`` for a padded
        last batch (as MXNet; the padding rows' gradients are in the sum). It is computed
        afresh at every call.

        Parameters
        ----------
        train_data : DataIter
            The training data; it is reset first and left exhausted.
        """
        self._require(Stage.OPTIMIZER_READY, "update_full_grads")
        self._svrg.update_full_grads(self, train_data)

    def _full_grad_partial(self, batches: Iterable) -> FullGradPartial:
        """The snapshot module's summed gradients over ``batches`` (one part of a full pass)."""
        sums: dict = {}
        count = 0.0
        for batch in batches:
            self._mod_aux.forward(batch, is_train=True)
            self._mod_aux.backward()
            group = self._mod_aux._exec_group  # read after forward: a reshape replaces arrays
            for name, grads in zip(group.param_names, group.grad_arrays):
                if grads[0] is None:  # fixed parameter
                    continue
                if name in sums:
                    for acc, g in zip(sums[name], grads):
                        acc += g
                else:
                    sums[name] = [g.copy() for g in grads]
            count += 1.0 - (getattr(batch, "pad", None) or 0) / group.batch_size
        return FullGradPartial(sums, count)

    @staticmethod
    def _combine_full_grad_partials(partials: Iterable[FullGradPartial]) -> FullGradPartial:
        """The sum of several parts of a full-gradient pass."""
        return sum(partials, FullGradPartial())

    def _set_full_grads(self, partial: FullGradPartial) -> None:
        """Turn a complete pass into ``mu`` and give every device its share."""
        if partial.count <= 0:
            raise ValueError("update_full_grads: train_data yielded no batches")
        means = {name: [s / partial.count for s in parts] for name, parts in partial.sums.items()}
        self._param_dict = [{} for _ in range(self._ctx_len)]
        for name, parts in means.items():
            if self._kvstore is not None:
                self._accumulate_kvstore(name, parts)
            else:
                for k, part in enumerate(parts):
                    self._param_dict[k][name] = part
        self._full_grads_ready = True

    def _accumulate_kvstore(self, name: str, values: list) -> list:
        """Sum per-device values through ``name``'s full-gradient key (pulled back into
        ``values``); each device's share becomes its ``mu`` for ``name``, and is returned.

        The kvstore later sums the devices' SVRG gradients, so every device contributes
        ``total / num_devices`` and the sum carries ``mu`` once.
        """
        key = full_grad_key(name)
        self._kvstore.push(key, values)
        self._kvstore.pull(key, out=values)
        shares = [values[k] / self._ctx_len for k in range(self._ctx_len)]
        if self._param_dict is None:
            self._param_dict = [{} for _ in range(self._ctx_len)]
        for k, share in enumerate(shares):
            self._param_dict[k][name] = share
        return shares

    # ---- computation ------------------------------------------------------------------------
    def _require_full_grads(self, action: str) -> None:
        if not self._full_grads_ready:
            raise StageError(f"call update_full_grads(train_data) before {action}: SVRG needs "
                             "the snapshot and its full gradient (fit computes them)")

    def _require_snapshot(self) -> None:
        if not self._mod_aux.params_initialized:
            raise StageError("SVRGModule: the snapshot module has no parameters for a training "
                             "forward: call update_full_grads(train_data) first (fit does), or "
                             "give them with _mod_aux.init_params() / _mod_aux.set_params()")

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward pass; in training mode the snapshot module runs on the same batch.

        Parameters
        ----------
        data_batch : DataBatch
            The batch.
        is_train : bool, optional
            Training mode; default: as bound.
        """
        self._require(Stage.PARAMS_READY, "forward")
        training = self.for_training if is_train is None else is_train
        if training:
            self._svrg.check_training_forward(self)
        self._aux_step = None
        super().forward(data_batch, is_train)
        if training:
            self._mod_aux.forward(data_batch, is_train=True)
            self._aux_step = "forward"

    def backward(self, out_grads: Any = None) -> None:
        """Backward pass of both modules (see :meth:`Module.backward`)."""
        super().backward(out_grads)
        if self._aux_step is not None:
            self._mod_aux.backward(out_grads)
            self._aux_step = "backward"

    def update(self) -> None:
        """Replace each gradient by ``g_b(w) - g_b(w~) + mu``, then apply the optimizer.

        The optimizer runs where Module runs it (kvstore or local updater), with
        ``rescale_grad = 1/batch_size``. As in MXNet the rule is applied in place at every
        call: ``g_b(w~)`` is the snapshot module's last gradient, and ``mu`` is zero before
        the first :meth:`update_full_grads`.
        """
        self._require(Stage.OPTIMIZER_READY, "update")
        self._svrg.correct_gradients(self)
        super().update()

    # ---- checkpoints of fit --------------------------------------------------------------
    def _fit_state_arrays(self) -> dict:
        """The snapshot ``w~`` (``snapshot:<name>``, ``snapshot_aux:<name>``) and the full
        gradient ``mu`` (``full_grad:<device>:<name>``; on workers ``full_grad:<name>``)."""
        if not self._full_grads_ready:
            return {}
        return self._svrg.state_arrays(self)

    def _set_fit_state_arrays(self, arrays: dict, position: dict) -> None:
        """Take back ``w~`` and ``mu``; a run resumed inside an epoch keeps them for the rest
        of it (the uninterrupted run refreshed them at the epoch's start)."""
        def part(prefix: str) -> dict:
            return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}

        snapshot, mu = part("snapshot:"), part("full_grad:")
        if not snapshot:  # saved before the first full-gradient pass
            return
        self._svrg.set_state_arrays(self, snapshot, part("snapshot_aux:"), mu)
        self._full_grads_ready = True
        self._keep_full_grads = position["nbatch"] > 0

    def _fused_step_options(self) -> dict:
        """Workers push ``g(w) - g(w~)``; the servers add ``mu``."""
        self._require_full_grads("a training step")
        return {"svrg": True}

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Prepare both modules for the next batch (see :meth:`Module.prepare`)."""
        super().prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        if self._mod_aux.binded:
            self._mod_aux.prepare(data_batch)

    # ---- fit hook ---------------------------------------------------------------------------
    def _fit_begin_epoch(self, epoch: int, train_data: Any, eval_metric: Any) -> None:
        """Reset the metric; refresh snapshot and full gradient every ``update_freq`` epochs."""
        super()._fit_begin_epoch(epoch, train_data, eval_metric)
        keep, self._keep_full_grads = self._keep_full_grads, False
        if not keep and (epoch % self.update_freq == 0 or not self._full_grads_ready):
            self.update_full_grads(train_data)
            train_data.reset()
