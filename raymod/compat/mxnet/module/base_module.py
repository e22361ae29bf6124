"""``mxnet.module.base_module``: ``BaseModule`` and the input-checking helpers MXNet's module
classes (and modules written against them) import from here."""
from __future__ import annotations

import warnings
from typing import Any, Sequence

from ....module.base_module import _as_list, _check_input_names, _parse_data_desc
from . import BaseModule

__all__ = ["BaseModule", "_check_input_names", "_check_names_match", "_parse_data_desc",
           "_as_list"]


def _check_names_match(data_names: Sequence[str], data_shapes: Sequence[Any], name: str,
                       throw: bool) -> None:
    """Check that the descriptors ``data_shapes`` name exactly ``data_names``.

    Parameters
    ----------
    data_names : sequence of str
        The names the module expects (its ``data_names`` or ``label_names``).
    data_shapes : sequence of DataDesc or (name, shape)
        The descriptors given, e.g. an iterator's ``provide_data``.
    name : str
        What is checked, ``'data'`` or ``'label'``; it names the arguments in the message.
    throw : bool
        Raise on a mismatch; otherwise only warn.

    Raises
    ------
    ValueError
        On a mismatch, when ``throw``.
    """
    given = [desc[0] for desc in data_shapes]
    if sorted(given) == sorted(data_names):
        return
    msg = (f"{name}_shapes provide {given} but {name}_names are {list(data_names)} "
           f"({name}_shapes: {list(data_shapes)})")
    if throw:
        raise ValueError(msg)
    warnings.warn(msg, stacklevel=2)
