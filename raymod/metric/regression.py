"""Regression metrics: MAE, MSE, RMSE and PearsonCorrelation."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .base import (EvalMetric, _REGISTRY, check_label_shapes, correlation, merge_moments, moments,
                   pairs)


class _ArrayError(EvalMetric):
    """Mean of an elementwise error per (label, pred) array, averaged over arrays.

    As in MXNet, each array of each ``update()`` call adds its own mean error to
    ``sum_metric`` and 1 to ``num_inst`` (the average is over arrays, not samples). The
    update's record keeps, per array, the error sum and the element count, so
    :meth:`merge_parts` of a batch split k ways computes the whole batch's mean exactly once.
    1-D labels and predictions are treated as columns (N, 1).
    """

    def __init__(self, name: str, output_names: Sequence[str] | None,
                 label_names: Sequence[str] | None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    @staticmethod
    def _error(diff: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def _finish(mean: float) -> float:
        return mean

    def _record(self, labels: Any, preds: Any) -> dict:
        sums, counts = [], []
        for label, pred in pairs(labels, preds):
            label = label.reshape(-1, 1) if label.ndim == 1 else label
            pred = pred.reshape(-1, 1) if pred.ndim == 1 else pred
            diff = label.astype(np.float64) - pred.astype(np.float64)
            sums.append(float(self._error(diff).sum()))
            counts.append(int(diff.size))
        return {"sums": sums, "counts": counts}

    def _fold(self, totals: dict, record: dict) -> None:
        for total, count in zip(record["sums"], record["counts"]):
            totals["sum_metric"] += self._finish(total / count) if count else float("nan")
            totals["num_inst"] += 1


@_REGISTRY.register
class MAE(_ArrayError):
    """Mean absolute error, averaged per array and update as in MXNet (see ``_ArrayError``).

    Parameters
    ----------
    name : str, default 'mae'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    _error = staticmethod(np.abs)

    def __init__(self, name: str = "mae", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, output_names, label_names)


@_REGISTRY.register
class MSE(_ArrayError):
    """Mean squared error, averaged per array and update as in MXNet (see ``_ArrayError``).

    Parameters
    ----------
    name : str, default 'mse'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    _error = staticmethod(np.square)

    def __init__(self, name: str = "mse", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, output_names, label_names)


@_REGISTRY.register
class RMSE(_ArrayError):
    """Root mean squared error: each array's RMSE, averaged over arrays and updates (MXNet).

    Parameters
    ----------
    name : str, default 'rmse'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    _error = staticmethod(np.square)
    _finish = staticmethod(math.sqrt)

    def __init__(self, name: str = "rmse", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, output_names, label_names)


@_REGISTRY.register
@_REGISTRY.alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation coefficient between labels and predictions.

    Each (label, pred) array pair of an update is summarised by its centred moments
    (count, means, sums of squared deviations and the cross co-moment; see
    :func:`~raymod.metric.base.moments`): sufficient statistics that merge exactly (Chan's
    formula) instead of concatenated data.

    Parameters
    ----------
    name : str, default 'pearsonr'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    average : {'macro', 'micro'}, default 'macro'
        ``'macro'``: the mean of each array pair's r over all updates (``num_inst`` counts
        pairs). ``'micro'``: r of all data seen, as if concatenated; the totals keep the
        pooled moments, so the states of any split merge to the same value. Unlike MXNet
        1.x, micro mode keeps separate local and global moments, so ``reset_local`` and
        ``get_global`` behave as for other metrics.
    """

    def __init__(self, name: str = "pearsonr", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, average: str = "macro"):
        if average not in ("macro", "micro"):
            raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        super().__init__(name, average=average, output_names=output_names,
                         label_names=label_names, has_global_stats=True)

    def _zero(self) -> dict:
        if self.average == "micro":
            return {"moments": moments(np.zeros(0), np.zeros(0)), "num_inst": 0}
        return super()._zero()

    def _record(self, labels: Any, preds: Any) -> dict:
        stats = []
        for label, pred in pairs(labels, preds):
            check_label_shapes(label, pred, shape=True)
            stats.append(moments(label, pred))
        return {"pairs": stats}

    def _fold(self, totals: dict, record: dict) -> None:
        for m in record["pairs"]:
            if self.average == "micro":
                totals["moments"] = merge_moments(totals["moments"], m)
            else:
                totals["sum_metric"] += correlation(m)
            totals["num_inst"] += 1

    def _summary(self, totals: dict) -> tuple[float, float]:
        if self.average == "macro":
            return super()._summary(totals)
        return correlation(totals["moments"]) * totals["num_inst"], totals["num_inst"]

    def _value(self, totals: dict) -> float:
        if self.average == "macro" or totals["num_inst"] == 0:
            return super()._value(totals)
        return correlation(totals["moments"])
