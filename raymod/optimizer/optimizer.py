"""The :class:`Optimizer` base class, its registry, and the array helpers optimizers share.

An optimizer implements ``create_state(index, weight)`` and ``update(index, weight, grad,
state)``; updates change ``weight`` and the state arrays in place, since executors hold those
very arrays. Arrays are numpy or CuPy; the array module is read off the weight.

Gradients may also be :class:`~raymod.sparse.RowSparseArray` (weights and states stay dense).
An optimizer whose :meth:`Optimizer._lazy_rows` says so updates only the gradient's rows
(MXNet's lazy / sparse updates, see :mod:`raymod.optimizer.rows`); every other one runs its
dense rule on ``grad.todense()``, which is what MXNet's dense-only update ops do too.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import types
import warnings
from typing import Any, Iterator

import numpy as np

from ..base import check_int, check_real
from ..lr_scheduler import _REGISTRY as _LR_REGISTRY
from ..lr_scheduler import LRScheduler
from ..registry import Registry
from .rows import Rule, densify, is_row_sparse, update_rows

__all__ = ["Optimizer", "register", "create", "get_array_module"]

_REGISTRY: Registry["Optimizer"] = Registry("optimizer")


@functools.lru_cache(maxsize=None)
def _cupy() -> types.ModuleType | None:
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def get_array_module(array: Any) -> types.ModuleType:
    """numpy or cupy: the module that ``array`` belongs to.

    CuPy is imported only when an array that is not a numpy array shows up.

    Parameters
    ----------
    array : array-like
        A numpy or cupy array (or scalar).

    Returns
    -------
    module
        ``numpy`` or ``cupy``.
    """
    if isinstance(array, np.ndarray):
        return np
    cupy = _cupy()
    return np if cupy is None else cupy.get_array_module(array)


# True while _SVRGOptimizer builds the optimizer it wraps: MXNet's own SVRG test gives that
# one learning_rate=-1.0 to see the setting pass through, so its sign is not checked there
_ANY_LR_SIGN: contextvars.ContextVar[bool] = contextvars.ContextVar("any_lr_sign", default=False)


@contextlib.contextmanager
def any_learning_rate_sign() -> Iterator[None]:
    """Optimizers made inside this block may take a negative ``learning_rate`` (internal)."""
    token = _ANY_LR_SIGN.set(True)
    try:
        yield
    finally:
        _ANY_LR_SIGN.reset(token)


# ranges of optimizer settings, as keyword arguments of raymod.base.check_real
UNIT = {"low": 0, "high": 1, "high_open": True}  # [0, 1): momenta, betas, decay rates
NON_NEGATIVE = {"low": 0}
POSITIVE = {"low": 0, "low_open": True}  # epsilons
FINITE_OR_NONE = {"none_ok": True}  # clip thresholds: None or <= 0 means off, as in MXNet


def check_settings(optimizer: Any, **settings: tuple) -> None:
    """Raise, naming the optimizer and the setting, for a value out of its range.

    Each keyword is ``name=(value, range)`` with a range such as :data:`UNIT`; the error
    reads ``"Adam: beta1 must be a finite number in [0, 1), got 1.5"``. Optimizers call
    this first in ``__init__``, before setting anything.
    """
    owner = type(optimizer).__name__
    for name, (value, bounds) in settings.items():
        check_real(owner, name, value, **bounds)


def _check_learning_rate(owner: str, name: str, lr: Any, none_ok: bool = False) -> None:
    """A finite learning rate >= 0 (any sign inside :func:`any_learning_rate_sign`)."""
    check_real(owner, name, lr, None if _ANY_LR_SIGN.get() else 0, none_ok=none_ok)


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _jsonable(key: str, value: Any) -> Any:
    """``value`` as plain JSON types, or a TypeError naming ``key``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(key, v) for v in value]
    raise TypeError(f"optimizer setting {key!r} = {value!r} cannot be saved as JSON")


