"""EvalMetric, the metric registry, and the mergeable running state every metric shares.

Running state
-------------
A metric keeps two *totals* dicts, ``local`` (cleared by :meth:`EvalMetric.reset_local`) and
``global`` (cleared only by :meth:`EvalMetric.reset`). Each holds plain numbers, short lists
or small numpy arrays, plus ``updates``: how many ``update()`` calls it has folded in.

An ``update(labels, preds)`` call is split in two:

1. ``_record(labels, preds) -> record``: the additive statistics of the call's data (for MSE
   the per-array sum of squared errors and element count; for F1 the call's tp/fp/fn/tn).
   Records of disjoint parts of the same data combine, with :func:`combine`, into the record
   of the whole.
2. ``_fold(totals, record)``: fold one record into a totals dict with MXNet's per-update
   semantics (MSE adds the call's *mean* and counts one instance; F1 ``macro`` adds the call's
   F1; Accuracy just adds counts).

:meth:`EvalMetric.state` returns ``{"metric", "local", "global", "step"}``, where ``step`` is
the record of the one update a state covers, present only while it covers exactly one
(``updates == 1`` locally and globally), else ``None``. Two merges follow from this:

* :meth:`EvalMetric.merge` adds another metric's totals into this one: the result is what one
  process would hold after making *both* metrics' update calls. Use it to gather states that
  cover different steps.
* :meth:`EvalMetric.merge_parts` takes the one-update states of k workers that each updated a
  fresh metric with one slice of the *same* global batch, combines their ``step`` records and
  folds them once: the result is the state of one update on the whole batch. Merging that into
  a running metric (``merge``) then counts the step once. For pooled metrics (Accuracy, micro
  F1, Perplexity, ...) the two merges give the same value; for per-update ones (MSE, MAE,
  RMSE, macro F1/MCC, macro PearsonCorrelation) only ``merge_parts`` reproduces a single
  process that saw the whole batch.

A worker sends :meth:`EvalMetric.part_state` for its slice: ``{"metric", "step"}`` alone (the
totals of one update follow from its record), which both merges accept.
"""
from __future__ import annotations

import copy
import functools
import math
from typing import Any, Iterable, Sequence

import numpy as np

from ..array_view import plain
from ..context import as_numpy
from ..registry import Registry

_REGISTRY: Registry = Registry("metric")

register = _REGISTRY.register
alias = _REGISTRY.alias

# Keys of a centred-moment record (see ``moments``); such dicts merge by Chan's formula.
MOMENT_KEYS = frozenset(("n", "mx", "my", "sxx", "syy", "sxy"))


def _is_array(x: Any) -> bool:
    """True for one array (numpy, cupy, or anything with a shape), False for a list/tuple."""
    return not isinstance(x, (list, tuple)) and hasattr(x, "shape")


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False):
    """Check that labels and predictions agree, optionally wrapping single arrays in lists.

    Parameters
    ----------
    labels, preds : array or list of arrays
        Labels and predictions of one update.
    wrap : bool, default False
        Turn a single array into a one-element list (done before comparing, so a bare
        array against a one-element list is accepted).
    shape : bool, default False
        Compare the arrays' shapes instead of their lengths.

    Returns
    -------
    (labels, preds)
        The inputs, wrapped if ``wrap``.

    Raises
    ------
    ValueError
        If the lengths (or shapes) differ.
    """
    if wrap:
        labels = [labels] if _is_array(labels) else labels
        preds = [preds] if _is_array(preds) else preds
    if shape:
        left, right = tuple(labels.shape), tuple(preds.shape)
    else:
        left, right = len(labels), len(preds)
    if left != right:
        raise ValueError(f"Shape of labels {left} does not match shape of predictions {right}")
    return labels, preds


