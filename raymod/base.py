"""Errors and small helpers shared by every layer of raymod."""
from __future__ import annotations

import logging
import math
import numbers
import os
import tempfile
from typing import Any, Callable

import numpy as np


class MXNetError(RuntimeError):
    """Error raised where MXNet 1.x raised ``mxnet.base.MXNetError``.

    Kept under MXNet's name so that ported ``except MXNetError`` clauses keep working.
    """


class ShapeError(MXNetError, ValueError):
    """A shape given or inferred for an operator input does not fit."""


class AttributeValueError(MXNetError, ValueError):
    """An operator attribute is unknown or has a value the operator cannot take."""


def as_logger(logger: Any) -> Any:
    """``logger``, with the ``logging`` module itself (MXNet's default ``logger=logging``)
    taken as the root Logger: the module's functions would configure the root logger on
    first use (an implicit ``logging.basicConfig()`` at WARNING), after which a script's own
    ``logging.basicConfig(level=logging.INFO)`` does nothing."""
    return logging.getLogger() if logger is logging else logger


def names_list(names) -> str:
    """Format a collection of names for an error message, sorted."""
    return ", ".join(repr(n) for n in sorted(names))


def bytes_via_file(write: Callable[[str], Any]) -> bytes:
    """The bytes ``write(path)`` puts in a temporary file (for APIs that only write files)."""
    with tempfile.TemporaryDirectory() as tmp:
        fname = os.path.join(tmp, "payload")
        write(fname)
        with open(fname, "rb") as f:
            return f.read()


def file_from_bytes(blob: bytes, read: Callable[[str], Any]) -> None:
    """Call ``read(path)`` on a temporary file holding ``blob`` (for APIs that only read files)."""
    with tempfile.TemporaryDirectory() as tmp:
        fname = os.path.join(tmp, "payload")
        with open(fname, "wb") as f:
            f.write(blob)
        read(fname)


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """The range ``[low, high)`` and friends in words: ``'>= 0'``, ``'> 0'``, ``'in [0, 1)'``."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def check_real(owner: str, name: str, value: Any, low: float | None = None,
               high: float | None = None, *, low_open: bool = False, high_open: bool = False,
               none_ok: bool = False) -> None:
    """Raise unless ``value`` is a finite real number in the given range (or None if allowed).

    TypeError for something that is not a number (bools and strings included), ValueError
    for NaN, an infinity or a value out of range; the message reads
    ``"<owner>: <name> must be a finite number >= 0, got -1"``.
    """
    if value is None and none_ok:
        return
    expected = " ".join(filter(None, ["a finite number",
                                      _interval(low, high, low_open, high_open)]))
    expected += " or None" if none_ok else ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be {expected}, got {type(value).__name__} "
                        f"{value!r}")
    bad = (not math.isfinite(value)
           or (low is not None and (value <= low if low_open else value < low))
           or (high is not None and (value >= high if high_open else value > high)))
    if bad:
        raise ValueError(f"{owner}: {name} must be {expected}, got {value!r}")


def check_int(owner: str, name: str, value: Any, low: int | None = None) -> None:
    """Raise unless ``value`` is an int (not a bool) ``>= low``; message as :func:`check_real`."""
    expected = "an int" + (f" >= {low}" if low is not None else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be {expected}, got {type(value).__name__} "
                        f"{value!r}")
    if low is not None and value < low:
        raise ValueError(f"{owner}: {name} must be {expected}, got {value!r}")


#: dtype kinds an operator can compute on: bool, signed and unsigned int, float
NUMERIC_KINDS = "biuf"
_KIND_NAMES = {"O": "Python objects", "U": "str", "S": "bytes", "c": "complex",
               "M": "datetime", "m": "timedelta", "V": "raw void"}


def check_input_dtype(what: str, name: str, dtype: Any) -> None:
    """Raise TypeError unless ``dtype`` is one operators compute on (bool, int, uint, float).

    ``what`` says which input it is (``'data'``, ``'label'``); strings, objects, complex
    numbers and dates are refused before they reach an operator.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(f"{what} input {name!r} has dtype {dtype!r}, which is not a numpy "
                        f"dtype ({err}); expected a bool, int, uint or float dtype") from None
    if dt.kind not in NUMERIC_KINDS:
        kind = _KIND_NAMES.get(dt.kind, dt.kind)
        raise TypeError(f"{what} input {name!r} has dtype {dt} ({kind}), which no operator "
                        "can compute on; expected a bool, int, uint or float dtype (convert "
                        "it first, e.g. np.asarray(x, dtype=np.float32))")