class Optimizer:
    """Base class of every optimizer.

    Parameters
    ----------
    rescale_grad : float, default 1.0
        Gradients are multiplied by this before anything else; usually ``1/batch_size``.
    param_idx2name : dict of int to str, optional
        Maps update indices to parameter names, so that name-keyed ``lr_mult``/``wd_mult``
        apply; parameters whose names end in neither ``_weight`` nor ``_gamma`` get no
        weight decay unless told otherwise.
    wd : float, default 0.0
        Weight decay (L2 penalty) coefficient; at least 0.
    clip_gradient : float, optional
        Clip the rescaled gradient elementwise to ``[-clip_gradient, clip_gradient]``;
        ``None`` (or a value <= 0, as in MXNet's update ops) turns clipping off.
    learning_rate : float, optional
        The learning rate, at least 0. ``None`` means the class default (0.01 here) when
        there is no ``lr_scheduler``, and the scheduler's own ``base_lr`` when there is; a
        value given together with a scheduler overwrites its ``base_lr``.
    lr_scheduler : LRScheduler, optional
        Gives the learning rate as a function of the update count.
    sym : Symbol, optional
        The network; ``__lr_mult__`` / ``__wd_mult__`` attributes of its arguments become
        default multipliers (read through ``sym.attr_dict()`` and ``sym.list_arguments()``).
    begin_num_update : int, default 0
        The update count to start from, e.g. when resuming training; at least 0.
    multi_precision : bool, default False
        Keep a float32 master copy of float16 weights and update that instead.
    param_dict : dict of int to Parameter, optional
        Index -> object with ``lr_mult`` / ``wd_mult`` attributes; takes precedence over
        the multiplier tables.
    """

    #: learning rate used when neither ``learning_rate`` nor a scheduler is given
    default_learning_rate = 0.01
    #: constructor argument -> attribute holding it, where they differ (for :meth:`get_config`)
    _config_attrs: dict[str, str] = {}
    #: multi-precision state layout: ``(master, state)``, or ``(state, master)`` when True
    #: (MXNet's SGD and NAG put the master copy last, its other optimizers first)
    _master_last = False
    #: the registry itself, so that ``name in Optimizer.opt_registry`` works as in MXNet
    opt_registry = _REGISTRY

    def __init__(self, rescale_grad: float = 1.0, param_idx2name: dict | None = None,
                 wd: float = 0.0, clip_gradient: float | None = None,
                 learning_rate: float | None = None, lr_scheduler: LRScheduler | None = None,
                 sym: Any = None, begin_num_update: int = 0, multi_precision: bool = False,
                 param_dict: dict | None = None):
        owner = type(self).__name__
        _check_learning_rate(owner, "learning_rate", learning_rate, none_ok=True)
        check_settings(self, wd=(wd, NON_NEGATIVE), rescale_grad=(rescale_grad, {}),
                       clip_gradient=(clip_gradient, FINITE_OR_NONE))
        check_int(owner, "begin_num_update", begin_num_update, 0)
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise TypeError("param_idx2name must be a dict from parameter index to name, "
                            f"got {type(param_idx2name).__name__}")
        if lr_scheduler is not None and not callable(lr_scheduler):
            raise TypeError(f"lr_scheduler must be an LRScheduler, got {lr_scheduler!r}")
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None:
            self.lr = self.default_learning_rate if learning_rate is None else learning_rate
        else:
            if learning_rate is not None and lr_scheduler.base_lr != learning_rate:
                warnings.warn(f"learning_rate={learning_rate} overwrites the lr_scheduler's "
                              f"base_lr={lr_scheduler.base_lr}", UserWarning, stacklevel=2)
                lr_scheduler.base_lr = learning_rate
            self.lr = lr_scheduler.base_lr
        self.wd = wd
        self.clip_gradient = clip_gradient
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts: dict[int, dict] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        self.idx2name = dict(param_idx2name)
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.lr_mult: dict = {}
        self.wd_mult: dict = {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ---- registry ------------------------------------------------------------------------

    @staticmethod
    def register(klass: type) -> type:
        """Register an optimizer class under its lower-cased class name.

        Usable as a decorator. Registering a name again warns and replaces the old class.

        Parameters
        ----------
        klass : type
            A subclass of :class:`Optimizer`.

        Returns
        -------
        type
            ``klass``, unchanged.
        """
        if not (isinstance(klass, type) and issubclass(klass, Optimizer)):
            raise TypeError(f"only Optimizer subclasses can be registered, got {klass!r}")
        return _REGISTRY.register(klass)

    @staticmethod
    def create_optimizer(name: str, **kwargs: Any) -> "Optimizer":
        """Create an optimizer from its registered name.

        Parameters
        ----------
        name : str
            Registered name, case-insensitive (``'sgd'``, ``'Adam'``, ...).
        **kwargs
            Constructor arguments.

        Returns
        -------
        Optimizer
            The new optimizer.

        Raises
        ------
        ValueError
            If no optimizer has that name; the message lists the known names.
        """
        return _REGISTRY.get(name)(**kwargs)

    # ---- learning rate and multipliers ---------------------------------------------------

    @property
    def learning_rate(self) -> float:
        """The current learning rate: the scheduler's value at ``num_update``, else ``lr``."""
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate; only allowed when there is no ``lr_scheduler``.

        Parameters
        ----------
        lr : float
            The new learning rate; a finite number >= 0.

        Raises
        ------
        UserWarning
            If the optimizer has a scheduler, which owns the rate (raised, as MXNet does).
        ValueError
            If ``lr`` is negative, NaN or infinite (TypeError if it is not a number).
        """
        if self.lr_scheduler is not None:
            raise UserWarning("this optimizer has an lr_scheduler, which sets the learning "
                              "rate; change lr_scheduler.base_lr instead of calling "
                              "set_learning_rate")
        _check_learning_rate(f"{type(self).__name__}.set_learning_rate", "lr", lr)
        self.lr = lr

    def set_lr_mult(self, args_lr_mult: dict) -> None:
        """Set per-parameter learning-rate multipliers.

        Multipliers from the symbol's ``__lr_mult__`` attributes come first; entries of
        ``args_lr_mult`` override them.

        Parameters
        ----------
        args_lr_mult : dict of str or int to float
            Parameter name (or update index) -> multiplier.
        """
        self.lr_mult = self._symbol_mults("__lr_mult__")
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """Set per-parameter weight-decay multipliers.

        Parameters named in ``param_idx2name`` that end in neither ``_weight`` nor
        ``_gamma`` (biases, BatchNorm betas) default to 0; then the symbol's ``__wd_mult__``
        attributes apply, then ``args_wd_mult``.

        Parameters
        ----------
        args_wd_mult : dict of str or int to float
            Parameter name (or update index) -> multiplier.
        """
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(self._symbol_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    def _symbol_mults(self, key: str) -> dict:
        """Name -> float(attr[key]) for the symbol's arguments that carry ``key``."""
        if not self.sym_info:
            return {}
        attrs, arg_names = self.sym_info
        return {n: float(attrs[n][key]) for n in arg_names if key in attrs.get(n, {})}

    def _mult(self, table: dict, attr: str, index: Any) -> float:
        """The multiplier for ``index``: param_dict, then index key, then name key, else 1."""
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in table:
            return table[index]
        name = self.idx2name.get(index)
        return table.get(name, 1.0) if name is not None else 1.0

    def _mults(self, table: dict, attr: str, indices: list) -> list[float]:
        """The multiplier of each index (see :meth:`_mult`)."""
        if not table and not self.param_dict:  # nothing to look up: all are 1
            return [1.0] * len(indices)
        return [self._mult(table, attr, i) for i in indices]

    def _get_lrs(self, indices: list) -> list[float]:
        """Learning rates for ``indices``: the current rate times each lr multiplier."""
        lr = self.learning_rate
        return [lr * m for m in self._mults(self.lr_mult, "lr_mult", indices)]

    def _get_lr(self, index: Any) -> float:
        """The learning rate for one index."""
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: list) -> list[float]:
        """Weight decays for ``indices``: ``wd`` times each wd multiplier."""
        wd = self.wd
        return [wd * m for m in self._mults(self.wd_mult, "wd_mult", indices)]

    def _get_wd(self, index: Any) -> float:
        """The weight decay for one index."""
        return self._get_wds([index])[0]

    # ---- update counts -------------------------------------------------------------------

    def _set_current_context(self, device_id: int) -> None:
        """Switch to the update counts of device ``device_id`` (each device counts its own)."""
        self._index_update_count = self._all_index_update_counts.setdefault(device_id, {})

    def _update_count(self, index: Any) -> None:
        """Count one more update of ``index`` (or of each index in a list)."""
        for idx in _as_list(index):
            count = self._index_update_count.get(idx, self.begin_num_update) + 1
            self._index_update_count[idx] = count
            self.num_update = max(count, self.num_update)

    # ---- states and updates --------------------------------------------------------------

    def create_state(self, index: Any, weight: Any) -> Any:
        """Create the auxiliary state (momentum, moments, ...) for one weight.

        Called once per weight. The base class keeps no state.

        Parameters
        ----------
        index : int or str
            The weight's update index.
        weight : ndarray
            The weight (numpy or cupy); states live on its device with its dtype.

        Returns
        -------
        None, ndarray or tuple of ndarray
            The state.
        """
        return None

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """Like :meth:`create_state`, adding a float32 master copy of a float16 weight.

        With ``multi_precision`` and a float16 weight the state is
        ``(master_copy, create_state(index, master_copy))``, or the reverse for the
        optimizers that MXNet lays out so (SGD, NAG: ``_master_last``).

        Parameters
        ----------
        index : int or str
            The weight's update index.
        weight : ndarray
            The weight.

        Returns
        -------
        object
            The state to hand to :meth:`update_multi_precision`.
        """
        if weight.dtype == np.float16:
            if self.multi_precision:
                master = weight.astype(np.float32)
                inner = self.create_state(index, master)
                return (inner, master) if self._master_last else (master, inner)
            warnings.warn("updating float16 weights in float16 can lose accuracy or stall "
                          "training; consider multi_precision=True", stacklevel=2)
        return self.create_state(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Update ``weight`` in place from ``grad``, also updating ``state`` in place.

        Parameters
        ----------
        index : int, str, or list of them
            Update index of the weight; lists (with matching lists of weights, grads and
            states) update each in turn.
        weight : ndarray or list of ndarray
            The parameter, changed in place.
        grad : ndarray, RowSparseArray, or list of them
            Its gradient (a sum over the batch; ``rescale_grad`` normalises it). Not modified.
            A row_sparse gradient updates only its rows where the optimizer does lazy or
            sparse updates (see :meth:`_lazy_rows`), else the dense rule runs on
            ``grad.todense()``. Lists may mix dense and row_sparse gradients.
        state : object or list
            What :meth:`create_state` returned for this weight.
        """
        if isinstance(index, (list, tuple)):
            self._update_many(*self._lists(index, weight, grad, state))
        else:
            self._update_count(index)
            self._run(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Like :meth:`update`, through the float32 master copy for float16 weights.

        A row_sparse gradient of a float16 weight updates the rows of the master copy, and
        only those rows are copied back into the weight when the update is lazy.

        Parameters
        ----------
        index, weight, grad, state
            As in :meth:`update`, with ``state`` from :meth:`create_state_multi_precision`.
        """
        if type(self)._update_one is Optimizer._update_one:
            # a subclass with its own update() (MXNet style) is written for dense gradients
            grad = [densify(g) for g in grad] if isinstance(grad, (list, tuple)) else densify(grad)
        if not self.multi_precision:  # no master copies: lists go to update() whole
            self.update(index, weight, grad, state)
            return
        for idx, w, g, s in self._each(index, weight, grad, state):
            if w.dtype == np.float16:
                inner, master = s if self._master_last else s[::-1]
                self.update(idx, master, g.astype(np.float32), inner)
                if is_row_sparse(g) and self._lazy_rows(idx):  # other rows did not change
                    w[g.indices] = master[g.indices]
                else:
                    w[...] = master
            else:
                self.update(idx, w, g, s)

    @staticmethod
    def _lists(index: Any, weight: Any, grad: Any, state: Any) -> tuple[list, list, list, list]:
        """Equal-length lists of indices/weights/grads/states (a single item: lists of one)."""
        if not isinstance(index, (list, tuple)):
            return [index], [weight], [grad], [state]
        weights, grads, states = list(weight), list(grad), list(state)
        if not len(index) == len(weights) == len(grads) == len(states):
            raise ValueError(f"got {len(index)} indices, {len(weights)} weights, "
                             f"{len(grads)} grads and {len(states)} states")
        return list(index), weights, grads, states

    @staticmethod
    def _each(index: Any, weight: Any, grad: Any, state: Any) -> Iterator[tuple]:
        """Pair up single items, or equal-length lists, of indices/weights/grads/states."""
        return zip(*Optimizer._lists(index, weight, grad, state))

    def _update_many(self, indices: list, weights: list, grads: list, states: list) -> None:
        """Update several weights, counting each just before its update; SGD overrides this
        to count the whole list first, as MXNet's multi_sgd_update does."""
        for idx, w, g, s in zip(indices, weights, grads, states):
            self._update_count(idx)
            self._run(idx, w, g, s)

    def _update_one(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """The update rule for one weight; the count is already incremented.

        ``grad`` is always dense here: :meth:`_run` hands a row_sparse gradient's rows (with
        the matching rows of ``weight`` and ``state``) or its dense form.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement update() "
                                  "(or _update_one())")

    def _lazy_rows(self, index: Any) -> bool:
        """Whether a row_sparse gradient for ``index`` updates only its own rows.

        False here: the dense rule runs on ``grad.todense()``, so weight decay, momentum and
        the like reach every row, as MXNet's update ops without a sparse kernel do. SGD and
        Adam return ``lazy_update``; AdaGrad and Ftrl, whose MXNet sparse kernels always
        touch only the gradient's rows, return True.
        """
        return False

    def _run(self, index: Any, weight: Any, grad: Any, state: Any,
             rule: Rule | None = None) -> None:
        """Apply ``rule(weight, grad, state)`` (default: :meth:`_update_one` for ``index``)
        with a dense gradient: as is, on a row_sparse gradient's rows when
        :meth:`_lazy_rows`, else on its dense form."""
        if rule is None:
            rule = functools.partial(self._update_one, index)
        if not is_row_sparse(grad):
            rule(weight, grad, state)
        elif self._lazy_rows(index):
            update_rows(rule, weight, grad, state)
        else:
            rule(weight, grad.todense(), state)

    # ---- helpers for subclasses ----------------------------------------------------------

    def _clipping(self) -> bool:
        """Whether gradients get clipped (``clip_gradient`` set and positive)."""
        return self.clip_gradient is not None and self.clip_gradient > 0

    def _grad(self, xp: types.ModuleType, grad: Any, weight: Any, wd: float = 0.0) -> Any:
        """A new array ``clip(rescale_grad * grad + wd * weight)`` in the weight's dtype."""
        g = xp.multiply(grad, self.rescale_grad, dtype=weight.dtype)
        if wd:
            g += wd * weight
        if self._clipping():
            xp.clip(g, -self.clip_gradient, self.clip_gradient, out=g)
        return g

    # ---- configuration -------------------------------------------------------------------

    def get_config(self) -> dict:
        """The constructor arguments as JSON-able values, for saving with optimizer states.

        ``sym`` and ``param_dict`` are left out; the multipliers they produced are saved
        apart (see :mod:`raymod.optimizer.updater`).

        Returns
        -------
        dict
            Argument name -> value; an ``lr_scheduler`` appears as ``{"name", "config"}``.
        """
        config = {"rescale_grad": self.rescale_grad, "wd": self.wd,
                  "clip_gradient": self.clip_gradient,
                  "learning_rate": self.lr if self.lr_scheduler is None else None,
                  "begin_num_update": self.begin_num_update,
                  "multi_precision": self.multi_precision}
        skip = {"self", "param_idx2name", "lr_scheduler", "sym", "param_dict"}
        for klass in type(self).__mro__:
            if klass is Optimizer or klass is object:
                break
            for p in inspect.signature(klass.__init__).parameters.values():
                if p.name in skip or p.name in config or p.kind in (p.VAR_KEYWORD,
                                                                    p.VAR_POSITIONAL):
                    continue
                config[p.name] = getattr(self, self._config_attrs.get(p.name, p.name))
        config = {k: _jsonable(k, v) for k, v in config.items()}
        if self.lr_scheduler is not None:
            sched = self.lr_scheduler
            name = type(sched).__name__.lower()
            if name not in _LR_REGISTRY or _LR_REGISTRY.get(name) is not type(sched):
                raise TypeError(f"lr_scheduler {sched!r} is not a registered LRScheduler "
                                "and cannot be saved")
            config["lr_scheduler"] = {"name": name, "config": sched.get_config()}
        return config

    @classmethod
    def from_config(cls, config: dict) -> "Optimizer":
        """Re-create an optimizer from :meth:`get_config`'s output.

        Parameters
        ----------
        config : dict
            As returned by :meth:`get_config` on an instance of this class.

        Returns
        -------
        Optimizer
            A new optimizer with the same settings (and no update history).
        """
        kwargs = dict(config)
        sched = kwargs.pop("lr_scheduler", None)
        if sched is not None:
            kwargs["lr_scheduler"] = _LR_REGISTRY.get(sched["name"])(**sched["config"])
        return cls(**kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(learning_rate={self.learning_rate}, wd={self.wd})"


def registered_name(klass: type) -> str:
    """The name ``klass`` is registered under (its lower-cased class name if it has several)."""
    own = klass.__name__.lower()
    if own in _REGISTRY and _REGISTRY.get(own) is klass:
        return own
    for name in _REGISTRY.names():
        if _REGISTRY.get(name) is klass:
            return name
    raise ValueError(f"optimizer class {klass.__name__} is not registered; "
                     "register it with rm.optimizer.register to save it")


register = Optimizer.register
create = Optimizer.create_optimizer
