"""User code runs on Ray workers as in one process under ``raymod run --workers``.

``scripts/mx_style_everywhere.py`` (an MXNet 1.x script, the same file for both runs) has a
CustomOp that calls ``.asnumpy()`` and ``mx.nd`` operators, a metric from a sibling module
that does ``import mxnet`` (unpickled by KVServer actors), a ``SequentialModule`` of two
modules and a module loaded beside the one that trained (several placed modules at once), and
a hand-written loop that carries RNN states shaped (time, batch, features) -> (layers, batch,
hidden), reads ``get_outputs(merge_multi_context=False)`` and clips
``_exec_group.grad_arrays`` with ``mx.gluon.utils.clip_global_norm``. Run as ``python -m
raymod.compat SCRIPT`` and as ``raymod run --workers 2 SCRIPT`` (each run its own process;
the second starts its own loopback cluster), it must reach the same numbers and
print its own logging lines.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "mx_style_everywhere.py")
# one BLAS thread per process: the driver and its workers share two cores
_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _run(folder, entry, *runner_options):
    os.makedirs(folder)
    env = {**os.environ, **_ENV}
    env.pop("RAY_ADDRESS", None)  # the runner starts its own cluster
    proc = subprocess.run([sys.executable, "-m", *entry, *runner_options, SCRIPT, str(folder)],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    with open(os.path.join(folder, "report.json")) as f:
        return json.load(f), proc.stderr


@pytest.mark.ray
def test_the_script_reaches_the_in_process_numbers_on_two_workers(tmp_path):
    alone, _ = _run(tmp_path / "in_process", ("raymod.compat",))
    spread, log = _run(tmp_path / "workers", ("raymod.cli", "run"), "--workers", "2")
    for key in ("custom", "chain", "loaded"):  # whole-batch metrics: the same rows counted
        assert spread[key] == alone[key], key
    # one part for the one context the script gave, shaped as on one device
    assert alone["parts"] == spread["parts"] == [1]
    assert alone["state_shape"] == spread["state_shape"] == [1, 8, 5]
    # the same norms before clipping at every step: the clipped updates and the carried
    # states are the in-process ones
    np.testing.assert_allclose(spread["norms"], alone["norms"], rtol=1e-4)
    np.testing.assert_allclose(spread["losses"], alone["losses"], rtol=1e-4)
    for part in ("lm", "buckets", "pinned"):
        for name, value in alone[part].items():
            np.testing.assert_allclose(spread[part][name], value, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{part}: {name}")
    # raymod configures no logger: the script's own basicConfig(level=INFO) decides
    assert "script logging: on" in log
    assert "Epoch[2] Train-agreement=" in log
    assert "workers: worker 0 joined" in log  # the modules did run on workers
