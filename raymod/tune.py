"""Ray Tune integration: a ``Module.fit`` per trial, on the trial's own worker actors.

``fit_trainable`` turns a module factory and a data factory into a Tune trainable that
reports every epoch's training and validation metrics to Tune, checkpoints the parameters
through Tune's checkpoint API (and resumes from them when Tune restores a trial), and asks
Tune for a placement group covering the trial's worker actors, so concurrent trials never
need more CPUs than the cluster has. Needs ``ray[tune]`` (``pip install 'raymod[tune]'``).
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable

from .cluster.workers import Workers

__all__ = ["fit_trainable", "trial_resources", "CHECKPOINT_PREFIX"]

#: file prefix of the parameters inside a trial's Tune checkpoint (``model-NNNN.params``)
CHECKPOINT_PREFIX = "model"
_STATE_FILE = "raymod_tune.json"


def _workers_in(config: dict, workers: int | str) -> int:
    n = config.get(workers) if isinstance(workers, str) else workers
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        where = f"config[{workers!r}]" if isinstance(workers, str) else "workers"
        raise ValueError(f"fit_trainable: {where} must be an int >= 0 (0: train in the "
                         f"trial's own process), got {n!r}")
    return n


def trial_resources(num_workers: int, cpus_per_worker: float = 1.0,
                    gpus_per_worker: float = 0.0, driver_cpus: float = 0.0):
    """The placement group one trial needs: its driver, then one bundle per worker actor.

    The KVServer actors ask for no CPU; they and the workers are started from the trial's
    driver, so Tune places them in the trial's group. With ``num_workers=0`` the trial trains
    in its own process and takes ``max(driver_cpus, cpus_per_worker)`` CPUs.
    """
    from ray.tune import PlacementGroupFactory

    if num_workers == 0:
        head = {"CPU": max(driver_cpus, cpus_per_worker)}
        if gpus_per_worker:
            head["GPU"] = gpus_per_worker
        return PlacementGroupFactory([head])
    worker = {"CPU": cpus_per_worker}
    if gpus_per_worker:
        worker["GPU"] = gpus_per_worker
    head = {"CPU": driver_cpus} if driver_cpus else {}
    return PlacementGroupFactory([head] + [dict(worker) for _ in range(num_workers)])


def fit_trainable(module_factory: Callable[[dict, Workers | None], Any],
                  data_factory: Callable[[dict], tuple[Any, Any]], num_epoch: int,
                  fit_kwargs: dict | Callable[[dict], dict] | None = None,
                  workers: int | str = "workers", cpus_per_worker: float = 1.0,
                  gpus_per_worker: float = 0.0, driver_cpus: float = 0.0,
                  eval_metric: Any = "acc"):
    """A Ray Tune trainable running ``Module.fit`` with each trial's config.

    Parameters
    ----------
    module_factory : callable
        ``module_factory(config, workers)`` returns the trial's module (``rm.mod.Module`` or
        another ``BaseModule``), built with ``workers=workers`` (an ``rm.Workers``, or None
        for a trial that trains in its own process).
    data_factory : callable
        ``data_factory(config)`` returns ``(train_iter, eval_iter)``; ``eval_iter`` may be
        None (then only training metrics are reported).
    num_epoch : int
        Epochs per trial; one Tune report (and checkpoint) per epoch.
    fit_kwargs : dict or callable, optional
        More ``fit`` arguments (``optimizer``, ``optimizer_params``, ``initializer``,
        ``kvstore``...), or a function of the config returning them.
    workers : int or str
        Worker actors per trial, or the config key holding that number (default
        ``'workers'``, so it can be searched over). 0 trains in the trial's process.
    cpus_per_worker, gpus_per_worker : float
        Resources of each worker actor (default 1 CPU, no GPU).
    driver_cpus : float
        CPUs reserved for the trial's own process, which mostly waits on its workers
        (default 0).
    eval_metric : str or EvalMetric
        The metric reported for training and validation (default ``'acc'``).

    Returns
    -------
    trainable
        For ``ray.tune.Tuner(trainable, param_space=...)``; its resources are set with
        ``tune.with_resources`` from :func:`trial_resources` per config.

    Notes
    -----
    Every epoch reports ``epoch`` (epochs done), ``train_<metric>``, ``val_<metric>`` and
    ``workers``, with a checkpoint holding ``model-symbol.json`` and
    ``model-NNNN.params`` (MXNet's layout: ``rm.model.load_checkpoint(dir + '/model', N)``).
    A restored trial continues from the checkpoint's parameters and epoch (optimizer states,
    such as momentum, start afresh).

    Examples
    --------
    >>> trainable = rm.tune.fit_trainable(
    ...     lambda cfg, w: rm.mod.Module(net, workers=w), lambda cfg: (train, val),
    ...     num_epoch=3, fit_kwargs=lambda cfg: {"optimizer_params": {"learning_rate": cfg["lr"]}})
    >>> tune.Tuner(trainable, param_space={"lr": tune.loguniform(1e-3, 1), "workers": 2}).fit()
    """
    from ray import tune

    if not isinstance(num_epoch, int) or num_epoch < 1:
        raise ValueError(f"fit_trainable: num_epoch must be an int >= 1, got {num_epoch!r}")
    if not isinstance(workers, (int, str)) or isinstance(workers, bool) or (
            isinstance(workers, int) and workers < 0):
        raise ValueError(f"fit_trainable: workers must be an int >= 0 or a config key, got "
                         f"{workers!r}")
    for name, value in (("cpus_per_worker", cpus_per_worker), ("gpus_per_worker",
                                                               gpus_per_worker),
                        ("driver_cpus", driver_cpus)):
        if not value >= 0:
            raise ValueError(f"fit_trainable: {name} must be >= 0, got {value!r}")

    def run_trial(config: dict) -> None:
        _run_trial(config, module_factory, data_factory, num_epoch, fit_kwargs,
                   _workers_in(config, workers), cpus_per_worker, gpus_per_worker,
                   eval_metric)

    def resources(config: dict):
        return trial_resources(_workers_in(config, workers), cpus_per_worker,
                               gpus_per_worker, driver_cpus)

    run_trial.__name__ = "raymod_fit"
    return tune.with_resources(run_trial, resources)


def _restore() -> tuple[int, dict | None, dict | None]:
    """(first epoch, arg_params, aux_params) from the trial's Tune checkpoint, if any."""
    from ray import tune

    from .checkpoint import load_checkpoint

    ckpt = tune.get_checkpoint()
    if ckpt is None:
        return 0, None, None
    with ckpt.as_directory() as folder:
        with open(os.path.join(folder, _STATE_FILE)) as f:
            epoch = int(json.load(f)["epoch"])
        _, arg, aux = load_checkpoint(os.path.join(folder, CHECKPOINT_PREFIX), epoch)
    return epoch, arg, aux


