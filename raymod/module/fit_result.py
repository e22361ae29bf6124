"""``FitResult``: what ``fit`` returns (the epochs' metrics, checkpoints, membership events).

MXNet's ``fit`` returns None and scripts that ignore the value are unaffected; code that
keeps it gets what Ray Train's ``Result`` gives: the metrics history as records, as a pyarrow
Table and as a pandas DataFrame (``metrics_dataframe``), where the last and best checkpoints
are (``get_best_checkpoint(metric, mode)``), why it stopped, what happened to the workers;
``FitResult.from_path(checkpoint_dir)`` reopens a finished or killed run from its checkpoints.
"""
from __future__ import annotations

import json
import math
import posixpath
from dataclasses import dataclass, field
from typing import Any

from ..callback import score_mode, score_value

__all__ = ["FitResult"]


@dataclass
class FitResult:
    """The outcome of one ``fit`` call.

    Attributes
    ----------
    epochs : list of dict
        One record per epoch trained: ``epoch``, ``train_<metric>`` and (with ``eval_data``)
        ``val_<metric>`` values, ``steps``, ``samples``, ``seconds`` and ``samples_per_s``,
        and ``checkpoint`` (the folder saved at the epoch's end while it is kept, else None).
        From :meth:`from_path`: every epoch of the run, resumed parts included.
    last_checkpoint : str or None
        The newest complete checkpoint folder (``fit(checkpoint=...)``), else None.
    best_checkpoint : str or None
        Of the checkpoints still kept, the best-scored: by ``CheckpointConfig(score=,
        mode=)`` when given, else by the first validation metric (the lowest for a
        loss-like metric); None without validation or checkpoints. Never a pruned folder.
        For another metric or order, call :meth:`get_best_checkpoint`.
    checkpoints : list of (str, dict)
        The kept checkpoint folders, oldest first, each with the epoch record its manifest
        holds (``{}`` for one written mid-epoch): Ray's ``best_checkpoints``.
    events : list of dict
        Membership events of the worker pool during the fit (joins, losses, recoveries);
        empty in process.
    stop_reason : str or None
        Why ``fit`` stopped before ``num_epoch`` (e.g. an :class:`~raymod.callback.
        EarlyStopping` decision); None when it trained every epoch.
    error : Exception or None
        Set on the result attached to an exception (``err.fit_result``) that ended ``fit``:
        too few workers (after saving its progress), or a callback that raised.
    """

    epochs: list[dict] = field(default_factory=list)
    last_checkpoint: str | None = None
    best_checkpoint: str | None = None
    events: list[dict] = field(default_factory=list)
    error: BaseException | None = None
    checkpoints: list[tuple[str, dict]] = field(default_factory=list)
    stop_reason: str | None = None

    @property
    def metrics(self) -> dict:
        """The last epoch's record (empty if no epoch ran)."""
        return dict(self.epochs[-1]) if self.epochs else {}

    @property
    def best_checkpoints(self) -> list[tuple[str, dict]]:
        """Ray Train's name for :attr:`checkpoints`."""
        return self.checkpoints

    def table(self) -> Any:
        """The epoch records as a ``pyarrow.Table`` (one row per epoch)."""
        import pyarrow as pa

        columns: list[str] = []
        for record in self.epochs:
            columns += [k for k in record if k not in columns]
        return pa.table({c: [r.get(c) for r in self.epochs] for c in columns})

    @property
    def metrics_dataframe(self) -> Any:
        """The epoch records as a ``pandas.DataFrame`` (one row per epoch), as Ray Train's
        ``Result.metrics_dataframe``; the ``pyarrow.Table`` of :meth:`table` when pandas is
        not installed."""
        table = self.table()
        try:
            import pandas  # noqa: F401 - only whether it is there
        except ImportError:
            return table
        return table.to_pandas()

    def get_best_checkpoint(self, metric: str, mode: str | None = None) -> str | None:
        """The kept checkpoint whose epoch scored best on ``metric`` (Ray Train's
        ``Result.get_best_checkpoint``).

        Parameters
        ----------
        metric : str
            A key of the epoch records, e.g. ``'val_accuracy'``.
        mode : {'min', 'max'}, optional
            Whether lower or higher is better; default: 'min' for a loss-like name (loss,
            entropy, perplexity, mse, mae, rmse, nll), else 'max'.

        Returns
        -------
        str or None
            The folder (of two equal scores, the older), or None when no kept checkpoint
            has a value for ``metric``.

        Raises
        ------
        ValueError
            When ``mode`` is not 'min', 'max' or None, or no epoch record has ``metric``.
        """
        mode = score_mode(metric, mode, "get_best_checkpoint(mode=...)")
        records = self.epochs + [m for _, m in self.checkpoints]
        if records and not any(metric in r for r in records):
            keys = sorted({k for r in records for k in r})
            raise ValueError(f"get_best_checkpoint(metric={metric!r}): no epoch record has it;"
                             f" they have {', '.join(keys)}")
        return self._best(metric, mode)

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

    def set_best(self, score: str | None = None, mode: str | None = None) -> None:
        """Set :attr:`best_checkpoint`: the kept checkpoint best by ``score`` (default: the
        first validation metric of the records; None when there is none)."""
        records = self.epochs + [m for _, m in self.checkpoints]
        key = score or next((k for r in records for k in r if k.startswith("val_")), None)
        self.best_checkpoint = None if key is None else self._best(key, score_mode(key, mode))

    def _best(self, metric: str, mode: str) -> str | None:
        """The best kept folder on ``metric``: from :attr:`checkpoints` when known, else from
        the records' ``checkpoint`` fields."""
        candidates = self.checkpoints or [(r["checkpoint"], r) for r in self.epochs
                                          if r.get("checkpoint")]
        best, best_value = None, None
        for folder, record in candidates:
            value = score_value(record, metric)
            if value is None:
                continue
            if best_value is None or (value > best_value if mode == "max"
                                      else value < best_value):
                best, best_value = folder, value
        return best

    @classmethod
    def from_path(cls, path: str) -> "FitResult":
        """Reopen a finished or killed run from its checkpoints (``CheckpointConfig``'s
        path: a folder or a ``pyarrow.fs`` URI), as Ray Train's ``Result.from_path``.

        The newest complete checkpoint holds the run's epoch history (resumed parts
        included), its membership log and why it stopped; the kept checkpoints' manifests
        hold their epochs' records. Reads only.

        Parameters
        ----------
        path : str
            The checkpoint root given to ``fit(checkpoint=...)``.

        Returns
        -------
        FitResult
            ``epochs`` (each ``checkpoint`` is its kept folder or None), ``checkpoints``,
            ``last_checkpoint``, ``best_checkpoint`` (by the run's ``CheckpointConfig(score=,
            mode=)`` when it had one), ``events`` and ``stop_reason``.

        Raises
        ------
        CheckpointLocationError
            When ``path`` cannot be opened or reached.
        CheckpointError
            When it holds no complete checkpoint, or reading fails.
        """
        from .fit_checkpoint import CheckpointError, _where, open_location, scan_steps

        fs, root = open_location(path, writable=False)
        try:
            found = scan_steps(fs, root)
            newest = found.folders[-1] if found.folders else None
            if newest is not None:
                with fs.open_input_stream(posixpath.join(newest, "position.json")) as f:
                    raw = f.read()
        except OSError as err:
            raise CheckpointError(_where(path, f"cannot read the checkpoints: "
                                               f"{' '.join(str(err).split())}")) from err
        if newest is None:
            raise CheckpointError(_where(path, f"no complete checkpoint under {root}"))
        try:
            position = json.loads(raw)
        except ValueError as err:
            raise CheckpointError(_where(path, f"{newest}/position.json is not JSON: "
                                               f"{err}")) from None
        checkpoints = [(folder, dict(found.metrics.get(folder, {})))
                       for folder in found.folders]
        by_epoch = {m["epoch"]: folder for folder, m in checkpoints if "epoch" in m}
        history = position.get("history")
        if not isinstance(history, list):  # written before histories: the kept epochs
            history = sorted((m for _, m in checkpoints if "epoch" in m),
                             key=lambda m: m["epoch"])
        epochs = [dict(r, checkpoint=by_epoch.get(r.get("epoch"))) for r in history
                  if isinstance(r, dict)]
        result = cls(epochs=epochs, last_checkpoint=newest, checkpoints=checkpoints,
                     events=list(position.get("membership") or []),
                     stop_reason=position.get("stop_reason"))
        score = position.get("score") or {}
        result.set_best(score.get("score"), score.get("mode"))
        return result
