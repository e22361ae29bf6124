"""Where a :class:`~raymod.module.Module` runs its executors, chosen once in ``__init__``.

A ``Module`` is the same driver in process and on Ray workers; what differs is gathered
here, behind one interface (:class:`Placement`), so the module never asks where it runs:

==========================  =============================  ================================
method                      :class:`InProcess`             :class:`OnWorkers`
==========================  =============================  ================================
``check_shared``            same place, enough devices     same place
``make_group``              ``DataParallelExecutorGroup``  ``RayExecutorGroup`` on the pool
``for_group``               itself                         itself; InProcess for an
                                                           in-process group by default
``check_trainable``         anything goes                  refuses an in-process group
``create_kvstore``          ``_create_kvstore``            ``_create_dist_kvstore``
``batch_size``              x workers for ``dist_sync``    the global batch as bound
``setup_kvstore``           compression, optimizer, keys   ``group.setup_kvstore`` (1 call)
``update``                  ``_update_params*`` here       ``group.update()``
``updater_states``          the module's ``_updater``      the workers' updaters
``set_updater_states``      the module's ``_updater``      the workers' updaters
``fuses_steps``             never                          unless a step method is overridden
``fit_step``                (not called)                   ``group.train_step``
``defers_steps``            never                          when the workers run ahead
``drain``                   nothing                        ``group.drain()``
``check_pre_sliced``        allowed                        NotImplementedError
``close``                   nothing                        stop workers and owned servers
``pool``                    None                           the ``WorkerPool``
==========================  =============================  ================================

The kvstore's optimizer states (``update_on_kvstore``) are read and written by the module
itself: they live on the kvstore in both places.

A module made without ``workers=`` runs where the innermost :func:`default_workers` block
says (``raymod run --workers N`` runs a whole script in one); outside any, in process.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from typing import Any, Callable, Iterator

from .. import optimizer as opt
from ..base import MXNetError
from ..cluster.workers import Workers
from ..model import (_create_dist_kvstore, _create_kvstore, _initialize_kvstore,
                     _update_params, _update_params_on_kvstore)
from ..parallel import DataParallelExecutorGroup
from .lifecycle import Stage

__all__ = ["Placement", "InProcess", "OnWorkers", "placement_for", "default_workers",
           "WorkersDefault", "workers_for"]

_LOG = logging.getLogger(__name__)


class Placement:
    """What differs between running a module's executors in process and on workers.

    Every method takes the module it serves (``mod``): a placement holds only what is its
    own (the worker pool), the module keeps its MXNet-visible attributes.
    """

    #: the Ray worker pool, None in process
    pool: Any = None

    # ---- binding ----------------------------------------------------------------------------
    def check_shared(self, mod: Any, shared_module: Any) -> None:
        """Raise ValueError unless ``shared_module`` runs where ``mod`` runs."""
        if type(shared_module._placement) is not type(self):
            raise ValueError("shared_module must run where this module runs (both on "
                             "workers or both in process)")

    def make_group(self, mod: Any, data_descs: list, label_descs: list | None,
                   for_training: bool, inputs_need_grad: bool, shared_module: Any,
                   grad_req: Any) -> Any:
        """The executor group for these shapes (sharing ``shared_module``'s when given)."""
        raise NotImplementedError

    # ---- optimizer --------------------------------------------------------------------------
    def for_group(self, mod: Any) -> "Placement":
        """The placement that trains ``mod``'s executor group as bound: this one, unless a
        default put the module on workers and its own ``bind`` built an in-process group."""
        return self

    def check_trainable(self, mod: Any) -> None:
        """Raise MXNetError when ``mod``'s group cannot train here."""

    def create_kvstore(self, mod: Any, kvstore: Any) -> tuple[Any, bool, bool]:
        """``(kvstore or None, update_on_kvstore, made_here)`` for ``init_optimizer``'s
        ``kvstore`` argument; ``made_here``: the module made it and must close it."""
        raise NotImplementedError

    def batch_size(self, mod: Any, kv: Any) -> int:
        """The batch size behind ``rescale_grad = 1 / batch_size``."""
        return mod._exec_group.batch_size

    def setup_kvstore(self, mod: Any, kv: Any, optimizer: opt.Optimizer,
                      update_on_kvstore: bool) -> None:
        """Compression, the kvstore's optimizer and initial values; connect the devices."""
        raise NotImplementedError

    # ---- the step ---------------------------------------------------------------------------
    def update(self, mod: Any) -> None:
        """Apply the optimizer to the last backward's gradients."""
        raise NotImplementedError

    def updater_states(self, mod: Any) -> bytes:
        """The local updaters' optimizer states (not ``update_on_kvstore``)."""
        raise NotImplementedError

    def set_updater_states(self, mod: Any, blob: bytes) -> None:
        """Load the local updaters' optimizer states (not ``update_on_kvstore``)."""
        raise NotImplementedError

    def on_servers(self, mod: Any, what: str, call: Callable[[], Any]) -> Any:
        """``call()``, a direct call on the module's kvstore (its optimizer states); on
        workers a KVServer lost meanwhile is restored first and the call run again."""
        return call()

    def fuses_steps(self, mod: Any) -> bool:
        """Whether ``fit`` runs each step as one :meth:`fit_step` instead of the module's
        step methods."""
        return False

    def fit_step(self, mod: Any, data_batch: Any, eval_metric: Any,
                 on_done: Callable[[], None] | None, options: dict) -> None:
        """One fused training step (only where :meth:`fuses_steps`)."""
        raise NotImplementedError(f"{type(self).__name__} has no fused step")

    def defers_steps(self, mod: Any) -> bool:
        """Whether a fused step may complete after ``fit_step`` returns."""
        return False

    def params_agree(self, mod: Any) -> bool:
        """Whether every device already holds the values ``get_params`` returns, so that
        the sync at an epoch's end (``set_params`` of them) would change nothing."""
        return False

    def drain(self, mod: Any) -> None:
        """Wait until every deferred step has completed."""

    def check_pre_sliced(self, message: str) -> None:
        """Raise NotImplementedError(``message``) where input already split per device is
        not supported."""

    # ---- end --------------------------------------------------------------------------------
    def close(self, mod: Any) -> None:
        """Release what the placement started for ``mod`` (see ``Module.close``)."""


class InProcess(Placement):
    """Executors in this process, over the module's ``context`` (MXNet's Module)."""

    def check_shared(self, mod: Any, shared_module: Any) -> None:
        super().check_shared(mod, shared_module)
        if len(shared_module._exec_group.execs) < len(mod._context):
            raise ValueError("shared_module runs on fewer devices than this module")

    def make_group(self, mod: Any, data_descs: list, label_descs: list | None,
                   for_training: bool, inputs_need_grad: bool, shared_module: Any,
                   grad_req: Any) -> DataParallelExecutorGroup:
        shared_group = None if shared_module is None else shared_module._exec_group
        return DataParallelExecutorGroup(
            mod._symbol, mod._context, mod._work_load_list, data_descs, label_descs,
            mod._param_names, for_training, inputs_need_grad, shared_group,
            logger=mod.logger, fixed_param_names=mod._fixed_param_names,
            grad_req=grad_req, state_names=mod._state_names, group2ctxs=mod._group2ctxs)

    def create_kvstore(self, mod: Any, kvstore: Any) -> tuple[Any, bool, bool]:
        kv, update_on_kvstore = _create_kvstore(kvstore, len(mod._context), mod._arg_params)
        return kv, update_on_kvstore, False

    def batch_size(self, mod: Any, kv: Any) -> int:
        batch_size = mod._exec_group.batch_size
        if kv is not None and "dist" in kv.type and "_sync" in kv.type:
            batch_size *= kv.num_workers  # MXNet: each worker process binds its own batch
        return batch_size

    def setup_kvstore(self, mod: Any, kv: Any, optimizer: opt.Optimizer,
                      update_on_kvstore: bool) -> None:
        if kv is None:
            return
        if mod._compression_params:
            kv.set_gradient_compression(mod._compression_params)
        if update_on_kvstore:
            kv.set_optimizer(optimizer)
        _initialize_kvstore(kv, mod._exec_group.param_arrays, mod._arg_params,
                            mod._param_names, update_on_kvstore)

    def update(self, mod: Any) -> None:
        group = mod._exec_group
        if mod._update_on_kvstore:
            _update_params_on_kvstore(group.param_arrays, group.grad_arrays, mod._kvstore,
                                      group.param_names)
        else:
            _update_params(group.param_arrays, group.grad_arrays, updater=mod._updater,
                           num_device=len(mod._context), kvstore=mod._kvstore,
                           param_names=group.param_names)

    def pull_rows(self, mod: Any, pulls: dict) -> None:
        """``{name: (device arrays, row ids)}``: each device copy gets those rows of the
        kvstore's table (every check before any copy)."""
        kv = mod._kvstore
        names = mod._exec_group.param_names
        order = sorted(pulls, key=names.index)
        kv.row_sparse_pull(order, out=[pulls[n][0] for n in order],
                           row_ids=[pulls[n][1] for n in order for _ in pulls[n][0]])

    def updater_states(self, mod: Any) -> bytes:
        return mod._updater.get_states()

    def set_updater_states(self, mod: Any, blob: bytes) -> None:
        mod._updater.set_states(blob)


class OnWorkers(Placement):
    """Executors on Ray worker actors (``Module(..., workers=...)``).

    Parameters
    ----------
    workers : Workers
        The pool's specification; the pool itself starts at the first bind.
    by_default : bool, default False
        The workers come from :func:`default_workers`, not the module's ``workers=``: a
        subclass whose ``bind`` builds an in-process group then trains in process
        (:meth:`for_group`) instead of being refused.
    """

    def __init__(self, workers: Any, by_default: bool = False):
        self.workers = workers
        self.by_default = by_default
        self.pool = None

    def make_group(self, mod: Any, data_descs: list, label_descs: list | None,
                   for_training: bool, inputs_need_grad: bool, shared_module: Any,
                   grad_req: Any) -> Any:
        """A RayExecutorGroup on this module's worker pool (or the shared module's)."""
        from ..cluster.pool import WorkerPool  # Ray is imported only when workers are used
        from ..cluster.remote_group import RayExecutorGroup
        if shared_module is not None:
            self.pool = shared_module._placement.pool
        elif self.pool is None:
            self.pool = WorkerPool(self.workers, logger=None)
        return RayExecutorGroup(
            mod._symbol, self.pool, data_descs, label_descs, mod._param_names, for_training,
            inputs_need_grad, None if shared_module is None else shared_module._exec_group,
            logger=mod.logger, fixed_param_names=mod._fixed_param_names, grad_req=grad_req,
            state_names=mod._state_names,
            work_load_list=mod._work_load_list or [1] * len(mod._context))

    def for_group(self, mod: Any) -> Placement:
        if (self.by_default and self.pool is None
                and isinstance(mod._exec_group, DataParallelExecutorGroup)):
            _note_once(type(mod), f"{_class_name(mod)} trains in this process, not on the "
                       f"default {_describe(self.workers)}: its bind builds an in-process "
                       "DataParallelExecutorGroup (a Module subclass moves to workers when "
                       "its bind calls super().bind)")
            return InProcess()
        return self

    def check_trainable(self, mod: Any) -> None:
        if isinstance(mod._exec_group, DataParallelExecutorGroup):
            raise MXNetError(
                f"{type(mod).__name__}(workers={self.workers!r}) holds an in-process "
                "DataParallelExecutorGroup (made by an overridden bind): it cannot train on "
                "workers. Let Module.bind make the group (call super().bind(...)) or drop "
                "workers= (see 'Subclassing modules' in docs/architecture.md)")

    def create_kvstore(self, mod: Any, kvstore: Any) -> tuple[Any, bool, bool]:
        kv, update_on_kvstore = _create_dist_kvstore(kvstore, mod.logger)
        return kv, update_on_kvstore, kv is not kvstore

    def setup_kvstore(self, mod: Any, kv: Any, optimizer: opt.Optimizer,
                      update_on_kvstore: bool) -> None:
        mod._exec_group.setup_kvstore(kv, optimizer, update_on_kvstore, mod._host_params(),
                                      mod._compression_params, mod._kvstore_corrections())

    def batch_size(self, mod: Any, kv: Any) -> int:
        return mod._exec_group.bound_batch_size

    def pull_rows(self, mod: Any, pulls: dict) -> None:
        """Nothing to pull here: each worker pulls the rows its own slice reads, found from
        the graph, before it computes the slice (see ``Worker._pull_rows``)."""

    def update(self, mod: Any) -> None:
        mod._exec_group.update()

    def updater_states(self, mod: Any) -> bytes:
        return mod._exec_group.get_updater_states()

    def set_updater_states(self, mod: Any, blob: bytes) -> None:
        mod._exec_group.set_updater_states(blob)

    def on_servers(self, mod: Any, what: str, call: Callable[[], Any]) -> Any:
        mod._exec_group.drain()
        return mod._exec_group._with_servers(what, call)

    def fuses_steps(self, mod: Any) -> bool:
        """On workers the whole step is one call per worker (see ``RayExecutorGroup``),
        unless a user's subclass overrides a step method: then fit calls its methods, as
        MXNet's fit does (one call per worker and method)."""
        return mod._user_step_override() is None

    def fit_step(self, mod: Any, data_batch: Any, eval_metric: Any,
                 on_done: Callable[[], None] | None, options: dict) -> None:
        mod._exec_group.train_step(data_batch, eval_metric, on_done=on_done, **options)

    def defers_steps(self, mod: Any) -> bool:
        return self.fuses_steps(mod) and mod._exec_group._runs_ahead()

    def drain(self, mod: Any) -> None:
        mod._exec_group.drain()

    def check_pre_sliced(self, message: str) -> None:
        raise NotImplementedError(message)  # the workers' slices are not the caller's devices

    def params_agree(self, mod: Any) -> bool:
        """The workers hold the very values the servers hold (the servers run the optimizer
        and publish; there are no auxiliary states, which each worker keeps its own of), so
        an epoch's end needs no broadcast of them back."""
        group = mod._exec_group
        return (group is not None and group.state.kv is not None
                and group.state.update_on_kvstore and not group.aux_names)

    def close(self, mod: Any) -> None:
        if self.pool is None:
            return
        if mod._exec_group is not None and mod._params_dirty:
            self.pool.stopping = True  # read what the live workers hold: wait for no more
            mod._sync_params_from_devices()  # keep the trained values on the host
        self.pool.shutdown()
        self.pool = None
        if mod._owns_kvstore:  # made from a type name by init_optimizer: its servers too
            mod._kvstore.close()
            mod._kvstore, mod._owns_kvstore = None, False
        mod._exec_group = None
        mod._stage = Stage.PARAMS_LOADED if mod._stage.params_initialized else Stage.CREATED


def placement_for(workers: Any, by_default: bool = False) -> Placement:
    """The placement for a Module's ``workers`` argument (already coerced): in process for
    None, on those workers otherwise (``by_default``: they came from :func:`default_workers`)."""
    return InProcess() if workers is None else OnWorkers(workers, by_default)


# ---- the default for modules made without workers= ----------------------------------------
class WorkersDefault:
    """One :func:`default_workers` block: its workers and the modules it placed on them.

    Attributes
    ----------
    workers : Workers or None
        Where modules made in the block without ``workers=`` run (None: in process).
    modules : weakref.WeakSet
        The modules (``Module``, ``BucketingModule``, ...) this default put on workers, so
        that whoever set it can close them (``raymod run`` does when the script ends).
    """

    def __init__(self, workers: Workers | None):
        self.workers = workers
        self.modules: weakref.WeakSet = weakref.WeakSet()

    def __repr__(self) -> str:
        return f"WorkersDefault({self.workers!r}, {len(self.modules)} modules)"


# process-wide, not per thread: a script's own threads make modules under the runner's
# default too. Innermost block last.
_DEFAULTS: list[WorkersDefault] = []
_DEFAULTS_LOCK = threading.Lock()
_NOTED: set = set()  # classes already told why they stay in process


@contextlib.contextmanager
def default_workers(workers: Any) -> Iterator[WorkersDefault]:
    """Run the modules made inside this block without ``workers=`` on ``workers``.

    ``Module``, ``BucketingModule``, ``SVRGModule`` and subclasses of them consult it when
    made (a ``BucketingModule``'s bucket modules follow their parent). The setting is
    process-wide while the block runs (threads too) and blocks nest; ``workers=None``
    inside a block means in process again. ``raymod run --workers N`` and
    ``RAYMOD_WORKERS`` run a whole MXNet script in one.

    A subclass of ``Module`` whose own ``bind`` builds an in-process
    ``DataParallelExecutorGroup``, and a class built on ``BaseModule`` itself, cannot
    move to workers: they train in process, and say so once per class in the log.

    Parameters
    ----------
    workers : int, str, Workers or None
        As ``Module(workers=...)``: N, ``'MIN:MAX'``, ``rm.Workers(...)``, or None.

    Yields
    ------
    WorkersDefault
        Its ``modules`` are the modules the block put on workers (close them when done:
        they hold worker actors).

    Examples
    --------
    >>> with rm.mod.default_workers(rm.Workers(2, cpus_per_worker=1)) as placed:
    ...     mod = rm.mod.Module(net)              # on 2 Ray workers
    ...     mod.fit(train_iter, num_epoch=2)
    >>> for mod in placed.modules:
    ...     mod.close()
    """
    scope = WorkersDefault(Workers.coerce(workers))
    with _DEFAULTS_LOCK:
        _DEFAULTS.append(scope)
    try:
        yield scope
    finally:
        with _DEFAULTS_LOCK:
            _DEFAULTS.remove(scope)


def workers_for(mod: Any, workers: Any) -> tuple[Workers | None, bool]:
    """``(workers, by_default)`` for a module made with ``workers=``: the argument coerced
    when given, else the innermost :func:`default_workers` (which then records ``mod``)."""
    if workers is not None:
        return Workers.coerce(workers), False
    with _DEFAULTS_LOCK:
        scope = _DEFAULTS[-1] if _DEFAULTS else None
    if scope is None or scope.workers is None:
        return None, False
    scope.modules.add(mod)
    return scope.workers, True


def note_own_executors(mod: Any) -> None:
    """Log once per class why a module built on ``BaseModule`` itself (its own executors,
    e.g. ``DataParallelExecutorGroup``) stays in process under a default with workers."""
    with _DEFAULTS_LOCK:
        scope = _DEFAULTS[-1] if _DEFAULTS else None
    if scope is None or scope.workers is None:
        return
    # the nearest raymod class: BaseModule (or compat's view of it) means the user's class
    # runs its own executors; Module, BucketingModule, ... place theirs themselves
    base = next(c for c in type(mod).__mro__ if c.__module__.startswith("raymod."))
    if base.__name__ == "BaseModule":
        _note_once(type(mod), f"{_class_name(mod)} is built on BaseModule and runs its own "
                   f"executors: it trains in this process, not on the default "
                   f"{_describe(scope.workers)} (only Module, BucketingModule, SVRGModule "
                   "and their subclasses move to workers)")


def _describe(workers: Workers) -> str:
    if workers.max_workers > workers.min_workers:
        return f"{workers.min_workers}..{workers.max_workers} Ray workers"
    return f"{workers.min_workers} Ray workers"


def _class_name(mod: Any) -> str:
    cls = type(mod)
    return f"{cls.__module__}.{cls.__qualname__}"


def _note_once(cls: type, message: str) -> None:
    if cls not in _NOTED:
        _NOTED.add(cls)
        _LOG.warning(message)
