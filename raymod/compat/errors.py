"""The error raised for MXNet features the compatibility layer does not provide."""
from __future__ import annotations

from ..base import MXNetError


class NotSupportedError(MXNetError, NotImplementedError):
    """An MXNet feature (sparse storage, Gluon, autograd, ...) that raymod does not provide."""


def not_supported(call: str, feature: str) -> NotSupportedError:
    """The error for ``call``, which needs ``feature``."""
    return NotSupportedError(
        f"{call}: {feature} is not supported by raymod's MXNet compatibility layer "
        "(raymod provides the symbolic Module API on dense arrays; see docs/compat.md)")
