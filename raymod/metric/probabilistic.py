"""Metrics on predicted probabilities and losses: Perplexity, CrossEntropy,
NegativeLogLikelihood and Loss. All are pooled (sums and counts), so any split merges exactly."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..context import as_numpy
from .base import EvalMetric, _REGISTRY, _is_array, pairs


def _picked_probs(label: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(labels flattened, pred[i, label[i]]) in float64, for (N, C) predictions."""
    label = label.ravel()
    if label.shape[0] != pred.shape[0]:
        raise ValueError(f"{label.shape[0]} labels for {pred.shape[0]} prediction rows")
    return label, pred[np.arange(label.shape[0]), label.astype(np.int64)].astype(np.float64)


@_REGISTRY.register
class Perplexity(EvalMetric):
    """Perplexity: ``exp`` of the mean negative log-probability of the labels.

    Parameters
    ----------
    ignore_label : int or None
        Label value whose positions are skipped (e.g. padding); None keeps all.
    axis : int, default -1
        Class axis of the predictions; the other axes line up with the flattened labels.
    name : str, default 'perplexity'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.

    Notes
    -----
    Probabilities are clipped below at 1e-10 before the log. As MXNet's ``pick`` (mode
    'clip'), labels are truncated to integers and clipped to ``[0, classes - 1]``: a label
    equal to the vocabulary size scores the last class. ``sum_metric`` is the summed
    negative log-probability and ``num_inst`` the number of kept labels.
    """

    def __init__(self, ignore_label: int | None, axis: int = -1, name: str = "perplexity",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, ignore_label=ignore_label, axis=axis, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def _record(self, labels: Any, preds: Any) -> dict:
        loss, count = 0.0, 0
        for label, pred in pairs(labels, preds):
            classes = pred.shape[self.axis]
            if label.size * classes != pred.size:
                raise ValueError(f"shape mismatch: {label.shape} vs. {pred.shape}")
            probs = np.moveaxis(pred, self.axis, -1).reshape(-1, classes)
            label = label.ravel()
            if self.ignore_label is not None:
                keep = label != self.ignore_label
                label, probs = label[keep], probs[keep]
            # MXNet picks with mode='clip': out-of-range labels take the nearest class
            index = np.clip(label.astype(np.int64), 0, classes - 1)
            picked = probs[np.arange(label.size), index].astype(np.float64)
            loss -= float(np.log(np.maximum(1e-10, picked)).sum())
            count += int(label.size)
        return {"sum_metric": loss, "num_inst": count}

    def _value(self, totals: dict) -> float:
        count = totals["num_inst"]
        return float("nan") if count == 0 else math.exp(totals["sum_metric"] / count)


@_REGISTRY.register
@_REGISTRY.alias("ce", "cross-entropy")
class CrossEntropy(EvalMetric):
    """Mean cross-entropy ``-log(p[label] + eps)`` of (N, C) probability predictions.

    Parameters
    ----------
    eps : float, default 1e-12
        Added to the picked probability before the log.
    name : str, default 'cross-entropy'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def _record(self, labels: Any, preds: Any) -> dict:
        total, count = 0.0, 0
        for label, pred in pairs(labels, preds):
            label, prob = _picked_probs(label, pred)
            total += float(-np.log(prob + self.eps).sum())
            count += int(label.shape[0])
        return {"sum_metric": total, "num_inst": count}


@_REGISTRY.register
@_REGISTRY.alias("nll_loss")
class NegativeLogLikelihood(CrossEntropy):
    """Mean negative log-likelihood ``-log(p[label] + eps)`` of (N, C) predictions.

    Same computation as :class:`CrossEntropy`, under MXNet's other name.

    Parameters
    ----------
    eps : float, default 1e-12
        Added to the picked probability before the log.
    name : str, default 'nll-loss'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, eps: float = 1e-12, name: str = "nll-loss",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(eps=eps, name=name, output_names=output_names, label_names=label_names)


@_REGISTRY.register
class Loss(EvalMetric):
    """Mean of the network's loss outputs (labels are ignored).

    ``update(None, pred)`` and ``update(None, [pred])`` are the same; ``num_inst`` counts the
    loss elements.

    Parameters
    ----------
    name : str, default 'loss'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, name: str = "loss", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def _record(self, _labels: Any, preds: Any) -> dict:
        preds = [preds] if _is_array(preds) else preds
        total, count = 0.0, 0
        for pred in preds:
            pred = as_numpy(pred)
            total += float(np.sum(pred, dtype=np.float64))
            count += int(pred.size)
        return {"sum_metric": total, "num_inst": count}
