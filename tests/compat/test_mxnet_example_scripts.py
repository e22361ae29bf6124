"""Acceptance: MXNet 1.9.1's own example scripts, unmodified, through raymod's runner.

Needs MXNet 1.9.1's ``example/`` folder (not part of raymod): set ``RAYMOD_MXNET_EXAMPLES`` to
it (e.g. ``/tmp/mxnet-1.9.1/example``); skipped otherwise. Each test copies the example's
folder to a temporary one, writes the data its download step looks for there (offline
stand-ins from compat_data.py) and runs the script with ``python -m raymod.compat``.

The reference numbers were measured by running the same scripts on the same files with MXNet
1.9.1 (pip wheel, CPU) and are recorded in REFERENCE below.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

from compat_data import write_mnist, write_year_prediction

EXAMPLES = os.environ.get("RAYMOD_MXNET_EXAMPLES")
pytestmark = pytest.mark.skipif(
    not EXAMPLES or not os.path.isdir(str(EXAMPLES)),
    reason="set RAYMOD_MXNET_EXAMPLES to MXNet 1.9.1's example/ folder to run these")

# MXNet 1.9.1 on the files compat_data writes (same arguments as below)
REFERENCE = {
    "mnist_mlp": {"Epoch[1] Train-accuracy": 0.999527, "Epoch[1] Validation-accuracy": 0.895254},
    "svrg_linear_regression": {"Epoch[9] Train-mse": 0.167077},
}
# BLAS threads fight over shared cores; one per process keeps the runs quick
_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run(entry, folder, script, *args):
    proc = subprocess.run([sys.executable, "-m", *entry, script, *args], cwd=folder,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, **_ENV})
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def _values(log, names):
    found = {}
    for name in names:
        hits = re.findall(re.escape(name) + r"=([0-9.]+)", log)
        assert hits, f"{name} not in the output:\n{log[-3000:]}"
        found[name] = float(hits[-1])
    return found


def _reaches(got, reference, higher_is_better):
    """raymod reaches MXNet's number to within 1% of it (or does better). One-sided because
    the scripts do not seed: MXNet starts from a fixed default seed and repeats its number
    exactly, raymod draws a fresh initialisation each run (validation accuracy here spans
    about 0.89-0.92 over runs), so being better than MXNet is no failure."""
    for name, ref in reference.items():
        ok = got[name] >= 0.99 * ref if higher_is_better else got[name] <= 1.01 * ref
        assert ok, f"{name}: raymod {got[name]}, MXNet {ref}"


def test_module_mnist_mlp(tmp_path):
    folder = tmp_path / "module"
    shutil.copytree(os.path.join(EXAMPLES, "module"), folder)
    write_mnist(str(folder / "data"), train_copies=100, test_copies=20)
    log = _run(("raymod.compat",), folder, "mnist_mlp.py")
    assert "validation Accuracy" in log  # the script's own end: it ran to the last line
    _reaches(_values(log, REFERENCE["mnist_mlp"]), REFERENCE["mnist_mlp"], True)


def test_svrg_linear_regression(tmp_path):
    folder = tmp_path / "linear_regression"
    shutil.copytree(os.path.join(EXAMPLES, "svrg_module", "linear_regression"), folder)
    write_year_prediction(str(folder / "data"))
    _run(("raymod.cli", "run"), folder, "train.py", "-e", "10")
    log = (folder / "experiments.log").read_text()  # the script logs epochs to this file
    ref = REFERENCE["svrg_linear_regression"]
    _reaches(_values(log, ref), ref, False)
