"""Seedable random sources: ``rm.random.seed(s)`` makes two runs identical.

Every random draw raymod makes (initializers, Dropout masks, iterator shuffles) comes from
:func:`generator`, so one call to :func:`seed` fixes them all.
"""
from __future__ import annotations

import contextlib
import types
from typing import Iterator

import numpy as np

_state = {"seed": None, "rng": np.random.default_rng(), "device_rngs": {}}


def seed(seed_state: int, ctx: str = "all") -> None:
    """Seed every random source raymod uses.

    Parameters
    ----------
    seed_state : int
        The seed. The same seed gives the same initial weights, dropout masks and shuffles.
    ctx : str, default 'all'
        Accepted for MXNet compatibility; raymod always seeds every device.
    """
    if not isinstance(seed_state, (int, np.integer)) or isinstance(seed_state, bool):
        raise TypeError(f"seed_state must be an int, got {type(seed_state).__name__}")
    _state["seed"] = int(seed_state)
    _state["rng"] = np.random.default_rng(int(seed_state))
    _state["device_rngs"] = {}


def generator() -> np.random.Generator:
    """The host generator that every CPU-side random draw uses."""
    return _state["rng"]


@contextlib.contextmanager
def drawing_from(rng: np.random.Generator) -> Iterator[None]:
    """Within it, every host draw comes from ``rng`` (a table's block of rows has its own
    generator, see :class:`raymod.sparse.table_init.TableInit`); the previous one is back after."""
    previous = _state["rng"]
    _state["rng"] = rng
    try:
        yield
    finally:
        _state["rng"] = previous


def device_generator(xp: types.ModuleType):
    """A generator on the array module ``xp`` (numpy's is the host one).

    For CuPy the generator is seeded from the host generator, so it follows ``seed`` too.
    """
    if xp is np:
        return _state["rng"]
    key = id(xp)
    rng = _state["device_rngs"].get(key)
    if rng is None:
        rng = xp.random.default_rng(int(_state["rng"].integers(2**63 - 1)))
        _state["device_rngs"][key] = rng
    return rng


def uniform(low: float = 0.0, high: float = 1.0, shape=(1,), dtype="float32") -> np.ndarray:
    """Samples from U[low, high) drawn from raymod's generator."""
    return generator().uniform(low, high, size=shape).astype(dtype)


def normal(loc: float = 0.0, scale: float = 1.0, shape=(1,), dtype="float32") -> np.ndarray:
    """Samples from N(loc, scale^2) drawn from raymod's generator."""
    return generator().normal(loc, scale, size=shape).astype(dtype)
