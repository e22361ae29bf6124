"""The error raised for MXNet features the compatibility layer does not provide."""
from __future__ import annotations

import types

from ..base import MXNetError


class NotSupportedError(MXNetError, NotImplementedError):
    """An MXNet feature (sparse storage, Gluon, autograd, ...) that raymod does not provide."""


def not_supported(call: str, feature: str) -> NotSupportedError:
    """The error for ``call``, which needs ``feature``."""
    return NotSupportedError(
        f"{call}: {feature} is not supported by raymod's MXNet compatibility layer "
        "(raymod provides the symbolic Module API on dense arrays; see docs/compat.md)")


class Unsupported(types.ModuleType):
    """A stand-in module for a left-out MXNet feature (``mx.gluon``, ``mx.autograd``, ...).

    Importing it works, so that scripts which import it without using it run; using any of
    its names raises :class:`NotSupportedError` naming the call, e.g. ``mx.gluon.nn``.
    """

    def __init__(self, name: str, feature: str):
        super().__init__(name, f"Not supported by raymod: {feature}.")
        self._feature = feature
        self.__path__: list = []  # a package, so `import mxnet.gluon.nn` reaches our finder

    def __getattr__(self, attr: str) -> None:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise not_supported(f"{self.__name__}.{attr}", self._feature)
