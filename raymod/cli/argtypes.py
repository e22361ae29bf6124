"""argparse types shared by the ``raymod`` command and the jobs: a bad value becomes
``argument --x: <message>`` and exit status 2."""
from __future__ import annotations

import argparse
import math

__all__ = ["positive_int", "nonnegative_int", "positive_float", "fraction",
           "checkpoint_location"]


def _number(text: str, kind: type, what: str) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def positive_int(text: str) -> int:
    """An int >= 1."""
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def nonnegative_int(text: str) -> int:
    """An int >= 0 (e.g. an epoch number)."""
    value = _number(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0."""
    value = _number(text, float, "a number")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def fraction(text: str) -> float:
    """A float in [0, 1]."""
    value = _number(text, float, "a number")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def checkpoint_location(text: str) -> str:
    """A folder or ``pyarrow.fs`` URI for ``fit`` checkpoints that can be opened and reached
    now (an object store gets a few seconds to answer); returned as given."""
    from ..module.fit_checkpoint import CheckpointLocationError, open_location

    try:
        open_location(text)
    except CheckpointLocationError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text
