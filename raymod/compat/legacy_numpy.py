"""The numpy names MXNet 1.x scripts use that newer numpy removed, back for ``raymod run``.

MXNet 1.9.1 pins ``numpy<1.24``; its examples and users' scripts call ``np.int``,
``np.float``, ``np.bool``, ``np.object``, ``np.str`` (aliases of the builtins, removed in numpy
1.24) and ``np.fromstring(bytes, dtype)`` (binary mode, removed in numpy 2.3). raymod runs on
current numpy, so the runner puts these back, with their old meaning, for the script's
process only. Nothing changes where numpy still has them.
"""
from __future__ import annotations

import builtins
import functools
import warnings
from typing import Any

import numpy as np

__all__ = ["install", "uninstall"]

_ALIASES = ("int", "float", "bool", "object", "str", "complex")
_added: list[str] = []
_original_fromstring = np.fromstring


def _has(name: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns on the names it plans to bring back
        try:
            getattr(np, name)
        except AttributeError:
            return False
    return True


@functools.wraps(_original_fromstring)
def _fromstring(string: Any, dtype: Any = float, count: int = -1, *, sep: str = "",
                **kwargs: Any) -> np.ndarray:
    if sep == "" and isinstance(string, (bytes, bytearray, memoryview)):
        # the removed binary mode: a writable copy of the bytes, as numpy<2.3 gave
        return np.frombuffer(string, dtype=dtype, count=count).copy()
    return _original_fromstring(string, dtype=dtype, count=count, sep=sep, **kwargs)


def install() -> None:
    """Add the removed aliases and the binary ``fromstring`` (where numpy lacks them)."""
    for name in _ALIASES:
        if not _has(name):
            setattr(np, name, getattr(builtins, name))
            _added.append(name)
    if np.fromstring is _original_fromstring and not _binary_fromstring_works():
        np.fromstring = _fromstring
        _added.append("fromstring")


def uninstall() -> None:
    """Take back what :func:`install` added."""
    while _added:
        name = _added.pop()
        if name == "fromstring":
            np.fromstring = _original_fromstring
        else:
            delattr(np, name)


def _binary_fromstring_works() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy 1.14-2.2 warn that the mode is deprecated
        try:
            _original_fromstring(b"\x00\x00\x00\x00", dtype=np.uint8)
        except (ValueError, TypeError):
            return False
    return True