class _EpochReporter:
    """fit callbacks that gather an epoch's figures and hand them to Tune once per epoch."""

    def __init__(self, num_workers: int, has_eval: bool):
        self.num_workers, self.has_eval = num_workers, has_eval
        self.train_metric = None
        self.pending: dict | None = None
        self.folder: str | None = None

    def batch_end(self, param) -> None:
        self.train_metric = param.eval_metric

    def epoch_end(self, epoch: int, symbol, arg_params: dict, aux_params: dict) -> None:
        from .checkpoint import save_checkpoint

        self.folder = tempfile.mkdtemp(prefix="raymod-tune-")
        prefix = os.path.join(self.folder, CHECKPOINT_PREFIX)
        save_checkpoint(prefix, epoch + 1, symbol, arg_params, aux_params)
        with open(os.path.join(self.folder, _STATE_FILE), "w") as f:
            json.dump({"epoch": epoch + 1}, f)
        self.pending = {"epoch": epoch + 1, "workers": self.num_workers}
        if self.train_metric is not None:
            self.pending.update({f"train_{k}": float(v)
                                 for k, v in self.train_metric.get_name_value()})
        if not self.has_eval:
            self._report()

    def eval_end(self, param) -> None:
        if self.pending is None:
            return
        self.pending.update({f"val_{k}": float(v) for k, v in param.eval_metric.get_name_value()})
        self._report()

    def _report(self) -> None:
        import shutil

        from ray import tune

        try:
            tune.report(self.pending, checkpoint=tune.Checkpoint.from_directory(self.folder))
        finally:   # Tune has copied the folder into the trial's storage
            shutil.rmtree(self.folder, ignore_errors=True)
            self.pending, self.folder = None, None


def _run_trial(config: dict, module_factory, data_factory, num_epoch: int, fit_kwargs,
               num_workers: int, cpus_per_worker: float, gpus_per_worker: float,
               eval_metric: Any) -> None:
    spec = Workers(num_workers, cpus_per_worker=cpus_per_worker,
                   gpus_per_worker=int(gpus_per_worker)) if num_workers else None
    kwargs = dict(fit_kwargs(config) if callable(fit_kwargs) else (fit_kwargs or {}))
    if spec is not None:
        kwargs.setdefault("kvstore", "dist_sync")
    begin, arg, aux = _restore()
    if arg is not None:
        kwargs.update(arg_params=arg, aux_params=aux, begin_epoch=begin)
    train, val = data_factory(config)
    reporter = _EpochReporter(num_workers, val is not None)
    for key, ours in (("batch_end_callback", reporter.batch_end),
                      ("epoch_end_callback", reporter.epoch_end),
                      ("eval_end_callback", reporter.eval_end)):
        theirs = kwargs.pop(key, None)   # the user's callbacks run before the reporter's
        kwargs[key] = (list(theirs) if isinstance(theirs, (list, tuple)) else
                       [theirs] if theirs is not None else []) + [ours]
    mod = module_factory(config, spec)
    try:
        mod.fit(train, eval_data=val, eval_metric=eval_metric, num_epoch=num_epoch, **kwargs)
    finally:
        close = getattr(mod, "close", None)
        if close is not None:
            close()   # the trial's worker actors and KVServers
