"""Modules written in Python: ``PythonModule`` (no parameters, your own forward and
backward) and ``PythonLossModule`` (a loss whose gradient a Python function computes).

They run in the driver's process on whole-batch arrays. Put them after a ``Module`` in a
``SequentialModule``; that Module may run on Ray workers (``workers=``): its outputs come to
the driver for the Python part and the gradient goes back to the workers.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from ..array_view import show
from ..base import MXNetError
from .base_module import BaseModule
from .lifecycle import Stage

__all__ = ["PythonModule", "PythonLossModule"]


def _names(descs: Any) -> list:
    return [d[0] for d in descs]


class PythonModule(BaseModule):
    """A module without parameters whose computation is written in Python.

    Subclasses implement ``_compute_output_shapes`` and ``forward``, ``get_outputs``,
    ``backward`` and ``get_input_grads`` as needed. Parameter, optimizer and update calls
    are accepted and do nothing.

    Parameters
    ----------
    data_names : list of str
        Names of the data inputs.
    label_names : list of str or None
        Names of the label inputs (None: no labels).
    output_names : list of str
        Names of the outputs.
    logger : Logger, default logging
        Where progress lines go.
    workers : None
        Not taken (ValueError): a Python module runs in this process.
    """

    def __init__(self, data_names: Sequence[str], label_names: Sequence[str] | None,
                 output_names: Sequence[str], logger: Any = logging, *, workers: Any = None):
        if workers is not None:
            raise ValueError(f"{type(self).__name__}(workers={workers!r}): Python modules run "
                             "in this process on whole batches; put the Module before it on "
                             "workers (Module(..., workers=...)) inside a SequentialModule")
        super().__init__(logger=logger)
        for arg, value in (("data_names", data_names), ("output_names", output_names)):
            if isinstance(value, str) or not all(isinstance(n, str) for n in value):
                raise TypeError(f"{arg} must be a list of str, got {value!r}")
        self._data_names = list(data_names)
        self._label_names = None if label_names is None else list(label_names)
        self._output_names = list(output_names)
        self._data_shapes: list | None = None
        self._label_shapes: list | None = None
        self._output_shapes: list | None = None

    # ---- descriptions -----------------------------------------------------------------------
    @property
    def data_names(self) -> list:
        """Names of the data inputs."""
        return self._data_names

    @property
    def label_names(self) -> list | None:
        """Names of the label inputs (None: no labels)."""
        return self._label_names

    @property
    def output_names(self) -> list:
        """Names of the outputs."""
        return self._output_names

    @property
    def data_shapes(self) -> list:
        """Data descriptions given to bind."""
        self._require(Stage.BOUND, "data_shapes")
        return self._data_shapes

    @property
    def label_shapes(self) -> list | None:
        """Label descriptions given to bind (None without labels)."""
        self._require(Stage.BOUND, "label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output, from ``_compute_output_shapes``."""
        self._require(Stage.BOUND, "output_shapes")
        return self._output_shapes

    # ---- no parameters ----------------------------------------------------------------------
    def get_params(self) -> tuple[dict, dict]:
        """Two empty dicts: a Python module has no parameters."""
        return {}, {}

    def init_params(self, initializer: Any = None, arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Nothing to initialize; marks the module ready (needs bind)."""
        self._require(Stage.BOUND, "init_params")
        self._stage = self._stage.after_params()

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Nothing to optimize; marks the module ready (needs init_params)."""
        self._require(Stage.PARAMS_READY, "init_optimizer")
        self._stage = self._stage.after_optimizer()

    def update(self) -> None:
        """Nothing to update."""

    def install_monitor(self, mon: Any) -> None:
        """Python modules have no executors to monitor."""
        raise NotImplementedError(f"{type(self).__name__} has no executors: install_monitor "
                                  "is not supported")

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Update ``eval_metric`` with ``labels`` and this module's outputs.

        Parameters
        ----------
        eval_metric : EvalMetric
            The metric.
        labels : list of arrays
            Whole-batch labels (this module runs on whole batches).
        pre_sliced : bool, default False
            Per-device labels are not supported here (raises RuntimeError, as MXNet).
        """
        if self._label_shapes is None:
            return  # bound without labels: nothing to score against
        if pre_sliced:  # RuntimeError, as MXNet raises here
            raise RuntimeError(f"{type(self).__name__}.update_metric(pre_sliced=True): a Python "
                             "module sees whole batches; pass the batch's labels unsliced")
        eval_metric.update(show(labels), self.get_outputs())

    # ---- setup ------------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Record the input shapes and compute the output shapes.

        Parameters
        ----------
        data_shapes : list of DataDesc or (name, shape)
            Must name ``data_names``, in order.
        label_shapes : list of DataDesc or (name, shape), optional
            Must name ``label_names``, in order.
        for_training, inputs_need_grad, force_rebind
            As in :meth:`Module.bind`.
        shared_module : None
            Not used.
        grad_req : str, default 'write'
            Only ``'write'`` is supported.
        """
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if grad_req != "write":
            raise ValueError(f"{type(self).__name__}.bind(grad_req={grad_req!r}): only 'write' "
                             "is supported")
        if inputs_need_grad and not for_training:
            raise ValueError("inputs_need_grad=True needs for_training=True")
        data_shapes = list(data_shapes)
        if _names(data_shapes) != self._data_names:
            raise ValueError(f"{type(self).__name__}.bind: data_shapes name "
                             f"{_names(data_shapes)}, expected data_names {self._data_names}")
        if label_shapes is not None:
            label_shapes = list(label_shapes)
            if self._label_names is None or _names(label_shapes) != self._label_names:
                raise ValueError(f"{type(self).__name__}.bind: label_shapes name "
                                 f"{_names(label_shapes)}, expected label_names "
                                 f"{self._label_names}")
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._data_shapes, self._label_shapes = data_shapes, label_shapes
        self._output_shapes = self._compute_output_shapes()
        self._stage = self._stage.after_bind()

    def _compute_output_shapes(self) -> list:
        """``(name, shape)`` of each output from ``self._data_shapes`` (subclasses)."""
        raise NotImplementedError()


class PythonLossModule(PythonModule):
    """A loss computed in Python: the output is the input scores, the gradient a function's.

    Forward passes the scores through (so metrics see them); backward calls
    ``grad_func(scores, labels)`` on host numpy arrays and hands its result back as the
    gradient of the scores.

    Parameters
    ----------
    name : str, default 'pyloss'
        The output is named ``name + '_output'``.
    data_names : list of str, default ('data',)
        One data input (the scores).
    label_names : list of str, default ('softmax_label',)
        One label input.
    logger : Logger, default logging
        Where progress lines go.
    grad_func : callable, optional
        ``grad_func(scores, labels) -> array`` of the scores' shape: the gradient of the
        loss summed over the batch (the optimizer's ``rescale_grad`` averages it). Without
        it, override ``_backward_impl``.
    workers : None
        Not taken (ValueError): the loss runs in this process.

    Examples
    --------
    >>> def hinge_grad(scores, labels): ...
    >>> seq = (rm.mod.SequentialModule().add(rm.mod.Module(scores_sym, label_names=None))
    ...        .add(rm.mod.PythonLossModule(grad_func=hinge_grad),
    ...             take_labels=True, auto_wiring=True))
    """

    def __init__(self, name: str = "pyloss", data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] = ("softmax_label",), logger: Any = logging,
                 grad_func: Callable | None = None, *, workers: Any = None):
        super().__init__(data_names, label_names, [name + "_output"], logger=logger,
                         workers=workers)
        if len(self._data_names) != 1:
            raise ValueError(f"PythonLossModule takes one data input, got data_names="
                             f"{self._data_names}")
        if self._label_names is None or len(self._label_names) != 1:
            raise ValueError(f"PythonLossModule takes one label input, got label_names="
                             f"{self._label_names}")
        if grad_func is not None and not callable(grad_func):
            raise TypeError(f"grad_func must be callable, got {type(grad_func).__name__}")
        self._name = name
        self._grad_func = grad_func
        self._scores = None
        self._labels = None
        self._scores_grad = None

    def _compute_output_shapes(self) -> list:
        return [(self._name + "_output", tuple(self._data_shapes[0][1]))]

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Keep the scores (and, when training, the labels) of the batch.

        Parameters
        ----------
        data_batch : DataBatch
            ``data[0]`` are the scores, ``label[0]`` the labels.
        is_train : bool, optional
            Default: as bound.
        """
        self._require(Stage.BOUND, "forward")
        if isinstance(data_batch, list):
            raise ValueError("PythonLossModule.forward takes one DataBatch, not a list of "
                             "pre-sliced batches")
        self._scores = data_batch.data[0]
        if is_train is None:
            is_train = self.for_training
        if is_train:
            labels = getattr(data_batch, "label", None)
            if not labels:
                raise ValueError("PythonLossModule.forward(is_train=True) needs the batch's "
                                 "labels; add the module with take_labels=True")
            self._labels = labels[0]

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """``[scores]``, the input of the last forward pass."""
        if not merge_multi_context:
            raise ValueError("PythonLossModule runs on whole batches: "
                             "merge_multi_context=False is not supported")
        return show([self._scores])

    def backward(self, out_grads: Any = None) -> None:
        """Compute the gradient of the scores with ``grad_func``.

        Parameters
        ----------
        out_grads : None
            A loss takes no output gradient; anything else is an error.
        """
        if out_grads is not None:
            raise ValueError("PythonLossModule.backward: a loss takes no out_grads, got "
                             f"{type(out_grads).__name__}")
        if not self.for_training:
            raise MXNetError("PythonLossModule.backward needs bind(for_training=True)")
        if self._scores is None or self._labels is None:
            raise MXNetError("PythonLossModule.backward needs a forward(is_train=True) first")
        self._backward_impl()

    def _backward_impl(self) -> None:
        """Set ``self._scores_grad``; by default from ``grad_func`` (override otherwise)."""
        if self._grad_func is None:
            raise NotImplementedError("PythonLossModule needs grad_func=... or a subclass "
                                      "overriding _backward_impl")
        grad = self._grad_func(_host(self._scores), _host(self._labels))
        grad = np.asarray(_host(grad))
        if grad.shape != tuple(self._scores.shape):
            raise ValueError(f"grad_func returned shape {grad.shape}, expected the scores' "
                             f"shape {tuple(self._scores.shape)}")
        self._scores_grad = grad.astype(self._scores.dtype, copy=False)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """``[gradient of the scores]`` from the last backward pass."""
        if not merge_multi_context:
            raise ValueError("PythonLossModule runs on whole batches: "
                             "merge_multi_context=False is not supported")
        return show([self._scores_grad])


def _host(array: Any) -> Any:
    """A host numpy array (CuPy arrays are copied; numpy arrays pass through)."""
    if isinstance(array, np.ndarray) or not hasattr(array, "get"):
        return array
    return array.get()
