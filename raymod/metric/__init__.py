"""Evaluation metrics, as MXNet 1.x's ``mx.metric``, with mergeable running state.

Use ``rm.metric.create('acc')``, ``rm.metric.Accuracy()``, ... as in MXNet. Arrays may be
numpy or cupy (they are copied to the host). New in raymod: every metric's running state is a
small record (:meth:`EvalMetric.state`) that merges across workers (:meth:`EvalMetric.merge`,
:meth:`EvalMetric.merge_parts`); see :mod:`raymod.metric.base` for the semantics.
"""
from .base import EvalMetric, alias, check_label_shapes, register
from .classification import F1, MCC, PCC, Accuracy, TopKAccuracy
from .composite import CompositeEvalMetric, CustomMetric, create, np
from .probabilistic import CrossEntropy, Loss, NegativeLogLikelihood, Perplexity
from .regression import MAE, MSE, RMSE, PearsonCorrelation

__all__ = [
    "EvalMetric", "create", "register", "alias", "np", "check_label_shapes",
    "CustomMetric", "CompositeEvalMetric",
    "Accuracy", "TopKAccuracy", "F1", "MCC", "PCC",
    "Perplexity", "CrossEntropy", "NegativeLogLikelihood", "Loss",
    "MAE", "MSE", "RMSE", "PearsonCorrelation",
]
