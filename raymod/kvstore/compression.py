"""2-bit gradient compression with error feedback, as ``kv.set_gradient_compression``.

Each pushed gradient is added to a residual kept per (key, device slot). Where the residual
reaches ``+threshold`` the sent value is ``+threshold``, where it reaches ``-threshold`` it is
``-threshold``, elsewhere 0; the residual keeps what was not sent, so small gradients add up
over pushes until they cross the threshold. Values given to ``init`` are never compressed.

On the wire a value takes 2 bits (:func:`quantize_2bit` / :func:`dequantize_2bit`, four values
a byte); in one process the store only needs the decompressed result (:meth:`compress`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError
from ..context import context_of
from ..optimizer import get_array_module

__all__ = ["GradientCompression", "quantize_2bit", "dequantize_2bit"]

_TYPES = ("2bit", "none")
# 2-bit codes: 0 -> 0, 1 -> +threshold, 2 -> -threshold; four codes per byte, first lowest
_SHIFTS = (0, 2, 4, 6)


class GradientCompressionError(MXNetError, ValueError):
    """``compression_params`` with an unknown type, an unknown key or a bad threshold."""


def _sent(residual: Any, grad: Any, threshold: float) -> Any:
    """Add ``grad`` into ``residual``; return the values sent (+/-threshold or 0), removed
    from ``residual``."""
    residual += grad
    sent = (residual >= threshold).astype(residual.dtype)
    sent -= residual <= -threshold
    sent *= threshold
    residual -= sent
    return sent


def quantize_2bit(grad: Any, residual: Any, threshold: float) -> Any:
    """Compress ``grad`` to 2-bit codes, updating ``residual`` in place.

    Parameters
    ----------
    grad : ndarray
        The gradient (numpy or cupy); not modified.
    residual : ndarray
        What earlier pushes did not send, same shape and device as ``grad``.
    threshold : float
        The positive magnitude a code stands for.

    Returns
    -------
    ndarray of uint8
        ``ceil(grad.size / 4)`` bytes, four codes each, on ``grad``'s device.
    """
    xp = get_array_module(grad)
    sent = _sent(residual, grad, threshold).ravel()
    codes = (sent > 0).astype(np.uint8)
    codes += (sent < 0).astype(np.uint8) * np.uint8(2)
    pad = (-codes.size) % 4
    if pad:
        codes = xp.concatenate([codes, xp.zeros(pad, np.uint8)])
    codes = codes.reshape(-1, 4)
    packed = codes[:, 0].copy()
    for j in (1, 2, 3):
        packed |= codes[:, j] << np.uint8(_SHIFTS[j])
    return packed


def dequantize_2bit(packed: Any, shape: tuple, threshold: float, dtype: Any = np.float32,
                    out: Any = None) -> Any:
    """Expand 2-bit codes from :func:`quantize_2bit` to values in ``{-threshold, 0, threshold}``.

    Parameters
    ----------
    packed : ndarray of uint8
        The codes.
    shape : tuple of int
        The gradient's shape.
    threshold : float
        The magnitude a code stands for.
    dtype : dtype, default float32
        The result's dtype (ignored when ``out`` is given).
    out : ndarray, optional
        Where to write the values.

    Returns
    -------
    ndarray
        The decompressed gradient, on ``packed``'s device.
    """
    xp = get_array_module(packed)
    size = int(np.prod(shape, dtype=np.int64))
    codes = (packed[:, None] >> xp.asarray(_SHIFTS, dtype=np.uint8)) & np.uint8(3)
    codes = codes.ravel()[:size].reshape(shape)
    values = (codes == 1).astype(dtype if out is None else out.dtype)
    values -= codes == 2
    values *= threshold
    if out is None:
        return values
    out[...] = values
    return out


class GradientCompression:
    """The compression settings of a store and the residuals of its pushes.

    Parameters
    ----------
    type : {'2bit'}
        The compression scheme.
    threshold : float, default 0.5
        Magnitude of a sent value; must be positive.
    """

    def __init__(self, type: str = "2bit", threshold: float = 0.5):
        if type != "2bit":
            raise GradientCompressionError(f"unknown gradient compression type {type!r}; "
                                           f"known types: {', '.join(_TYPES)}")
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise GradientCompressionError("gradient compression threshold must be a number, "
                                           f"got {threshold!r}") from None
        if not threshold > 0:
            raise GradientCompressionError("gradient compression threshold must be greater "
                                           f"than 0, got {threshold}")
        self.type = type
        self.threshold = threshold
        self._residuals: dict = {}

    @classmethod
    def from_params(cls, compression_params: dict) -> "GradientCompression | None":
        """Settings from MXNet's ``compression_params`` dict; None for ``{'type': 'none'}``.

        Parameters
        ----------
        compression_params : dict
            ``'type'`` (required: ``'2bit'`` or ``'none'``) and, for 2bit, ``'threshold'``.

        Returns
        -------
        GradientCompression or None
            None when compression is turned off.
        """
        if not isinstance(compression_params, dict):
            raise TypeError("compression_params must be a dict such as "
                            "{'type': '2bit', 'threshold': 0.5}, got "
                            f"{type(compression_params).__name__}")
        params = dict(compression_params)
        if "type" not in params:
            raise GradientCompressionError("compression_params needs a 'type' "
                                           f"({' or '.join(map(repr, _TYPES))})")
        kind = params.pop("type")
        extra = set(params) - {"threshold"}
        if extra:
            raise GradientCompressionError("unknown gradient compression parameter(s) "
                                           f"{', '.join(sorted(map(repr, extra)))}; known: "
                                           "'type', 'threshold'")
        if kind == "none":
            return None
        return cls(kind, **params)

    def get_params(self) -> dict:
        """The settings as a ``compression_params`` dict."""
        return {"type": self.type, "threshold": self.threshold}

    def residual(self, key: Any, slot: int, grad: Any) -> Any:
        """The residual of ``key`` pushed from device slot ``slot`` (zeros at first)."""
        res = self._residuals.get((key, slot))
        if res is None or res.shape != grad.shape or context_of(res) != context_of(grad):
            with context_of(grad).scope():
                res = get_array_module(grad).zeros_like(grad)
            self._residuals[(key, slot)] = res
        return res

    def compress(self, key: Any, slot: int, grad: Any) -> Any:
        """What the receiver decompresses for this push: quantise then dequantise, fused.

        Parameters
        ----------
        key : int or str
            The pushed key.
        slot : int
            Which of the key's pushed values this is (one residual per device).
        grad : ndarray
            The gradient; not modified.

        Returns
        -------
        ndarray
            A new array of ``+threshold``, ``-threshold`` and 0 on ``grad``'s device.
        """
        residual = self.residual(key, slot, grad)
        with context_of(grad).scope():
            return _sent(residual, grad, self.threshold)

    def quantize(self, key: Any, slot: int, grad: Any) -> Any:
        """2-bit codes for this push (see :func:`quantize_2bit`), updating the residual."""
        residual = self.residual(key, slot, grad)
        with context_of(grad).scope():
            return quantize_2bit(grad, residual, self.threshold)

    def dequantize(self, packed: Any, shape: tuple, dtype: Any = np.float32,
                   out: Any = None) -> Any:
        """Values from :meth:`quantize`'s codes (see :func:`dequantize_2bit`)."""
        return dequantize_2bit(packed, shape, self.threshold, dtype, out)

    def reset(self) -> None:
        """Forget every residual."""
        self._residuals.clear()

    def __repr__(self) -> str:
        return f"GradientCompression(type={self.type!r}, threshold={self.threshold})"
