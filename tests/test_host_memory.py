"""Numpy executors keep freed host memory: blocks freed in one step serve the next one."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from raymod import host_memory

ROOT = Path(__file__).resolve().parents[1]

# A step's pattern that glibc's own thresholds punish: eight 4 MiB arrays made and freed
# together. glibc raises its mmap threshold to the freed size, so they come from the heap,
# and trims the heap's 32 MiB free top each time: every round faults its pages back in.
# The child optionally binds a numpy executor first (which is what sets the thresholds) and
# prints the page faults of this thread per round after two warm-up rounds.
CHILD = """
import resource, sys
import numpy as np
import raymod as rm
if sys.argv[1] == "bind":
    x = rm.sym.Variable("x")
    rm.sym.FullyConnected(x, num_hidden=2).simple_bind(rm.cpu(), x=(2, 3))
def faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
def round_():
    arrays = [np.ones(1 << 20, dtype=np.float32) for _ in range(8)]
    del arrays
for _ in range(2):
    round_()
before = faults()
for _ in range(3):
    round_()
print((faults() - before) / 3)
"""

glibc_linux = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc's")


def faults_per_round(keep: str, bind: bool) -> float:
    env = dict(os.environ, RAYMOD_KEEP_HOST_MEMORY=keep,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CHILD, "bind" if bind else "import"],
                          env=env, timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


@glibc_linux
def test_thresholds_are_set_once_per_process():
    assert host_memory.keep_freed_memory() is True
    assert host_memory.keep_freed_memory() is True


@glibc_linux
def test_a_bound_executor_keeps_freed_blocks_for_the_next_step():
    kept = faults_per_round("1", bind=True)
    returned = faults_per_round("0", bind=True)
    untouched = faults_per_round("1", bind=False)  # importing raymod changes nothing
    assert kept < 50, kept
    assert returned > 1000, returned  # 32 MiB: 8,192 pages (fewer with huge pages)
    assert untouched > 1000, untouched
