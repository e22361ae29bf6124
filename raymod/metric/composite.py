"""CompositeEvalMetric, CustomMetric, the ``np`` wrapper and ``create``.

(This module defines a function named ``np``, so numpy is imported as ``numpy`` here.)
"""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Callable, Iterable, Sequence

import numpy

from .base import EvalMetric, _REGISTRY, _is_array, pairs


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """Build a metric from a name, a function, a list, a config, or pass one through.

    Parameters
    ----------
    metric : str, callable, list, dict, EvalMetric or EvalMetric subclass
        * a registered name or alias (``'acc'``, ``'f1'``, ``'ce'``, ...), case-insensitive;
        * a JSON string from ``json.dumps(m.get_config())`` (or a config dict);
        * a function ``feval(label, pred)``, wrapped in a :class:`CustomMetric`;
        * a list of any of these, gathered in a :class:`CompositeEvalMetric`;
        * an EvalMetric instance, returned as is.
    *args, **kwargs
        Passed to the metric's constructor (to every child for a list).

    Returns
    -------
    EvalMetric

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).

    Examples
    --------
    >>> create('acc').get()
    ('accuracy', nan)
    >>> create(['acc', 'f1']).get()[0]
    ['accuracy', 'f1']
    """
    if isinstance(metric, EvalMetric):
        if args or kwargs:
            raise ValueError("arguments given together with an EvalMetric instance")
        return metric
    if isinstance(metric, type) and issubclass(metric, EvalMetric):
        return metric(*args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, dict):
        config = {**metric, **kwargs}
        return create(config.pop("metric"), *args, **config)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if not isinstance(metric, str):
        raise TypeError(f"cannot create a metric from a {type(metric).__name__}")
    text = metric.strip()
    if text.startswith("{") or text.startswith("["):
        if args or kwargs:
            raise ValueError("arguments given together with a JSON metric config")
        config = json.loads(text)
        if isinstance(config, list):  # MXNet's [name, kwargs] form
            name, config = config
            return create(name, **config)
        return create(config)
    return _REGISTRY.get(metric)(*args, **kwargs)


@_REGISTRY.register
@_REGISTRY.alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; values come back as lists.

    Its state is the list of the children's states, merged child by child.

    Parameters
    ----------
    metrics : list, optional
        Child metrics, or anything :func:`create` accepts for each.
    name : str, default 'composite'
        Name of the group.
    output_names, label_names : list of str, optional
        In :meth:`update_dict`, only these predictions / labels reach the children.
    """

    def __init__(self, metrics: Sequence[Any] | None = None, name: str = "composite",
                 output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        self.metrics: list[EvalMetric] = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def add(self, metric: Any) -> None:
        """Append a child metric (anything :func:`create` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        """The child at ``index``; ``IndexError`` naming the valid range otherwise."""
        try:
            return self.metrics[index]
        except IndexError:
            raise IndexError(f"Metric index {index} is out of range 0 and "
                             f"{len(self.metrics)}") from None

    def update_dict(self, labels: dict, preds: dict) -> None:
        """Pass the selected labels / predictions (all if no names are set) to every child."""
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        """Update every child with the same labels and predictions."""
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        """Reset every child."""
        super().reset()
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self) -> None:
        """Reset every child's local statistics."""
        for metric in self.metrics:
            metric.reset_local()

    def _gather(self, getter: str) -> tuple[list[str], list[float]]:
        names, values = [], []
        for metric in self.metrics:
            name, value = getattr(metric, getter)()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get(self) -> tuple[list[str], list[float]]:
        """(names, values) of every child's local statistics."""
        return self._gather("get")

    def get_global(self) -> tuple[list[str], list[float]]:
        """(names, values) of every child's global statistics."""
        return self._gather("get_global")

    def get_config(self) -> dict:
        """The group's config with each child's config under ``metrics``."""
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config

    def state(self) -> dict:
        """``{"metric": "CompositeEvalMetric", "metrics": [child states]}``."""
        return {"metric": type(self).__name__, "metrics": [m.state() for m in self.metrics]}

    def part_state(self) -> dict:
        """Every child's :meth:`EvalMetric.part_state`, in the form of :meth:`state`."""
        return {"metric": type(self).__name__,
                "metrics": [m.part_state() for m in self.metrics]}

    def _children_states(self, state: dict) -> list[dict]:
        self._check_state(state)
        if len(state["metrics"]) != len(self.metrics):
            raise ValueError(f"state has {len(state['metrics'])} child metrics, "
                             f"this composite has {len(self.metrics)}")
        return state["metrics"]

    def merge(self, state: "dict | EvalMetric") -> "CompositeEvalMetric":
        """Merge each child's state into the matching child (see :meth:`EvalMetric.merge`)."""
        if isinstance(state, EvalMetric):
            state = state.state()
        for metric, child in zip(self.metrics, self._children_states(state)):
            metric.merge(child)
        return self

    def merge_parts(self, states: Iterable[dict]) -> dict:
        """Child-wise :meth:`EvalMetric.merge_parts`."""
        children = [self._children_states(s) for s in states]
        if not children:
            raise ValueError("merge_parts needs at least one state")
        return {"metric": type(self).__name__,
                "metrics": [m.merge_parts([c[i] for c in children])
                            for i, m in enumerate(self.metrics)]}


