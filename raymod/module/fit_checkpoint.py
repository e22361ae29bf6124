"""Checkpoints that let ``fit`` survive losing the driver: ``fit(checkpoint=..., resume=True)``.

Checkpoints live under the configured local folder or ``pyarrow.fs`` URI (``file:///...``,
``s3://bucket/run?endpoint_override=host:port&scheme=http``, ...), one folder ``step-<n>``
(zero-padded global step) per checkpoint:

- ``model-symbol.json``, ``model-0000.params`` (MXNet's layout: ``Module.load`` and MXNet 1.x
  read it), ``model-0000.states`` (optimizer states, wherever the optimizer ran);
- ``fit-state.params`` when the module keeps more training state than its parameters
  (SVRGModule: the snapshot weights and the full gradient), in the same NDArray format;
- ``position.json``: epoch, batches done in it, the global step, the iterator's sampler
  position, the state of ``rm.random``'s generator, the bucket keys seen and the worker
  membership log;
- ``manifest.json``, written last: ``{"format": 1, "step": n, "files": {name: bytes}}``.

A save never moves a folder (object stores cannot rename one): it writes every file straight
into a fresh ``step-<n>``, then the manifest, which marks the step complete. On a local disk
the files and the folder are fsynced before the manifest is written, and the manifest itself
is written to a temporary name and renamed; on an object store a single PUT appears whole or
not at all. A ``step-<n>`` already there is deleted first: the leftovers of a killed save, or
this step's earlier checkpoint (the epoch-end save after a periodic one at the same step): a
kill during that rewrite leaves the previous complete checkpoint to resume from (none when
``keep=1``, which then starts afresh).

A step is complete when its manifest names it and every listed file is there with the listed
size; only complete steps are resumed from. Every save and every resume deletes the folders of
saves that never finished (and ``.tmp-*`` folders left by the layout before manifests) and all
but the newest ``keep`` complete checkpoints; with ``CheckpointConfig(score=...)``, all but the
``keep`` best-scored ones and the newest (the one a resume needs). Nothing in a checkpoint is
pickled.

An epoch-end checkpoint's manifest also holds the epoch's record (``"metrics"``: the
``FitResult.epochs`` entry, validation values included), which is what the scores are read
from; ``position.json`` holds the run's epoch history (``"history"``), so that
``FitResult.from_path`` can reopen a finished or killed run and a resumed ``fit`` continues it.

Checkpoints written before manifests existed (each ``step-<n>`` was renamed into place, so it
was complete by construction) are still read: while no folder under the root has a manifest,
a ``step-<n>`` holding ``model-symbol.json``, ``model-0000.params`` and ``position.json`` counts
as complete. The first save into such a root writes manifests for those folders, so they stay
complete beside the new ones.

The location is checked when :class:`FitCheckpointer` is made (at the start of ``fit``, before
anything is bound or trained): a URI pyarrow cannot open, an object store that does not answer
within a few seconds, a missing bucket or a file in the way raise
:class:`CheckpointLocationError`, one line naming ``CheckpointConfig(path=...)`` and the reason.
"""
from __future__ import annotations

import contextlib
import json
import os
import posixpath
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow
import pyarrow.fs as pafs

from .. import random as _random
from ..base import MXNetError
from ..callback import location_problem, score_mode as _score_mode, score_value
from ..ndarray_io import dumps, load_frombuffer
from ..symbol import load_json

__all__ = ["CheckpointConfig", "FitCheckpointer", "CheckpointError", "CheckpointLocationError",
           "StepFolders", "open_location", "scan_steps"]

_PREFIX = "step-"
_EXTRA = "fit-state.params"
_STATES = "model-0000.states"
_MANIFEST = "manifest.json"
_FORMAT = 1
_LEGACY_TMP = ".tmp-"  # the temporary folders of the layout before manifests
_REQUIRED = ("model-symbol.json", "model-0000.params", "position.json")
#: seconds the location check waits for an object store to connect, and then to answer
_PROBE_TIMEOUT_S = 5.0


