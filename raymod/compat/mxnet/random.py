"""``mx.random``: raymod's seeding plus MXNet's ``uniform`` / ``normal`` / ``randint`` that
return NDArrays (``ctx=``, ``out=``)."""
from __future__ import annotations

from ...random import generator, seed
from .ndarray import random as _nd_random

__all__ = ["seed", "generator", "uniform", "normal", "randint", "randn", "poisson",
           "exponential"]


def _with_out(draw):
    def fn(*args, out=None, **kwargs):
        if out is not None:
            kwargs.setdefault("shape", out.shape)
            kwargs.setdefault("dtype", out.dtype)
            out[...] = draw(*args, **kwargs)
            return out
        return draw(*args, **kwargs)
    fn.__name__, fn.__doc__ = draw.__name__, draw.__doc__
    return fn


uniform = _with_out(_nd_random.uniform)
normal = _with_out(_nd_random.normal)
randint = _with_out(_nd_random.randint)
poisson = _with_out(_nd_random.poisson)
exponential = _with_out(_nd_random.exponential)
randn = _nd_random.randn