@_REGISTRY.register
class CustomMetric(EvalMetric):
    """A metric computed by a user function ``feval(label, pred)`` on host numpy arrays.

    ``feval`` returns either a number (added to ``sum_metric``, one instance per array pair)
    or a ``(sum, count)`` tuple. States merge by adding sums and counts; a batch split k ways
    merges to the whole batch exactly when ``feval`` returns ``(sum, count)`` with a sum that
    adds over samples. A function returning a per-array mean counts each part as its own
    instance instead (no merge can recover the mean of a function it cannot see inside).

    Parameters
    ----------
    feval : callable
        ``feval(label, pred) -> float or (float, int)``.
    name : str, optional
        Defaults to ``feval.__name__`` (``'custom(<lambda>)'`` for lambdas).
    allow_extra_outputs : bool, default False
        Allow more predictions than labels (extra ones are ignored).
    output_names, label_names : list of str, optional
        See :class:`EvalMetric`.
    """

    def __init__(self, feval: Callable, name: str | None = None,
                 allow_extra_outputs: bool = False, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None):
        if name is None:
            name = feval.__name__
            if "<" in name:
                name = f"custom({name})"
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def _record(self, labels: Any, preds: Any) -> dict:
        if self._allow_extra_outputs:  # extra predictions beyond the labels are ignored
            labels = [labels] if _is_array(labels) else list(labels)
            preds = ([preds] if _is_array(preds) else list(preds))[:len(labels)]
        total, count = 0.0, 0
        for label, pred in pairs(labels, preds):
            value = self._feval(label, pred)
            if isinstance(value, tuple):
                total += float(value[0])
                count += value[1].item() if hasattr(value[1], "item") else value[1]
            else:
                total += float(value)
                count += 1
        return {"sum_metric": total, "num_inst": count}

    def get_config(self) -> dict:
        """Not available: a Python function cannot be written to a config."""
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval: Callable, name: str | None = None,
       allow_extra_outputs: bool = False) -> CustomMetric:
    """Make a :class:`CustomMetric` from a function of numpy ``(label, pred)``.

    Parameters
    ----------
    numpy_feval : callable
        ``numpy_feval(label, pred) -> float or (float, int)`` on host arrays.
    name : str, optional
        Metric name (default: the function's name).
    allow_extra_outputs : bool, default False
        Allow more predictions than labels.

    Returns
    -------
    CustomMetric
    """
    def feval(label: numpy.ndarray, pred: numpy.ndarray):
        return numpy_feval(label, pred)

    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
