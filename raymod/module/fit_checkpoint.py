"""Checkpoints that let ``fit`` survive the loss of the driver: ``fit(checkpoint=..., resume=True)``.

A checkpoint is a folder ``step-<n>`` under the configured path or ``pyarrow.fs`` URI:

- ``model-symbol.json``, ``model-0000.params`` (MXNet's layout: ``Module.load`` and MXNet 1.x
  read it), ``model-0000.states`` (optimizer states, wherever the optimizer ran);
- ``position.json``: epoch, batches done in it, the global step, the iterator's sampler
  position, the state of ``rm.random``'s generator, the bucket keys seen and the worker
  membership log;
- ``fit-state.params`` when the module keeps more training state than its parameters
  (SVRGModule: the snapshot weights and the full gradient), in the same NDArray format.

It is written to a temporary folder and renamed, so a driver killed while writing leaves the
previous checkpoint intact; only the newest ``keep`` are kept. Nothing in it is pickled.
"""
from __future__ import annotations

import json
import os
import posixpath
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.fs as pafs

from .. import random as _random
from ..ndarray_io import dumps, load_frombuffer
from ..symbol import load_json

__all__ = ["CheckpointConfig", "FitCheckpointer"]

_PREFIX = "step-"
_EXTRA = "fit-state.params"


@dataclass(frozen=True)
class CheckpointConfig:
    """Where and how often ``fit`` writes resumable checkpoints.

    Parameters
    ----------
    path : str
        A local folder or a ``pyarrow.fs`` URI (``file:///...``, ``s3://bucket/run``, ...).
    every_n_steps : int, optional
        Also write one every this many training steps.
    every_n_epochs : int, optional, default 1
        Write one at the end of every this many epochs.
    keep : int, default 3
        How many of the newest checkpoints to keep.

    Examples
    --------
    >>> mod.fit(train, num_epoch=10, checkpoint=rm.CheckpointConfig("runs/mlp",
    ...         every_n_steps=100), resume=True)
    """

    path: str
    every_n_steps: int | None = None
    every_n_epochs: int | None = 1
    keep: int = 3

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


def _filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(path)


class FitCheckpointer:
    """Writes and finds the checkpoints of one :class:`CheckpointConfig`."""

    def __init__(self, config: CheckpointConfig):
        self.config = config
        self.fs, self.root = _filesystem(config.path)
        self.fs.create_dir(self.root, recursive=True)

    def _write(self, folder: str, name: str, payload: bytes) -> None:
        with self.fs.open_output_stream(posixpath.join(folder, name)) as f:
            f.write(payload)

    def _read(self, folder: str, name: str) -> bytes:
        with self.fs.open_input_stream(posixpath.join(folder, name)) as f:
            return f.read()

    def save(self, module: Any, position: dict) -> str:
        """Write ``module``'s state at ``position``; returns the checkpoint folder."""
        arg_params, aux_params = module.get_params()
        params = {f"arg:{k}": v for k, v in arg_params.items()}
        params.update({f"aux:{k}": v for k, v in aux_params.items()})
        position = dict(position, random=_random._state["rng"].bit_generator.state)
        final = posixpath.join(self.root, f"{_PREFIX}{position['step']:010d}")
        tmp = posixpath.join(self.root, f".tmp-{uuid.uuid4().hex}")
        self.fs.create_dir(tmp)
        self._write(tmp, "model-symbol.json", module.symbol.tojson().encode())
        self._write(tmp, "model-0000.params", dumps(params))
        if module.optimizer_initialized:
            self._write(tmp, "model-0000.states", module._optimizer_states())
        extra = module._fit_state_arrays()
        if extra:
            self._write(tmp, _EXTRA, dumps(extra))
        self._write(tmp, "position.json", json.dumps(position, default=_plain).encode())
        if self.fs.get_file_info(final).type != pafs.FileType.NotFound:
            self.fs.delete_dir(final)
        self.fs.move(tmp, final)
        for old in self.list()[:-self.config.keep]:
            self.fs.delete_dir(old)
        return final

    def list(self) -> list[str]:
        """Complete checkpoint folders, oldest first."""
        infos = self.fs.get_file_info(pafs.FileSelector(self.root))
        return sorted(i.path for i in infos if i.type == pafs.FileType.Directory
                      and i.base_name.startswith(_PREFIX))

    def load_latest(self) -> dict | None:
        """The newest checkpoint: ``symbol``, ``arg_params``, ``aux_params``, ``states``
        (bytes or None), ``extra`` (the module's other arrays, or None) and ``position``;
        None when there is none."""
        folders = self.list()
        if not folders:
            return None
        folder = folders[-1]
        saved = load_frombuffer(self._read(folder, "model-0000.params"))
        states_path = posixpath.join(folder, "model-0000.states")
        has_states = self.fs.get_file_info(states_path).type == pafs.FileType.File
        has_extra = (self.fs.get_file_info(posixpath.join(folder, _EXTRA)).type
                     == pafs.FileType.File)
        return {"folder": folder,
                "symbol": load_json(self._read(folder, "model-symbol.json").decode()),
                "arg_params": {k[4:]: v for k, v in saved.items() if k.startswith("arg:")},
                "aux_params": {k[4:]: v for k, v in saved.items() if k.startswith("aux:")},
                "states": self._read(folder, "model-0000.states") if has_states else None,
                "extra": load_frombuffer(self._read(folder, _EXTRA)) if has_extra else None,
                "position": json.loads(self._read(folder, "position.json"))}


def restore_random(position: dict) -> None:
    """Put ``rm.random``'s generator back where the checkpoint found it."""
    if "random" in position:
        _random._state["rng"].bit_generator.state = position["random"]


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and arrays inside a position."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} into a checkpoint position")