class CheckpointError(MXNetError):
    """Reading or writing a fit checkpoint failed; the message is one line naming
    ``CheckpointConfig(path=...)`` and the store's reason."""


class CheckpointLocationError(CheckpointError, ValueError):
    """``CheckpointConfig(path=...)`` names no usable location: a URI pyarrow cannot open, a
    store that does not answer, a missing bucket, a file where the folder should be."""


@dataclass(frozen=True)
class CheckpointConfig:
    """Where and how often ``fit`` writes resumable checkpoints.

    Parameters
    ----------
    path : str
        A local folder or a ``pyarrow.fs`` URI (``file:///...``, ``s3://bucket/run``, with
        pyarrow's query options such as ``?endpoint_override=host:port&scheme=http``). It is
        checked when ``fit`` starts, before any training.
    every_n_steps : int, optional
        Also write one every this many training steps.
    every_n_epochs : int, optional, default 1
        Write one at the end of every this many epochs.
    keep : int, default 3
        How many complete checkpoints to keep: the newest ``keep``; with ``score``, the
        ``keep`` best-scored ones plus the newest (which a resume starts from), so at most
        ``keep + 1``.
    score : str, optional
        Keep checkpoints by this key of the epoch records (``FitResult.epochs``), e.g.
        ``'val_accuracy'`` or ``'val_cross-entropy'``; checked against the keys ``fit``
        writes before it trains. Only epoch-end checkpoints carry a score; the ones
        ``every_n_steps`` writes are kept while they are the newest. ``FitResult``'s
        ``best_checkpoint`` is then the best-scored kept one.
    mode : {'min', 'max'}, optional
        Whether a lower or a higher ``score`` is better; default: 'min' for a loss-like name
        (loss, entropy, perplexity, mse, mae, rmse, nll), else 'max'. Needs ``score``.

    Notes
    -----
    Ray Train's ``CheckpointConfig(num_to_keep, checkpoint_score_attribute,
    checkpoint_score_order)`` are ``keep``, ``score`` and ``mode`` here (MXNet-era code keeps
    ``keep``'s meaning: without ``score``, the newest ``keep``). Unlike Ray, the newest
    checkpoint is always kept besides the best, so that ``resume=True`` continues from where
    the run stopped.

    Examples
    --------
    >>> mod.fit(train, num_epoch=10, checkpoint=rm.CheckpointConfig("runs/mlp",
    ...         every_n_steps=100), resume=True)
    >>> mod.fit(train, eval_data=val, num_epoch=10, checkpoint=rm.CheckpointConfig(
    ...         "runs/mlp", keep=2, score="val_accuracy"))  # the 2 best epochs + the newest
    """

    path: str
    every_n_steps: int | None = None
    every_n_epochs: int | None = 1
    keep: int = 3
    score: str | None = None
    mode: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"CheckpointConfig(path=...) must be a non-empty str, got "
                             f"{self.path!r}")
        for name in ("every_n_steps", "every_n_epochs"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"CheckpointConfig({name}=...) must be None or an int >= 1, "
                                 f"got {value!r}")
        if not isinstance(self.keep, int) or self.keep < 1:
            raise ValueError(f"CheckpointConfig(keep=...) must be an int >= 1, got {self.keep!r}")
        if self.score is not None and (not isinstance(self.score, str) or not self.score):
            raise ValueError(f"CheckpointConfig(score=...) must be None or a record key such as "
                             f"'val_accuracy', got {self.score!r}")
        if self.mode is not None and self.score is None:
            raise ValueError(f"CheckpointConfig(mode={self.mode!r}) needs score= (the key it "
                             f"orders)")
        if self.score is not None:
            _score_mode(self.score, self.mode, "CheckpointConfig(mode=...)")
            if self.every_n_epochs is None:  # only epoch-end checkpoints carry a score
                raise ValueError(f"CheckpointConfig(score={self.score!r}) needs epoch-end "
                                 f"checkpoints, got every_n_epochs=None")

    @property
    def score_mode(self) -> str | None:
        """``mode``, or the one inferred from ``score``'s name; None without ``score``."""
        return None if self.score is None else _score_mode(self.score, self.mode)


