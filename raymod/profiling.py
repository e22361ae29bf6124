"""Opt-in CPU profiles of raymod's own threads inside Ray actors (a developer's tool).

With ``RAYMOD_CPROFILE_DIR=<dir>`` in the environment of the process that starts the local
cluster, every worker's window loop and every KVServer's doorbell thread run under a
``cProfile`` timed in thread CPU seconds, dumped to ``<dir>/<tag>-<pid>.prof`` about once a
second (an actor that is killed keeps its last dump). ``bench/profile_scale.py --cprofile-dir``
sets it and sums the dumps per tag. Unset, :func:`profiled` is a shared ``nullcontext``: the
hot loops pay one call.
"""
from __future__ import annotations

import contextlib
import cProfile
import os
import threading
import time
from typing import Iterator

__all__ = ["profiled", "PROFILE_DIR"]

#: where the dumps go (None: profiling is off)
PROFILE_DIR = os.environ.get("RAYMOD_CPROFILE_DIR") or None

_NULL = contextlib.nullcontext()
_profiles: dict[tuple[str, int], tuple[cProfile.Profile, list]] = {}


@contextlib.contextmanager
def _profiled(tag: str) -> Iterator[None]:
    key = (tag, threading.get_ident())
    if key not in _profiles:
        _profiles[key] = (cProfile.Profile(time.thread_time), [time.monotonic()])
    prof, last_dump = _profiles[key]
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        if time.monotonic() - last_dump[0] > 1.0:
            last_dump[0] = time.monotonic()
            prof.dump_stats(os.path.join(PROFILE_DIR, f"{tag}-{os.getpid()}.prof"))


def profiled(tag: str) -> contextlib.AbstractContextManager:
    """A context that adds the time spent inside it to this thread's profile ``tag``."""
    return _profiled(tag) if PROFILE_DIR else _NULL
