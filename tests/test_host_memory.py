"""Numpy executors keep freed host memory: a warm step faults no pages back in."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from raymod import host_memory

ROOT = Path(__file__).resolve().parents[1]

# Binds MXNet's GoogLeNet example (the zoo fixture: many arrays of many sizes, where glibc's
# moving thresholds return blocks to the kernel every step) and prints the page faults of
# this thread per step after two warm-up steps.
CHILD = """
import json, resource, sys
import numpy as np
import raymod as rm
zoo = sys.argv[1] + "/tests/fixtures/mxnet/zoo/"
entry = json.load(open(zoo + "index.json"))["networks"]["googlenet"]
sym = rm.sym.load_json(open(zoo + entry["symbol_file"]).read())
exe = sym.simple_bind(rm.cpu(), **{i["name"]: tuple(i["shape"]) for i in entry["inputs"]})
rng = np.random.default_rng(0)
for name, a in exe.arg_dict.items():
    a[:] = rng.integers(0, 10, a.shape) if name == "softmax_label" else \\
        rng.standard_normal(a.shape) * 0.05
def faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
for _ in range(2):
    exe.forward(is_train=True); exe.backward()
before = faults()
for _ in range(3):
    exe.forward(is_train=True); exe.backward()
print((faults() - before) / 3)
"""

glibc_linux = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the thresholds are glibc's")


def faults_per_step(keep: str) -> float:
    env = dict(os.environ, RAYMOD_KEEP_HOST_MEMORY=keep,
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


@glibc_linux
def test_thresholds_are_set_once_per_process():
    assert host_memory.keep_freed_memory() is True
    assert host_memory.keep_freed_memory() is True


@glibc_linux
def test_a_warm_step_faults_no_pages_back_in():
    kept, returned = faults_per_step("1"), faults_per_step("0")
    # glibc's own thresholds fault thousands of pages per GoogLeNet step (4,440 measured)
    assert returned > 1000, returned
    assert kept < 50, kept