# ---- the location ---------------------------------------------------------------------------
def open_location(path: str, timeout: float = _PROBE_TIMEOUT_S,
                  writable: bool = True) -> tuple[pafs.FileSystem, str]:
    """The filesystem and root folder of a checkpoint path, once checked to be usable.

    Parameters
    ----------
    path : str
        A local folder or a ``pyarrow.fs`` URI, as in :class:`CheckpointConfig`.
    timeout : float, default 5
        Seconds the check waits for an object store to connect, and then to answer; it tries
        once (the returned filesystem keeps pyarrow's own timeouts and retries).
    writable : bool, default True
        Also check that a local folder can be written (a test file is made and removed);
        False for readers such as ``FitResult.from_path``.

    Returns
    -------
    tuple of (pyarrow.fs.FileSystem, str)
        The filesystem and the root folder in it (which may not exist yet).

    Raises
    ------
    CheckpointLocationError
        One line naming ``CheckpointConfig(path=...)`` and the reason.
    """
    try:
        if "://" in path:
            fs, root = pafs.FileSystem.from_uri(path)
        else:
            fs, root = pafs.LocalFileSystem(), os.path.abspath(path)
    except (pyarrow.ArrowException, ValueError, OSError) as err:
        raise CheckpointLocationError(_where(path, f"cannot open it: {_one_line(err)}")) from None
    root = root.rstrip("/") or root
    _probe(_impatient(fs, timeout), root, path, writable)
    return fs, root


