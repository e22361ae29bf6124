"""The executor-group interface a :class:`~raymod.module.Module` relies on.

Two classes implement it: :class:`~raymod.parallel.DataParallelExecutorGroup` (executors in
this process, one per device) and ``raymod.cluster.remote_group.RayExecutorGroup`` (executors
on Ray worker actors, values on KVServers). What only one of them can do (the in-process
group's ``execs`` and per-device arrays; the Ray group's fused ``train_step``,
``setup_kvstore`` and SVRG passes) is reached through the module's placement
(:mod:`raymod.module.placement`), never by asking which group it is.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["ExecutorGroup"]


@runtime_checkable
class ExecutorGroup(Protocol):
    """A network bound for one set of input shapes, spread over devices or workers.

    Attributes
    ----------
    batch_size : int
        The whole batch's size, as bound.
    param_names : list of str
        Trainable arguments, in the order of ``param_arrays``.
    param_arrays, aux_arrays : list of list of arrays
        Per name, per device: the values (on the Ray group, host placeholders with the
        right shapes and dtypes).
    num_device : int
        Devices per copy of the network (the index stride of local optimizer states).
    """

    batch_size: int
    param_names: list
    param_arrays: list
    aux_arrays: list
    num_device: int

    def reshape(self, data_shapes: Any, label_shapes: Any) -> None:
        """Bind for new whole-batch shapes, keeping the parameters."""

    def get_output_shapes(self) -> list:
        """``(name, whole-batch shape)`` of each output."""

    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Copy values to every device (or worker)."""

    def get_params(self, arg_params: dict, aux_params: dict) -> None:
        """Fill the host dicts with the current values (auxiliary states averaged)."""

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward pass on one whole batch."""

    def backward(self, out_grads: Any = None) -> None:
        """Backward pass of the last forward."""

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last forward."""

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Data-input gradients of the last backward."""

    def get_states(self, merge_multi_context: bool = True) -> list:
        """State inputs of the last forward."""

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs (arrays or one value)."""

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Accumulate ``eval_metric`` over the last forward's outputs."""

    def install_monitor(self, monitor: Any) -> None:
        """Install a monitor on every executor."""
