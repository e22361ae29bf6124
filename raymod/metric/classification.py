"""Classification metrics: Accuracy, TopKAccuracy, F1, MCC and the multi-class PCC."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from .base import EvalMetric, _REGISTRY, check_label_shapes, pairs


@_REGISTRY.register
@_REGISTRY.alias("acc")
class Accuracy(EvalMetric):
    """Fraction of predictions equal to the label.

    Predictions whose shape differs from the label's are class scores and are reduced with
    ``argmax`` over ``axis``; labels and predicted classes are then flattened. Pooled: the
    state holds counts, so any split of the data merges exactly.

    Parameters
    ----------
    axis : int, default 1
        Class axis of the prediction scores.
    name : str, default 'accuracy'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, axis: int = 1, name: str = "accuracy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def _record(self, labels: Any, preds: Any) -> dict:
        correct = count = 0
        for label, pred in pairs(labels, preds):
            if pred.shape != label.shape and pred.ndim > 1:
                pred = pred.argmax(axis=self.axis)
            label = label.astype(np.int32).ravel()
            pred = pred.astype(np.int32).ravel()
            check_label_shapes(label, pred)
            correct += int((pred == label).sum())
            count += label.size
        return {"sum_metric": correct, "num_inst": count}


@_REGISTRY.register
@_REGISTRY.alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest-scored classes.

    Pooled (counts), like :class:`Accuracy`.

    Parameters
    ----------
    top_k : int, default 1
        How many top classes count as a hit; must be more than 1 (use Accuracy otherwise).
    name : str, default 'top_k_accuracy'
        Base name; ``'_<top_k>'`` is appended, as in MXNet (not again when the name already
        ends with it, so a ``get_config`` round trip keeps the name).
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        if top_k <= 1:
            raise ValueError("TopKAccuracy needs top_k > 1; use Accuracy for top_k = 1")
        suffix = f"_{top_k}"
        name = name if name.endswith(suffix) else name + suffix
        super().__init__(name, top_k=top_k, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.top_k = top_k

    def _record(self, labels: Any, preds: Any) -> dict:
        correct = count = 0
        for label, pred in pairs(labels, preds):
            if pred.ndim > 2:
                raise ValueError("TopKAccuracy takes predictions of at most 2 dims, "
                                 f"got {pred.shape}")
            label = label.astype(np.int32).ravel()
            check_label_shapes(label, pred)
            if pred.ndim == 1:
                hits = pred.astype(np.int32) == label
            else:
                k = min(self.top_k, pred.shape[1])
                top = np.argpartition(pred.astype(np.float32), -k, axis=1)[:, -k:]
                hits = (top == label[:, None]).any(axis=1)
            correct += int(hits.sum())
            count += label.size
        return {"sum_metric": correct, "num_inst": count}


def _binary_counts(labels: Any, preds: Any, who: str) -> dict:
    """tp/fp/fn/tn over every (label, pred) pair, class 1 being the positive class."""
    tp = fp = fn = tn = 0
    for label, pred in pairs(labels, preds):
        label = label.astype(np.int32).ravel()
        pred_label = pred.argmax(axis=1) if pred.ndim > 1 else pred.astype(np.int32)
        check_label_shapes(label, pred_label)
        if len(np.unique(label)) > 2:
            raise ValueError(f"{who} currently only supports binary classification.")
        pos_pred, pos_label = pred_label == 1, label == 1
        tp += int((pos_pred & pos_label).sum())
        fp += int((pos_pred & ~pos_label).sum())
        fn += int((~pos_pred & pos_label).sum())
        tn += int((~pos_pred & ~pos_label).sum())
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn}


def f1_score(c: dict) -> float:
    """F1 of binary counts; 0 when precision and recall are both 0 (MXNet's convention)."""
    precision = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] > 0 else 0.0
    recall = c["tp"] / (c["tp"] + c["fn"]) if c["tp"] + c["fn"] > 0 else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def mcc_score(c: dict) -> float:
    """Matthews correlation of binary counts; zero factors of the denominator are skipped
    and no data gives 0 (MXNet's conventions)."""
    tp, fp, fn, tn = (float(c[k]) for k in ("tp", "fp", "fn", "tn"))
    if tp + fp + fn + tn == 0:
        return 0.0
    denom = math.prod(t for t in (tp + fp, tp + fn, tn + fp, tn + fn) if t != 0)
    return (tp * tn - fp * fn) / math.sqrt(denom)


