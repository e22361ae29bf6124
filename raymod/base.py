"""Errors and small helpers shared by every layer of raymod."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable


class MXNetError(RuntimeError):
    """Error raised where MXNet 1.x raised ``mxnet.base.MXNetError``.

    Kept under MXNet's name so that ported ``except MXNetError`` clauses keep working.
    """


class ShapeError(MXNetError, ValueError):
    """A shape given or inferred for an operator input does not fit."""


class AttributeValueError(MXNetError, ValueError):
    """An operator attribute is unknown or has a value the operator cannot take."""


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