def _impatient(fs: pafs.FileSystem, timeout: float) -> pafs.FileSystem:
    """``fs`` with one try and short timeouts, for the location check (S3 only)."""
    if not isinstance(fs, pafs.S3FileSystem):
        return fs
    # pyarrow's URI parser takes no timeouts: rebuild the filesystem from the options that
    # pickling uses (AWS's defaults retry a refused connection for seconds)
    rebuild, args = fs.__reduce__()
    options = dict(args[0], connect_timeout=timeout, request_timeout=timeout,
                   retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    try:
        return rebuild(options)
    except TypeError:  # a pyarrow whose options differ: check with its own patience
        return fs


def _probe(fs: pafs.FileSystem, root: str, path: str, writable: bool = True) -> None:
    """Raise unless ``root`` is a folder, or its nearest existing ancestor is one (we may
    write to, with ``writable``: the root is created later); a missing bucket has no such
    ancestor."""
    target = root
    try:
        while True:
            kind = fs.get_file_info(target).type
            if kind == pafs.FileType.Directory:
                break
            if kind == pafs.FileType.File:
                raise CheckpointLocationError(_where(path, f"{target} is a file, not a folder"))
            parent = posixpath.dirname(target)
            if parent in ("", target):
                raise CheckpointLocationError(_where(path, f"{target or '/'} does not exist"
                                                     " (an object store's bucket must be made"
                                                     " first)"))
            target = parent
    except OSError as err:
        raise CheckpointLocationError(_where(path, f"cannot reach it: {_one_line(err)}")) \
            from None
    if writable and isinstance(fs, pafs.LocalFileSystem):  # os.access says yes to root
        problem = location_problem(target, folder=True)
        if problem is not None:
            raise CheckpointLocationError(_where(path, problem))


def _where(path: str, reason: str) -> str:
    """The error line: the config's path, then the reason, with any secret key masked
    (``s3://key:secret@bucket``; pyarrow repeats the URI in its own messages)."""
    message = f"CheckpointConfig(path={path!r}): {reason}"
    secret = urllib.parse.urlsplit(path).password
    return message.replace(f":{secret}@", ":***@") if secret else message


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


# ---- what a root holds ----------------------------------------------------------------------
@dataclass(frozen=True)
class StepFolders:
    """The checkpoint folders under a root, as :func:`scan_steps` found them.

    Attributes
    ----------
    complete : list of (str, dict)
        Complete checkpoints, oldest first: the folder and its files' sizes (name -> bytes).
    stale : list of str
        Folders of saves that never finished, and ``.tmp-*`` folders of the old layout.
    legacy : bool
        True when the complete folders are of the layout before manifests (none has one).
    metrics : dict
        Complete folder -> the epoch record its manifest holds (epoch-end saves only).
    """

    complete: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    legacy: bool = False
    metrics: dict[str, dict] = field(default_factory=dict)

    @property
    def folders(self) -> list[str]:
        """The complete checkpoint folders, oldest first."""
        return [folder for folder, _ in self.complete]


def scan_steps(fs: pafs.FileSystem, root: str) -> StepFolders:
    """Sort the ``step-<n>`` folders under ``root`` into complete and stale ones (reads only).

    One recursive listing, plus one read per manifest; see the module docstring for what
    counts as complete.
    """
    root = root.rstrip("/") or root
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    sizes: dict[str, dict[str, int]] = {}
    stale: set[str] = set()
    for info in fs.get_file_info(selector):
        parts = info.path[len(root):].strip("/").split("/")
        if parts[0].startswith(_LEGACY_TMP):
            stale.add(posixpath.join(root, parts[0]))
        elif _step_of(parts[0]) is not None:
            files = sizes.setdefault(parts[0], {})
            if len(parts) == 2 and info.type == pafs.FileType.File:
                files[parts[1]] = info.size
    legacy = not any(_MANIFEST in files for files in sizes.values())
    complete, metrics = [], {}
    for name in sorted(sizes, key=_step_of):
        folder, files = posixpath.join(root, name), sizes[name]
        manifest = None if legacy else _complete_manifest(fs, folder, name, files)
        if _legacy_complete(files) if legacy else manifest is not None:
            complete.append((folder, files))
            if manifest is not None and isinstance(manifest.get("metrics"), dict):
                metrics[folder] = manifest["metrics"]
        else:
            stale.add(folder)
    return StepFolders(complete, sorted(stale), legacy and bool(complete), metrics)


def _step_of(name: str) -> int | None:
    digits = name[len(_PREFIX):]
    return int(digits) if name.startswith(_PREFIX) and digits.isdigit() else None


def _legacy_complete(files: dict[str, int]) -> bool:
    return all(files.get(name) for name in _REQUIRED)


def _complete_manifest(fs: pafs.FileSystem, folder: str, name: str,
                       files: dict[str, int]) -> dict | None:
    """The manifest when it names this step and every file it lists is there, that size;
    else None (the step is incomplete)."""
    if _MANIFEST not in files:
        return None
    # a store that fails to answer raises (OSError): only a manifest that is there but
    # unreadable makes a step incomplete, which would get it deleted
    with fs.open_input_stream(posixpath.join(folder, _MANIFEST)) as f:
        raw = f.read()
    try:
        manifest = json.loads(raw)
    except ValueError:
        return None
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    complete = (isinstance(listed, dict) and manifest.get("step") == _step_of(name)
                and all(n in listed for n in _REQUIRED)
                and all(files.get(n) == size for n, size in listed.items()))
    return manifest if complete else None


# ---- writing and reading --------------------------------------------------------------------
class FitCheckpointer:
    """Writes, finds and prunes the checkpoints of one :class:`CheckpointConfig`.

    Parameters
    ----------
    config : CheckpointConfig
        Where, how often, how many.

    Raises
    ------
    CheckpointLocationError
        When ``config.path`` cannot be opened, reached or created (checked here, so that
        ``fit`` fails before it trains).
    """

    def __init__(self, config: CheckpointConfig):
        self.config = config
        self.fs, self.root = open_location(config.path)
        self._local = isinstance(self.fs, pafs.LocalFileSystem)
        try:
            self.fs.create_dir(self.root, recursive=True)
        except OSError as err:
            raise CheckpointLocationError(_where(config.path, f"cannot create {self.root}: "
                                                 f"{_one_line(err)}")) from None

    def folder_for(self, step: int) -> str:
        """The folder a checkpoint of global step ``step`` is written to."""
        return posixpath.join(self.root, f"{_PREFIX}{int(step):010d}")

    def save(self, module: Any, position: dict, metrics: dict | None = None) -> str:
        """Write ``module``'s state at ``position`` into ``step-<n>``, then its manifest
        (holding ``metrics``, the epoch's record, when given); then delete stale folders and
        those :class:`CheckpointConfig` does not keep. Returns the folder.

        Raises
        ------
        CheckpointError
            When the store fails; the complete checkpoints already there stay usable.
        """
        payloads = self._payloads(module, position)
        step = int(position["step"])
        folder = self.folder_for(step)
        with self._failing(f"cannot write {folder}"):
            found = scan_steps(self.fs, self.root)
            if found.legacy:  # pre-manifest folders were complete; keep them countable
                for old, files in found.complete:
                    self._write_manifest(old, _step_of(posixpath.basename(old)), files)
            if folder in found.stale or folder in found.folders:
                self.fs.delete_dir(folder)
            self.fs.create_dir(folder)
            self._sync_dir(self.root)
            for name, payload in payloads.items():
                self._write(folder, name, payload)
            self._sync_dir(folder)  # the files are durable before a manifest vouches for them
            self._write_manifest(folder, step, {n: len(p) for n, p in payloads.items()},
                                 metrics)
            self._prune()
        return folder

    def list(self) -> list[str]:
        """Complete checkpoint folders, oldest first (reads only)."""
        with self._failing("cannot list the checkpoints"):
            return scan_steps(self.fs, self.root).folders

    def kept(self) -> list[tuple[str, dict]]:
        """Complete checkpoint folders, oldest first, each with the epoch record its manifest
        holds (``{}`` for a checkpoint written mid-epoch) (reads only)."""
        with self._failing("cannot list the checkpoints"):
            found = scan_steps(self.fs, self.root)
        return [(folder, dict(found.metrics.get(folder, {}))) for folder in found.folders]

    def load_latest(self) -> dict | None:
        """The newest complete checkpoint, after deleting stale folders and all but the
        newest ``keep``: ``folder``, ``symbol``, ``arg_params``, ``aux_params``, ``states``
        (bytes or None), ``extra`` (the module's other arrays, or None) and ``position``;
        None when there is none."""
        with self._failing("cannot read the checkpoints"):
            kept = self._prune()
            if not kept:
                return None
            folder, files = kept[-1]
            saved = load_frombuffer(self._read(folder, "model-0000.params"))
            return {"folder": folder,
                    "symbol": load_json(self._read(folder, "model-symbol.json").decode()),
                    "arg_params": {k[4:]: v for k, v in saved.items() if k.startswith("arg:")},
                    "aux_params": {k[4:]: v for k, v in saved.items() if k.startswith("aux:")},
                    "states": self._read(folder, _STATES) if _STATES in files else None,
                    "extra": load_frombuffer(self._read(folder, _EXTRA)) if _EXTRA in files
                    else None,
                    "position": json.loads(self._read(folder, "position.json"))}

    # ---- helpers ----------------------------------------------------------------------------
    def _payloads(self, module: Any, position: dict) -> dict[str, bytes]:
        """The step's files, in the order they are written (the position last)."""
        arg_params, aux_params = module.get_params()
        params = {f"arg:{k}": v for k, v in arg_params.items()}
        params.update({f"aux:{k}": v for k, v in aux_params.items()})
        position = dict(position, random=_random._state["rng"].bit_generator.state)
        payloads = {"model-symbol.json": module.symbol.tojson().encode(),
                    "model-0000.params": dumps(params)}
        if module.optimizer_initialized:
            payloads[_STATES] = module._optimizer_states()
        extra = module._fit_state_arrays()
        if extra:
            payloads[_EXTRA] = dumps(extra)
        payloads["position.json"] = json.dumps(position, default=_plain).encode()
        return payloads

    def _prune(self) -> list[tuple[str, dict[str, int]]]:
        """Delete stale folders and the complete checkpoints not kept (see
        :func:`kept_folders`); the kept ones, oldest first."""
        found = scan_steps(self.fs, self.root)
        keep = kept_folders(found.folders, found.metrics, self.config)
        for folder in found.stale + [f for f in found.folders if f not in keep]:
            self.fs.delete_dir(folder)
        return [(folder, files) for folder, files in found.complete if folder in keep]

    def _write(self, folder: str, name: str, payload: bytes) -> None:
        """Write one file of a step (fsynced on a local disk)."""
        path = posixpath.join(folder, name)
        if self._local:  # pyarrow's local output streams cannot fsync
            with open(path, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
        else:
            with self.fs.open_output_stream(path) as f:
                f.write(payload)

    def _write_manifest(self, folder: str, step: int, files: dict[str, int],
                        metrics: dict | None = None) -> None:
        """Mark ``folder`` complete: the manifest appears whole or not at all."""
        manifest: dict[str, Any] = {"format": _FORMAT, "step": step, "files": files}
        if metrics is not None:
            manifest["metrics"] = json_record(metrics)
        body = json.dumps(manifest, sort_keys=True, default=_plain).encode()
        if not self._local:  # one PUT is atomic on an object store
            self._write(folder, _MANIFEST, body)
            return
        temporary = f"{_MANIFEST}.{uuid.uuid4().hex}.tmp"
        self._write(folder, temporary, body)
        os.replace(posixpath.join(folder, temporary), posixpath.join(folder, _MANIFEST))
        self._sync_dir(folder)

    def _sync_dir(self, folder: str) -> None:
        """fsync a local folder, so that the names in it survive a power loss."""
        if not self._local:
            return
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _read(self, folder: str, name: str) -> bytes:
        with self.fs.open_input_stream(posixpath.join(folder, name)) as f:
            return f.read()

    @contextlib.contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """Turn a store's OSError into one CheckpointError line."""
        try:
            yield
        except OSError as err:
            raise CheckpointError(_where(self.config.path, f"{what}: {_one_line(err)}")) \
                from err


def kept_folders(folders: list[str], metrics: dict[str, dict],
                 config: CheckpointConfig) -> set[str]:
    """Which of the complete ``folders`` (oldest first) a save or resume keeps.

    Without ``config.score``: the newest ``config.keep``. With it: the newest, plus the
    ``keep`` whose epoch record (``metrics[folder]``) scores best; the older of two equal
    scores ranks first, as :meth:`FitResult.get_best_checkpoint` picks it.
    """
    if not folders:
        return set()
    if config.score is None:
        return set(folders[-config.keep:])
    sign = -1.0 if config.score_mode == "max" else 1.0
    scored = [(sign * value, i, folder) for i, folder in enumerate(folders)
              for value in [score_value(metrics.get(folder, {}), config.score)]
              if value is not None]
    best = [folder for _, _, folder in sorted(scored)[:config.keep]]
    return set(best) | {folders[-1]}


def json_record(record: dict) -> dict:
    """An epoch record as strict JSON takes it: numpy scalars as numbers, NaN and the
    infinities as None."""
    out = {}
    for key, value in record.items():
        value = _plain(value) if isinstance(value, (np.generic, np.ndarray)) else value
        out[key] = None if isinstance(value, float) and not np.isfinite(value) else value
    return out


def restore_random(position: dict) -> None:
    """Put ``rm.random``'s generator back where the checkpoint found it."""
    if "random" in position:
        _random._state["rng"].bit_generator.state = position["random"]


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and arrays inside a position or a manifest."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} into a checkpoint position")