class _BinaryMetric(EvalMetric):
    """F1 / MCC: binary counts per update, folded ``micro`` (pooled) or ``macro`` (per update).

    ``micro`` keeps tp/fp/fn/tn; the value is the score of the pooled counts and ``num_inst``
    counts samples. ``macro`` adds each update's score and counts updates, so the value is the
    mean over ``update()`` calls (MXNet's meaning of "macro"). States of either kind merge
    by adding; :meth:`merge_parts` pools the parts' counts into one update.
    """

    _score = staticmethod(f1_score)

    def __init__(self, name: str, output_names, label_names, average: str):
        if average not in ("macro", "micro"):
            raise ValueError(f"average must be 'macro' or 'micro', got {average!r}")
        self.average = average
        super().__init__(name, average=average, output_names=output_names,
                         label_names=label_names, has_global_stats=True)

    def _zero(self) -> dict:
        if self.average == "micro":
            return {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
        return super()._zero()

    def _record(self, labels: Any, preds: Any) -> dict:
        return _binary_counts(labels, preds, type(self).__name__)

    def _fold(self, totals: dict, record: dict) -> None:
        if self.average == "micro":
            super()._fold(totals, record)
        else:
            totals["sum_metric"] += self._score(record)
            totals["num_inst"] += 1

    def _summary(self, totals: dict) -> tuple[float, float]:
        if self.average == "macro":
            return super()._summary(totals)
        count = totals["tp"] + totals["fp"] + totals["fn"] + totals["tn"]
        return self._score(totals) * count, count

    def _value(self, totals: dict) -> float:
        if self.average == "macro":
            return super()._value(totals)
        return float("nan") if self._summary(totals)[1] == 0 else self._score(totals)


@_REGISTRY.register
class F1(_BinaryMetric):
    """F1 score of binary classification (class 1 is positive).

    Predictions are class scores of shape (batch, 2), reduced by argmax over axis 1.
    NaN before any update.

    Parameters
    ----------
    name : str, default 'f1'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    average : {'macro', 'micro'}, default 'macro'
        ``'macro'``: mean of each ``update()`` call's F1 (``num_inst`` counts updates);
        ``'micro'``: F1 of the counts pooled over all updates (``num_inst`` counts samples).
    """

    def __init__(self, name: str = "f1", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, average: str = "macro"):
        super().__init__(name, output_names, label_names, average)


@_REGISTRY.register
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of binary classification (class 1 is positive).

    Same input and ``average`` rules as :class:`F1`; NaN before any update, 0 on a batch
    with no positives predicted or present.

    Parameters
    ----------
    name : str, default 'mcc'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    average : {'macro', 'micro'}, default 'macro'
        See :class:`F1`.
    """

    _score = staticmethod(mcc_score)

    def __init__(self, name: str = "mcc", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, average: str = "macro"):
        super().__init__(name, output_names, label_names, average)


def multiclass_mcc(cm: np.ndarray) -> float:
    """K-class Matthews correlation (Gorodkin's R_K) of a confusion matrix; NaN when all
    predictions or all labels fall in one class."""
    cm = np.asarray(cm, dtype=np.float64)
    n = cm.sum()
    pred_counts, label_counts = cm.sum(axis=1), cm.sum(axis=0)
    cov_pp = float(np.sum(pred_counts * (n - pred_counts)))
    cov_ll = float(np.sum(label_counts * (n - label_counts)))
    if cov_pp == 0 or cov_ll == 0:
        return float("nan")
    cov_pl = float(np.sum(np.diag(cm) * n - pred_counts * label_counts))
    return cov_pl / math.sqrt(cov_pp * cov_ll)


@_REGISTRY.register
class PCC(EvalMetric):
    """Multi-class Matthews correlation, computed from a confusion matrix.

    The state is the confusion matrix ``cm[pred, label]`` (grown as larger class indices
    appear), so the value does not depend on batching or update order and states of any
    split merge exactly. For two classes it equals :class:`MCC` (micro). ``num_inst`` counts
    updates and ``sum_metric`` is value times ``num_inst``, as in MXNet.

    Parameters
    ----------
    name : str, default 'pcc'
        Name shown next to the value.
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    has_global_stats : bool, default True
        Whether :meth:`get_global` reads separate global statistics.
    """

    def __init__(self, name: str = "pcc", output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, has_global_stats: bool = True):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    @property
    def k(self) -> int:
        """Number of classes the confusion matrix covers so far."""
        return max(self._local["cm"].shape[0], self._global["cm"].shape[0])

    def _zero(self) -> dict:
        return {"cm": np.zeros((2, 2))}

    def _record(self, labels: Any, preds: Any) -> dict:
        cm = np.zeros((2, 2))
        for label, pred in pairs(labels, preds):
            label = label.astype(np.int64).ravel()
            pred = (pred.argmax(axis=1) if pred.shape != label.shape and pred.ndim > 1
                    else pred.astype(np.int64)).ravel()
            check_label_shapes(label, pred)
            k = max(cm.shape[0], int(max(pred.max(initial=0), label.max(initial=0))) + 1)
            batch = np.bincount(pred * k + label, minlength=k * k).reshape(k, k)
            cm = np.pad(cm, [(0, k - cm.shape[0])] * 2) + batch
        return {"cm": cm}

    def _summary(self, totals: dict) -> tuple[float, float]:
        count = totals["updates"]
        return multiclass_mcc(totals["cm"]) * count, count

    def _value(self, totals: dict) -> float:
        return float("nan") if totals["updates"] == 0 else multiclass_mcc(totals["cm"])

    sum_metric = property(lambda self: self._summary(self._local)[0],
                          doc="MCC of the local confusion matrix times ``num_inst``.")
    num_inst = property(lambda self: self._local["updates"], doc="Local update count.")
    global_sum_metric = property(lambda self: self._summary(self._global)[0],
                                 doc="MCC of the global confusion matrix times updates.")
    global_num_inst = property(lambda self: self._global["updates"], doc="Global update count.")

    @property
    def lcm(self) -> np.ndarray:
        """The local confusion matrix (rows: predicted class, columns: label)."""
        return self._local["cm"]

    @property
    def gcm(self) -> np.ndarray:
        """The global confusion matrix."""
        return self._global["cm"]
