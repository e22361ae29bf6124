"""How a batch is cut across devices: MXNet's work-load rounding and layout batch axes."""
from __future__ import annotations

from typing import Sequence


def split_input_slice(batch_size: int, work_load_list: Sequence[float]) -> list[slice]:
    """Cut ``batch_size`` rows into one slice per device, proportional to ``work_load_list``.

    Each device gets ``round(share * batch_size)`` rows (Python rounding) and the last device
    takes what rounding left over, so 7 rows over two equal devices split 4 + 3. A device that
    would get no rows is an error, as in MXNet.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not work_load_list or any(w <= 0 for w in work_load_list):
        raise ValueError(f"work_load_list must hold positive numbers, got {list(work_load_list)}")
    total = float(sum(work_load_list))
    counts = [round(w * batch_size / total) for w in work_load_list]
    counts[-1] += max(batch_size - sum(counts), 0)
    slices, end = [], 0
    for count in counts:
        begin = min(end, batch_size)
        end = min(begin + count, batch_size)
        if begin >= end:
            raise ValueError(f"Too many slices: {batch_size} rows cannot be split over "
                             f"{len(work_load_list)} devices with work loads "
                             f"{list(work_load_list)}; some splits are empty")
        slices.append(slice(begin, end))
    return slices


def batch_axis(layout: str | None) -> int:
    """The batch axis of a layout string (``'NCHW'`` -> 0, ``'TNC'`` -> 1; None -> 0)."""
    if not layout:
        return 0
    axis = layout.find("N")
    return axis if axis >= 0 else -1


def take_slice(array, axis: int, s: slice):
    """``array[s]`` along ``axis`` (a view)."""
    if axis == 0:
        return array[s]
    index = [slice(None)] * array.ndim
    index[axis] = s
    return array[tuple(index)]
