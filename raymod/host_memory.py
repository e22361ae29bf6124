"""Host memory for numpy executors: freed blocks stay in the process for the next step.

An executor's step allocates and frees the same arrays every time. glibc's malloc returns
large blocks to the kernel when they are freed (``mmap`` above a threshold that it moves as it
goes, and trimming the top of the heap), so the next step takes a page fault and a page of
zeroing for every 4 KiB it touches again. MXNet does not pay this, since it plans all memory
at bind. :func:`keep_freed_memory` fixes glibc's thresholds once per process instead
(``mallopt``), so freed blocks up to ``MMAP_THRESHOLD`` come from the heap and the heap is not
trimmed below ``TRIM_THRESHOLD`` of free space: a process keeps its peak step's memory, as
MXNet's does. Measured (``getrusage``, numpy, one thread): MXNet's example graphs run one
after another in one process (``bench/bench_zoo.py``) take 0.86-0.95x the time on AlexNet,
VGG-11, GoogLeNet and Inception-BN, and 0.5x on the LSTM graphs that follow the large ones;
eight 4 MiB arrays made and freed per step fault 4,072 pages a step without it, none with it.

Executors call it when they are bound on the CPU. ``RAYMOD_KEEP_HOST_MEMORY=0`` turns it off;
other C libraries than glibc are left alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

__all__ = ["keep_freed_memory", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: blocks up to this size come from the heap (glibc's largest allowed value on 64-bit)
MMAP_THRESHOLD = 32 << 20
#: free space kept at the top of the heap before it is given back (mallopt takes an int)
TRIM_THRESHOLD = (1 << 31) - 1

_lock = threading.Lock()
_state: dict[str, bool] = {}


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed blocks for reuse; once per process.

    Returns
    -------
    bool
        Whether the thresholds are set (False: turned off, or not glibc).
    """
    with _lock:
        if "done" not in _state:
            _state["done"] = _set_thresholds()
        return _state["done"]


def _set_thresholds() -> bool:
    if os.environ.get("RAYMOD_KEEP_HOST_MEMORY", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):
            return False  # mallopt of another libc may not know these parameters
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
