"""``mx.base``: MXNet's error class and the small helpers scripts import from it."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...base import MXNetError
from ..sparse import NotSupportedForSparseNDArray

__all__ = ["MXNetError", "NotSupportedForSparseNDArray", "string_types", "numeric_types",
           "integer_types", "mx_real_t", "py_str"]

string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)
mx_real_t = np.float32  # MXNet's default element type


def py_str(value: bytes | str) -> str:
    """``value`` as text (bytes are UTF-8)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _as_list(obj: Any) -> list:
    """``obj`` itself when it is a list or tuple, else ``[obj]``."""
    return obj if isinstance(obj, (list, tuple)) else [obj]
