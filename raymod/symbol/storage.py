"""A variable's declared storage type (``Variable(..., stype=)``), in MXNet's attribute codes.

What the executor makes of storage through a graph is :mod:`raymod.sparse.plan`.
"""
from __future__ import annotations

from typing import Any

from ..sparse.storage import STYPES, check_stype

# MXNet's codes for the ``__storage_type__`` attribute of a variable
STYPE_CODES = {"default": 0, "row_sparse": 1, "csr": 2}
STYPE_OF_CODE = {str(v): k for k, v in STYPE_CODES.items()}

__all__ = ["STYPES", "STYPE_CODES", "check_stype", "variable_stype"]


def variable_stype(node: Any) -> str:
    """The storage a variable node declares (``stype=`` in :func:`Variable`), else dense."""
    code = node.attrs.get("__storage_type__")
    if code is None:
        return "default"
    return STYPE_OF_CODE.get(str(code), "default") if str(code) != "-1" else "default"
