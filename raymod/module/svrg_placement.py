"""Where :class:`~raymod.module.SVRGModule` keeps its snapshot ``w~`` and full gradient ``mu``.

Two strategies, one per :mod:`~raymod.module.placement`, chosen once with the module:

==========================  ==================================  ============================
method                      :class:`SnapshotModule`             :class:`SnapshotOnWorkers`
                            (in process)                        (``workers=``)
==========================  ==================================  ============================
``bind``                    binds ``_mod_aux`` (holds ``w~``)   nothing: workers keep ``w~``
``init_full_grads``         a kvstore key per parameter         correction keys on servers
``zero_full_grads``         zeros per device                    one host dict of zeros
``update_full_grads``       ``_mod_aux``'s pass, mu per device  workers' pass, mu to servers
``check_training_forward``  ``w~`` must be set                  NotImplementedError (fit)
``correct_gradients``       ``g - g(w~) + mu`` in place         NotImplementedError (fit)
``state_arrays``            ``w~`` (+aux) and mu per device     ``w~`` and mu
``set_state_arrays``        into ``_mod_aux`` and devices       onto workers and servers
==========================  ==================================  ============================

Both keep the module's MXNet-visible attributes (``_param_dict``, ``_full_grads_ready``,
``_mod_aux``) on the module; a strategy holds nothing itself.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..context import array_module, as_numpy, context_of
from ..optimizer.svrg import full_grad_key
from .lifecycle import StageError
from .placement import OnWorkers, Placement

__all__ = ["SVRGStrategy", "SnapshotModule", "SnapshotOnWorkers", "svrg_strategy_for"]

_WORKERS_TRAIN_IN_FIT = ("SVRGModule on workers trains through fit(), which runs each step "
                         "as one call per worker")


class SVRGStrategy:
    """Where SVRG's ``w~`` and ``mu`` live; every method takes the SVRGModule (``mod``)."""

    def bind(self, mod: Any, data_shapes: Any, label_shapes: Any, force_rebind: bool,
             shared_aux: Any, grad_req: Any) -> None:
        """After the module bound for training: bind what holds ``w~`` (sharing
        ``shared_aux``, the shared SVRGModule's snapshot module, when given)."""
        raise NotImplementedError

    def init_full_grads(self, mod: Any) -> None:
        """After the module's ``init_optimizer``: make room for ``mu`` in the kvstore."""
        raise NotImplementedError

    def zero_full_grads(self, mod: Any) -> list[dict]:
        """``mu`` before the first full-gradient pass: ``_param_dict``'s zeros."""
        raise NotImplementedError

    def update_full_grads(self, mod: Any, train_data: Any) -> None:
        """Take ``w~ = w`` and compute ``mu`` over ``train_data`` (not yet reset)."""
        raise NotImplementedError

    def check_training_forward(self, mod: Any) -> None:
        """Raise unless a training ``forward`` called by hand can run."""
        raise NotImplementedError

    def correct_gradients(self, mod: Any) -> None:
        """Turn the last backward's gradients into ``g_b(w) - g_b(w~) + mu`` (``update``)."""
        raise NotImplementedError

    def state_arrays(self, mod: Any) -> dict:
        """``w~`` and ``mu`` for a fit checkpoint (name -> host array)."""
        raise NotImplementedError

    def set_state_arrays(self, mod: Any, snapshot: dict, snapshot_aux: dict,
                         mu: dict) -> None:
        """Take back what :meth:`state_arrays` gave (keys without their prefixes)."""
        raise NotImplementedError


