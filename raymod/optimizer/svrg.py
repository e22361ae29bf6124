"""``_SVRGOptimizer``: the optimizer :class:`~raymod.module.SVRGModule` installs.

It wraps an ordinary optimizer (the *default* one, SGD unless told otherwise) and adds one
rule: a key that names a full gradient (see :func:`full_grad_key`) is updated by assignment,
``stored[...] = pushed``, so that a kvstore can sum the devices' full gradients with the
same push/pull it uses for weights. Every other key goes to the wrapped optimizer.

Departure from MXNet 1.9.1: MXNet names the full-gradient key of ``w`` ``w + "_full"`` and
assigns to *any* key whose name contains ``"full"``, so a user parameter called, say,
``fullc_weight`` is silently assigned instead of trained. Here full-gradient keys carry the
reserved prefix :data:`FULL_GRAD_PREFIX` and only names starting with it are assigned;
SVRGModule refuses symbols with a parameter named that way, so the two can never collide.
For code that drives the optimizer with MXNet's own keys, ``w_full`` is assigned too when
``w`` is one of the optimizer's parameters.

Neither class is registered: the registry's names are a public list (errors, tests that
run every optimizer), and neither class makes sense on its own.
"""
from __future__ import annotations

from typing import Any

from .optimizer import Optimizer, any_learning_rate_sign, create
from .rows import densify

__all__ = ["FULL_GRAD_PREFIX", "full_grad_key", "is_full_grad_key"]

#: prefix of the kvstore key / optimizer index name that holds a parameter's full gradient
FULL_GRAD_PREFIX = "__svrg_full__:"
# MXNet's name for the full gradient of ``w``; honoured only next to a ``w`` (see _is_full)
_MXNET_FULL_SUFFIX = "_full"


def full_grad_key(name: str) -> str:
    """The key under which parameter ``name``'s full gradient is kept."""
    return FULL_GRAD_PREFIX + name


def is_full_grad_key(name: Any) -> bool:
    """Whether ``name`` is a full-gradient key (a str starting with :data:`FULL_GRAD_PREFIX`)."""
    return isinstance(name, str) and name.startswith(FULL_GRAD_PREFIX)


class _AssignmentOptimizer(Optimizer):
    """Replaces the stored value with the pushed one: ``weight[...] = grad``; no state."""

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Assign ``grad`` to ``weight`` (or each pair of equal-length lists)."""
        for _, w, g, _ in self._each(index, weight, grad, state):
            w[...] = densify(g)  # a row_sparse value assigns zeros to the rows it lacks

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Same as :meth:`update`: an assignment needs no float32 master copy."""
        self.update(index, weight, grad, state)

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """No state."""
        return None


class _SVRGOptimizer(Optimizer):
    """An optimizer that assigns full-gradient keys and hands every other key to a wrapped one.

    The wrapper has no settings of its own: reading or setting any attribute other than
    ``default_opt``/``aux_opt`` (``lr``, ``rescale_grad``, ``num_update``, the update
    counts, ``idx2name``...) reads or sets the wrapped optimizer's, so learning-rate
    changes, update counts and saved/loaded optimizer states all act on the optimizer
    that does the work.

    Parameters
    ----------
    default_optimizer : str or Optimizer, default 'sgd'
        The optimizer that updates the weights: a registered name (created with
        ``**kwargs``) or an instance (then ``kwargs`` must be empty).
    **kwargs
        Constructor arguments of the default optimizer (``learning_rate``,
        ``rescale_grad``, ``param_idx2name``, ``momentum``...). They are checked as that
        optimizer checks them, except that ``learning_rate`` may be negative here, as
        MXNet's own tests of this class pass ``learning_rate=-1.0``.

    Examples
    --------
    >>> svrg = _SVRGOptimizer(default_optimizer='sgd', learning_rate=-1.0)
    >>> svrg.default_opt.lr
    -1.0
    """

    _OWN = ("default_opt", "aux_opt")

    def __init__(self, default_optimizer: Any = "sgd", **kwargs: Any):
        # Optimizer.__init__ is not called on purpose: the settings live in default_opt.
        if isinstance(default_optimizer, Optimizer):
            if kwargs:
                raise TypeError("_SVRGOptimizer: give optimizer settings either to the "
                                f"default_optimizer instance or as keywords, not both "
                                f"(got {sorted(kwargs)})")
            inner = default_optimizer
        elif isinstance(default_optimizer, str):
            # any learning-rate sign here, as MXNet: its own test passes learning_rate=-1.0
            # through to the wrapped optimizer (every other setting is checked as usual)
            with any_learning_rate_sign():
                inner = create(default_optimizer, **kwargs)
        else:
            raise TypeError("default_optimizer must be an Optimizer or a registered name, "
                            f"got {type(default_optimizer).__name__}")
        if isinstance(inner, _SVRGOptimizer):
            raise TypeError("default_optimizer is already an _SVRGOptimizer")
        object.__setattr__(self, "default_opt", inner)
        object.__setattr__(self, "aux_opt", _AssignmentOptimizer())

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("default_opt")  # no recursion while half-built (copy, pickle)
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.default_opt, name, value)

    def _is_full(self, index: Any) -> bool:
        """Whether ``index`` (a kvstore key or an optimizer index) names a full gradient:
        raymod's reserved prefix, or MXNet's own naming, ``w + "_full"`` next to a ``w``
        that the optimizer also updates (so code written against MXNet's SVRG keys works,
        while a lone parameter that merely contains "full" is still trained)."""
        name = index if isinstance(index, str) else self.default_opt.idx2name.get(index)
        if is_full_grad_key(name):
            return True
        return (isinstance(name, str) and name.endswith(_MXNET_FULL_SUFFIX)
                and name[:-len(_MXNET_FULL_SUFFIX)] in self._names())

    def _names(self) -> set:
        return set(self.default_opt.idx2name.values())

    def _route(self, index: Any) -> Optimizer:
        return self.aux_opt if self._is_full(index) else self.default_opt

    def create_state(self, index: Any, weight: Any) -> Any:
        """The state of the optimizer that will update ``index``."""
        return self._route(index).create_state(index, weight)

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """As :meth:`create_state`, with the wrapped optimizer's float16 handling."""
        return self._route(index).create_state_multi_precision(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Assign full-gradient keys; update the others with the default optimizer."""
        for idx, w, g, s in self._each(index, weight, grad, state):
            self._route(idx).update(idx, w, g, s)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """As :meth:`update`, through the wrapped optimizer's float16 master copies."""
        for idx, w, g, s in self._each(index, weight, grad, state):
            self._route(idx).update_multi_precision(idx, w, g, s)

    def __repr__(self) -> str:
        return f"_SVRGOptimizer({self.default_opt!r})"