def pairs(labels: Any, preds: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """(label, pred) host arrays of one update, checked to be equally many."""
    labels, preds = check_label_shapes(labels, preds, wrap=True)
    return [(as_numpy(label), as_numpy(pred)) for label, pred in zip(labels, preds)]


def moments(x: np.ndarray, y: np.ndarray) -> dict:
    """Centred sufficient statistics of paired samples: count, means, and co-moments.

    ``sxx = sum((x-mx)**2)``, ``syy`` likewise, ``sxy = sum((x-mx)*(y-my))``. They carry the
    same information as (n, sums, sums of squares, cross sum) but do not cancel
    catastrophically when the means are large next to the spread.
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    if x.size == 0:
        return dict(n=0, mx=0.0, my=0.0, sxx=0.0, syy=0.0, sxy=0.0)
    mx, my = float(x.mean()), float(y.mean())
    dx, dy = x - mx, y - my
    return dict(n=int(x.size), mx=mx, my=my, sxx=float(dx @ dx), syy=float(dy @ dy),
                sxy=float(dx @ dy))


def merge_moments(a: dict, b: dict) -> dict:
    """Moments of the union of two samples (Chan et al.'s pairwise update)."""
    if a["n"] == 0:
        return dict(b)
    if b["n"] == 0:
        return dict(a)
    n = a["n"] + b["n"]
    dx, dy = b["mx"] - a["mx"], b["my"] - a["my"]
    w = a["n"] * b["n"] / n
    return dict(n=n, mx=a["mx"] + dx * b["n"] / n, my=a["my"] + dy * b["n"] / n,
                sxx=a["sxx"] + b["sxx"] + dx * dx * w, syy=a["syy"] + b["syy"] + dy * dy * w,
                sxy=a["sxy"] + b["sxy"] + dx * dy * w)


def correlation(m: dict) -> float:
    """Pearson's r from moments; NaN when either side has no spread."""
    denom = m["sxx"] * m["syy"]
    return m["sxy"] / math.sqrt(denom) if denom > 0 else float("nan")


def _add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b after zero-padding both (at the end of each axis) to the larger shape."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        shape = tuple(max(i, j) for i, j in zip(a.shape, b.shape))
        a = np.pad(a, [(0, s - d) for s, d in zip(shape, a.shape)])
        b = np.pad(b, [(0, s - d) for s, d in zip(shape, b.shape)])
    return a + b


def combine(a: Any, b: Any) -> Any:
    """Combine two additive records or totals: numbers add, lists add elementwise, arrays
    add after padding to a common shape, dicts combine key by key, moment dicts merge."""
    if isinstance(a, dict):
        if a.keys() != b.keys():
            raise ValueError(f"cannot merge metric states with fields {sorted(a)} and {sorted(b)}")
        if a.keys() == MOMENT_KEYS:
            return merge_moments(a, b)
        return {k: combine(a[k], b[k]) for k in a}
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):  # (one may be a JSON list)
        return _add_padded(a, b)
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            raise ValueError(f"cannot merge records of {len(a)} and {len(b)} label/pred pairs; "
                             "parts of one step must have the same number of outputs")
        return [combine(x, y) for x, y in zip(a, b)]
    return a + b


class EvalMetric:
    """Base class of evaluation metrics: accumulates a statistic over ``update`` calls.

    Every metric keeps a local part (cleared by :meth:`reset_local`, e.g. every logging
    period) and a global part (cleared only by :meth:`reset`), and exposes both as a mergeable
    record (:meth:`state`, :meth:`merge`, :meth:`merge_parts`; see the module docstring).

    Parameters
    ----------
    name : str
        Name shown next to the value.
    output_names : list of str, optional
        Which predictions :meth:`update_dict` passes on (all, in order, if None).
    label_names : list of str, optional
        Which labels :meth:`update_dict` passes on (all, in order, if None).
    **kwargs
        Constructor arguments of the subclass, kept for :meth:`get_config`.
        ``has_global_stats`` (bool) is taken out: whether :meth:`get_global` reads the global
        part (otherwise it returns :meth:`get`).

    Notes
    -----
    ``sum_metric`` / ``num_inst`` (and ``global_sum_metric`` / ``global_num_inst``) are the
    MXNet attributes; here they read the totals, so ``get() == sum_metric / num_inst``.
    A subclass written MXNet style (overriding ``update`` and adding to ``sum_metric`` and
    ``num_inst``) still works, and its states merge by addition; :meth:`merge_parts` needs the
    ``_record`` / ``_fold`` split instead.
    """

    def __init__(self, name: str, output_names: Sequence[str] | None = None,
                 label_names: Sequence[str] | None = None, **kwargs: Any):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self._local = self._new_totals()
        self._global = self._new_totals()
        self._last: dict | None = None
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    # ----- configuration -------------------------------------------------------------------
    def get_config(self) -> dict:
        """The constructor arguments as a JSON-able dict; ``create(json.dumps(cfg))`` rebuilds
        an equal metric."""
        config = dict(self._kwargs)
        config.update(metric=type(self).__name__, name=self.name,
                      output_names=self.output_names, label_names=self.label_names)
        return config

    # ----- updating ------------------------------------------------------------------------
    def update(self, labels: Any, preds: Any) -> None:
        """Add one batch of labels and predictions.

        Parameters
        ----------
        labels : array or list of arrays
            Ground truth, one array per output (numpy or cupy).
        preds : array or list of arrays
            Predictions, in the same order as ``labels``.
        """
        # the built-in formulas compute on plain arrays (NDArray views would cost per op)
        self._apply(self._record(_plain_all(labels), _plain_all(preds)))

    def update_dict(self, label: dict, pred: dict) -> None:
        """Update from name -> array dicts, picking ``label_names`` / ``output_names``.

        Parameters
        ----------
        label : dict of str to array
            Labels by name.
        pred : dict of str to array
            Predictions by output name.
        """
        preds = ([pred[n] for n in self.output_names] if self.output_names is not None
                 else list(pred.values()))
        labels = ([label[n] for n in self.label_names] if self.label_names is not None
                  else list(label.values()))
        self.update(labels, preds)

    def _record(self, labels: Any, preds: Any) -> dict:
        """Additive statistics of one update call's data."""
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    def _zero(self) -> dict:
        """Empty totals, without the ``updates`` counter."""
        return {"sum_metric": 0.0, "num_inst": 0}

    def _new_totals(self) -> dict:
        """Empty totals with the ``updates`` counter."""
        return {**self._zero(), "updates": 0}

    def _fold(self, totals: dict, record: dict) -> None:
        """Fold one update's record into ``totals`` (default: add field by field)."""
        for key, value in record.items():
            totals[key] = combine(totals[key], value)

    def _apply(self, record: dict) -> None:
        """Fold a record into the local and the global totals as one update."""
        for totals in (self._local, self._global):
            self._fold(totals, record)
            totals["updates"] += 1
        self._last = record

    # ----- reading -------------------------------------------------------------------------
    def _summary(self, totals: dict) -> tuple[float, float]:
        """(sum_metric, num_inst) of a totals dict."""
        return totals["sum_metric"], totals["num_inst"]

    def _value(self, totals: dict) -> float:
        """The metric value of a totals dict; NaN when empty."""
        total, count = self._summary(totals)
        return float("nan") if count == 0 else total / count

    sum_metric = property(lambda self: self._summary(self._local)[0],
                          lambda self, v: self._local.__setitem__("sum_metric", v),
                          doc="Sum of the local statistic (MXNet's attribute).")
    num_inst = property(lambda self: self._summary(self._local)[1],
                        lambda self, v: self._local.__setitem__("num_inst", v),
                        doc="Number of local instances the statistic is averaged over.")
    global_sum_metric = property(lambda self: self._summary(self._global)[0],
                                 lambda self, v: self._global.__setitem__("sum_metric", v),
                                 doc="Sum of the global statistic.")
    global_num_inst = property(lambda self: self._summary(self._global)[1],
                               lambda self, v: self._global.__setitem__("num_inst", v),
                               doc="Number of global instances.")

    def reset(self) -> None:
        """Clear the local and the global statistics."""
        self._local = self._new_totals()
        self._global = self._new_totals()
        self._last = None

    def reset_local(self) -> None:
        """Clear the local statistics only; the global ones keep accumulating."""
        self._local = self._new_totals()

    def get(self) -> tuple[str, float]:
        """``(name, value)`` of the local statistics; the value is NaN before any update."""
        return self.name, self._value(self._local)

    def get_global(self) -> tuple[str, float]:
        """``(name, value)`` of the global statistics (or :meth:`get` without global stats)."""
        if not self._has_global_stats:
            return self.get()
        return self.name, self._value(self._global)

    @staticmethod
    def _as_pairs(name_value: tuple) -> list[tuple[str, float]]:
        names, values = name_value
        names = names if isinstance(names, list) else [names]
        values = values if isinstance(values, list) else [values]
        return list(zip(names, values))

    def get_name_value(self) -> list[tuple[str, float]]:
        """The local values as a list of ``(name, value)`` pairs."""
        return self._as_pairs(self.get())

    def get_global_name_value(self) -> list[tuple[str, float]]:
        """The global values as a list of ``(name, value)`` pairs."""
        if not self._has_global_stats:
            return self.get_name_value()
        return self._as_pairs(self.get_global())

    # ----- mergeable state -----------------------------------------------------------------
    def state(self) -> dict:
        """The running state as a small dict of numbers, lists and small numpy arrays.

        Returns
        -------
        dict
            ``metric`` (class name), ``local`` and ``global`` totals, and ``step``: the
            additive record of the single update this state covers, or None unless it covers
            exactly one update since :meth:`reset`.
        """
        single = self._local["updates"] == 1 and self._global["updates"] == 1
        return {"metric": type(self).__name__, "local": copy.deepcopy(self._local),
                "global": copy.deepcopy(self._global),
                "step": copy.deepcopy(self._last) if single else None}

    def part_state(self) -> dict:
        """:meth:`state` in its smallest form: what a worker sends for its part of a batch
        (:meth:`merge_parts` and :meth:`merge` take it).

        Returns
        -------
        dict
            After exactly one recorded update since :meth:`reset`, ``metric`` (class name)
            and ``step`` (that update's additive record, shared with this metric, not
            copied: send or merge it before the next update); otherwise :meth:`state` (an
            MXNet-style subclass that sets ``sum_metric`` itself keeps no record).
        """
        if self._last is None or self._local["updates"] != 1 or self._global["updates"] != 1:
            return self.state()
        return {"metric": type(self).__name__, "step": self._last}

    def _whole_state(self, state: dict) -> dict:
        """``state`` with its totals (a :meth:`part_state` covers one update: the totals
        are its record folded once)."""
        if "local" in state:
            return state
        totals = self._new_totals()
        self._fold(totals, copy.deepcopy(state["step"]))
        totals["updates"] = 1
        return {"metric": state["metric"], "local": totals, "global": copy.deepcopy(totals),
                "step": state["step"]}

    def _check_state(self, state: dict) -> None:
        if not isinstance(state, dict) or state.get("metric") != type(self).__name__:
            got = state.get("metric") if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"cannot merge a {got!r} state into {type(self).__name__}")

    def merge(self, state: "dict | EvalMetric") -> "EvalMetric":
        """Add another metric's running state (from :meth:`state`) into this one.

        The result equals one process that made this metric's update calls and then the other
        one's: use it for states covering different steps, or for the output of
        :meth:`merge_parts`.

        Parameters
        ----------
        state : dict or EvalMetric
            A state of a metric of the same class and configuration (or that metric).

        Returns
        -------
        EvalMetric
            ``self``.
        """
        if isinstance(state, EvalMetric):
            state = state.state()
        self._check_state(state)
        state = self._whole_state(state)
        fresh = self._local["updates"] == 0 and self._global["updates"] == 0
        self._local = combine(self._local, state["local"])
        self._global = combine(self._global, state["global"])
        if fresh:
            self._last = copy.deepcopy(state["step"])
        return self

    def merge_parts(self, states: Iterable[dict]) -> dict:
        """Combine the states of workers that each updated once on one part of a batch.

        Each state must come from a metric of this class and configuration that was reset and
        then updated exactly once, with one slice of the same global batch (same number of
        outputs). The returned state is that of a fresh metric updated once with the whole
        batch; ``self`` is not changed. Merge it with :meth:`merge`.

        Parameters
        ----------
        states : iterable of dict
            One-update states from :meth:`state` or :meth:`part_state`.

        Returns
        -------
        dict
            A one-update state.

        Raises
        ------
        ValueError
            If no states are given, one belongs to another metric, or one does not cover
            exactly one update.
        """
        states = list(states)
        if not states:
            raise ValueError("merge_parts needs at least one state")
        for s in states:
            self._check_state(s)
            if s["step"] is None:
                raise ValueError(
                    f"merge_parts needs states of exactly one update each, got one covering "
                    f"{s['local']['updates']} local / {s['global']['updates']} global updates "
                    "(reset() the metric before each step's update)")
        record = functools.reduce(combine, (s["step"] for s in states))
        return self._whole_state({"metric": type(self).__name__, "step": record})


def _plain_all(value: Any) -> Any:
    """An array, or a list / tuple of them, as plain numpy / CuPy arrays (see array_view)."""
    if isinstance(value, (list, tuple)):
        return [plain(v) if hasattr(v, "shape") else v for v in value]
    return plain(value) if hasattr(value, "shape") else value
