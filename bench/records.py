"""What every raymod benchmark prints: one JSON line per record, with the conditions."""
from __future__ import annotations

import json
import os
import platform


def emit(**rec) -> dict:
    """Print ``rec`` as a JSON line, stamped with OMP_NUM_THREADS and the 1-minute load."""
    rec.setdefault("omp_num_threads", os.environ.get("OMP_NUM_THREADS"))
    rec.setdefault("loadavg_1m", round(os.getloadavg()[0], 2))
    print(json.dumps(rec), flush=True)
    return rec


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), for the conditions every figure states."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
