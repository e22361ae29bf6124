"""The error raised for MXNet features the compatibility layer does not provide."""
from __future__ import annotations

import types

from ..base import MXNetError


class NotSupportedError(MXNetError, NotImplementedError):
    """An MXNet feature (Gluon, autograd, ...) that raymod does not provide."""


def not_supported(call: str, feature: str) -> NotSupportedError:
    """The error for ``call``, which needs ``feature``."""
    return NotSupportedError(
        f"{call}: {feature} is not supported by raymod's MXNet compatibility layer "
        "(raymod provides the symbolic Module API on dense arrays; see docs/compat.md)")


class UnsupportedAttributeError(NotSupportedError, AttributeError):
    """A name of a stand-in module (:class:`Unsupported`) was used.

    Also an ``AttributeError``, so that ``hasattr`` and ``from mxnet.X import Y`` read it as
    a missing name: ``from`` then imports ``mxnet.X.Y`` as a submodule, which the runner's
    finder answers with another stand-in (``from mxnet.contrib.amp import amp`` works).
    """


class Unsupported(types.ModuleType):
    """A stand-in module for a left-out MXNet feature (``mx.gluon``, ``mx.autograd``, ...).

    Importing it works, so that scripts which import it without using it run; using any of
    its names (or calling it) raises :class:`NotSupportedError` naming the call, e.g.
    ``mxnet.gluon.nn``.

    Parameters
    ----------
    name : str
        The module's MXNet name, e.g. ``'mxnet.gluon'``.
    feature : str
        What is left out, for the messages, e.g. ``'Gluon (mx.gluon)'``.
    provided : dict, optional
        The few names of the feature that are provided (``mx.gluon.utils``): name -> object.
    """

    def __init__(self, name: str, feature: str, provided: dict | None = None):
        super().__init__(name, f"Not supported by raymod: {feature}.")
        self._feature = feature
        self.__path__: list = []  # a package, so `import mxnet.gluon.nn` reaches our finder
        for attr, value in (provided or {}).items():
            setattr(self, attr, value)

    def __getattr__(self, attr: str) -> None:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise UnsupportedAttributeError(
            str(not_supported(f"{self.__name__}.{attr}", self._feature)))

    def __call__(self, *args, **kwargs) -> None:
        # `from mxnet.X import some_function` may bind a stand-in: calling it names it too
        raise not_supported(f"{self.__name__}(...)", self._feature)
