"""``FitResult``: what ``fit`` returns (the epochs' metrics, checkpoints, membership events).

MXNet's ``fit`` returns None and scripts that ignore the value are unaffected; code that
keeps it gets what Ray Train's ``Result`` gives: the metrics history as records and as a
pyarrow Table, where the last and best checkpoints are, and what happened to the workers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FitResult"]


@dataclass
class FitResult:
    """The outcome of one ``fit`` call.

    Attributes
    ----------
    epochs : list of dict
        One record per epoch trained: ``epoch``, ``train_<metric>`` and (with ``eval_data``)
        ``val_<metric>`` values, ``steps``, ``samples``, ``seconds`` and ``samples_per_s``,
        and ``checkpoint`` (the folder saved at the epoch's end, else None).
    last_checkpoint : str or None
        The newest complete checkpoint folder (``fit(checkpoint=...)``), else None.
    best_checkpoint : str or None
        Of the epoch-end checkpoints still kept, the one whose epoch scored best on the first
        validation metric (the lowest for a loss-like metric, see ``higher_is_better``); None
        without validation or checkpoints.
    events : list of dict
        Membership events of the worker pool during the fit (joins, losses, recoveries);
        empty in process.
    error : Exception or None
        Set on the result attached to the exception (``err.fit_result``) when ``fit`` stopped
        short of workers after saving its progress.
    """

    epochs: list[dict] = field(default_factory=list)
    last_checkpoint: str | None = None
    best_checkpoint: str | None = None
    events: list[dict] = field(default_factory=list)
    error: BaseException | None = None

    @property
    def metrics(self) -> dict:
        """The last epoch's record (empty if no epoch ran)."""
        return dict(self.epochs[-1]) if self.epochs else {}

    def table(self) -> Any:
        """The epoch records as a ``pyarrow.Table`` (one row per epoch)."""
        import pyarrow as pa

        columns: list[str] = []
        for record in self.epochs:
            columns += [k for k in record if k not in columns]
        return pa.table({c: [r.get(c) for r in self.epochs] for c in columns})

    def choose_best(self, higher_is_better: bool = True) -> None:
        """Set :attr:`best_checkpoint` from the epochs' first validation value."""
        best, best_value = None, None
        for record in self.epochs:
            key = next((k for k in record if k.startswith("val_")), None)
            folder = record.get("checkpoint")
            value = record.get(key) if key else None
            if folder is None or value is None or (isinstance(value, float)
                                                   and math.isnan(value)):
                continue
            better = (best_value is None or
                      (value > best_value if higher_is_better else value < best_value))
            if better:
                best, best_value = folder, value
        self.best_checkpoint = best