class SnapshotModule(SVRGStrategy):
    """In process: ``w~`` in the auxiliary module ``_mod_aux``, ``mu`` per device."""

    def bind(self, mod: Any, data_shapes: Any, label_shapes: Any, force_rebind: bool,
             shared_aux: Any, grad_req: Any) -> None:
        mod._mod_aux.bind(data_shapes, label_shapes, True, False, force_rebind, shared_aux,
                          grad_req)

    def init_full_grads(self, mod: Any) -> None:
        if mod._kvstore is None:
            return
        for name, grads in zip(mod._exec_group.param_names, mod._exec_group.grad_arrays):
            if grads[0] is not None:
                mod._kvstore.init(full_grad_key(name), np.zeros_like(mod._arg_params[name]))

    def zero_full_grads(self, mod: Any) -> list[dict]:
        group = mod._exec_group
        return [{name: array_module(context_of(arrays[k])).zeros_like(arrays[k])
                 for name, arrays in zip(group.param_names, group.param_arrays)}
                for k in range(mod._ctx_len)]

    def update_full_grads(self, mod: Any, train_data: Any) -> None:
        if not mod._mod_aux.binded:
            raise StageError("call bind(..., for_training=True) before update_full_grads")
        arg_params, aux_params = mod.get_params()
        mod._mod_aux.set_params(arg_params, aux_params)
        mod._aux_step = None  # the pass overwrites the snapshot's gradients of the last batch
        train_data.reset()
        mod._set_full_grads(mod._full_grad_partial(train_data))

    def check_training_forward(self, mod: Any) -> None:
        mod._require_snapshot()

    def correct_gradients(self, mod: Any) -> None:
        mod._aux_step = None
        aux_grads = mod._mod_aux._exec_group.grad_arrays
        for name, grads, snap in zip(mod._exec_group.param_names,
                                     mod._exec_group.grad_arrays, aux_grads):
            if grads[0] is None:
                continue
            for k, (g, s) in enumerate(zip(grads, snap)):
                g -= s  # in place: the kvstore and updater read these very arrays
                g += mod._param_dict[k][name]

    def state_arrays(self, mod: Any) -> dict:
        args, aux = mod._mod_aux.get_params()
        arrays = {f"snapshot:{n}": v for n, v in args.items()}
        arrays.update({f"snapshot_aux:{n}": v for n, v in aux.items()})
        for k, means in enumerate(mod._param_dict):
            arrays.update({f"full_grad:{k}:{n}": as_numpy(v) for n, v in means.items()})
        return arrays

    def set_state_arrays(self, mod: Any, snapshot: dict, snapshot_aux: dict,
                         mu: dict) -> None:
        mod._mod_aux.set_params(snapshot, snapshot_aux)
        devices = {int(key.split(":", 1)[0]) for key in mu}
        if devices != set(range(mod._ctx_len)):
            raise ValueError(f"the checkpoint's full gradient is for {len(devices)} "
                             f"device(s), this module has {mod._ctx_len}")
        grads = dict(zip(mod._exec_group.param_names, mod._exec_group.grad_arrays))
        mod._param_dict = [{} for _ in range(mod._ctx_len)]
        for key, value in mu.items():
            k, name = key.split(":", 1)
            xp = array_module(context_of(grads[name][int(k)]))
            mod._param_dict[int(k)][name] = xp.asarray(value)


class SnapshotOnWorkers(SVRGStrategy):
    """On workers: every worker keeps ``w~``; ``mu`` lives on the KVServers, which add it
    to each step's summed ``g(w) - g(w~)``."""

    def bind(self, mod: Any, data_shapes: Any, label_shapes: Any, force_rebind: bool,
             shared_aux: Any, grad_req: Any) -> None:
        pass  # the workers take w~ at the full-gradient pass

    def init_full_grads(self, mod: Any) -> None:
        pass  # mu's keys were set up with the kvstore (SVRGModule._kvstore_corrections)

    def zero_full_grads(self, mod: Any) -> list[dict]:
        return [{n: np.zeros_like(a) for n, a in mod._arg_params.items()}]

    def update_full_grads(self, mod: Any, train_data: Any) -> None:
        train_data.reset()
        sums, count = mod._exec_group.full_gradient(train_data)
        means = {name: (total / count).astype(mod._arg_params[name].dtype)
                 for name, total in sums.items()}
        # the servers' optimizer assigns full-gradient keys: mu replaces the old one
        mod._exec_group.set_full_gradient([full_grad_key(n) for n in means],
                                          list(means.values()))
        mod._param_dict = [means]
        mod._full_grads_ready = True

    def check_training_forward(self, mod: Any) -> None:
        raise NotImplementedError(f"{_WORKERS_TRAIN_IN_FIT}; forward(is_train=False) works "
                                  "for inference")

    def correct_gradients(self, mod: Any) -> None:
        raise NotImplementedError(_WORKERS_TRAIN_IN_FIT)

    def state_arrays(self, mod: Any) -> dict:
        arrays = {f"snapshot:{n}": v for n, v in mod._exec_group.snapshot_values().items()}
        arrays.update({f"full_grad:{n}": v for n, v in mod._param_dict[0].items()})
        return arrays

    def set_state_arrays(self, mod: Any, snapshot: dict, snapshot_aux: dict,
                         mu: dict) -> None:
        mod._exec_group.set_snapshot(snapshot)
        mod._exec_group.set_full_gradient([full_grad_key(n) for n in mu], list(mu.values()))
        mod._param_dict = [mu]


def svrg_strategy_for(placement: Placement) -> SVRGStrategy:
    """The SVRG strategy for a module's placement."""
    return SnapshotOnWorkers() if isinstance(placement, OnWorkers) else SnapshotModule()
