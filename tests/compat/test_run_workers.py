"""``raymod run --workers`` / ``RAYMOD_WORKERS``: an MXNet-style script's modules train on Ray
workers (the session's loopback cluster) to the in-process result, whatever kvstore the
script names or creates; bad values stop the command before the script runs."""
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from raymod.compat import runner
from raymod.compat.workers import WORKERS_ENV, workers_from_options
from raymod.model import _create_dist_kvstore
import raymod as rm

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
SCRIPT = os.path.join(SCRIPTS, "mx_style_workers.py")
_LOG = logging.getLogger(__name__)


@pytest.fixture
def run_script(monkeypatch):
    """``runner.run(SCRIPT, args, workers)`` in this process: the script's globals. The
    runner sets ``sys.argv``, ``sys.path`` and ``import mxnet``, as ``python SCRIPT`` would
    have them; they are put back afterwards."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    was_installed = runner.installed()
    yield lambda *args, workers=None: runner.run(SCRIPT, args, workers)
    if not was_installed:
        runner.uninstall()


def _same_training(report, reference):
    """The global batch split over two workers sums to the in-process gradient, up to the
    order of float32 additions."""
    assert report["acc"] == pytest.approx(reference["acc"], abs=1e-9)
    for name, value in reference["params"].items():
        np.testing.assert_allclose(report["params"][name], value, rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_script_module_trains_on_workers_to_the_in_process_result(ray_cluster, run_script):
    reference = run_script("local", "object")["report"]
    assert reference["placement"] == "InProcess" and reference["worker_pids"] == []
    # the script's mx.kv.create('local') store: the module on workers uses a dist_sync one
    done = run_script("local", "object", workers=2)
    report = done["report"]
    assert report["placement"] == "OnWorkers"
    assert len(report["worker_pids"]) == 2 and report["driver_pid"] not in report["worker_pids"]
    assert report["kvstore"] == "dist_sync" and report["script_kvstore"] == "local"
    assert report["optimizer_setups"] == 1  # the user's subclass ran its own override
    _same_training(report, reference)
    assert done["mod"]._pool is None  # the runner stopped the workers the script left


def test_env_var_places_the_modules_of_python_m_raymod_compat(ray_cluster, run_script,
                                                              monkeypatch, capsys):
    reference = run_script("local", "object")["report"]
    monkeypatch.setenv(WORKERS_ENV, "1:2")
    # MXNet's dist_sync name: the module itself goes to the workers, not just its kvstore
    assert runner.main([SCRIPT, "dist_sync", "name"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # the second worker may join late: a batch's slices do not depend on who is alive
    assert report["placement"] == "OnWorkers" and len(report["worker_pids"]) in (1, 2)
    assert report["kvstore"] == "dist_sync"
    assert report["acc"] == pytest.approx(reference["acc"], abs=1e-9)


# one case per branch of the mapping (each makes KVServer actors, seconds apiece): an
# in-process name or store becomes dist_sync, a dist name or store stays what it is
@pytest.mark.parametrize("kv_type, expected, given_as", [
    ("local", "dist_sync", "name"), ("device", "dist_sync", "object"),
    ("dist_device_sync", "dist_device_sync", "object"), ("dist_async", "dist_async", "name")])
def test_every_mxnet_kvstore_means_a_dist_store_on_workers(ray_cluster, kv_type, expected,
                                                           given_as):
    given = rm.kv.create(kv_type) if given_as == "object" else kv_type
    kv, update_on_kvstore = _create_dist_kvstore(given, _LOG)
    try:
        assert kv.type == expected and update_on_kvstore
        assert kv.mode == ("async" if expected == "dist_async" else "sync")
        assert (kv is given) == (given_as == "object" and kv_type.startswith("dist"))
    finally:
        kv.close()


def test_a_local_store_with_compression_keeps_it_on_workers(ray_cluster):
    local = rm.kv.create("device")
    local.set_gradient_compression({"type": "2bit", "threshold": 0.25})
    kv, _ = _create_dist_kvstore(local, _LOG)
    try:
        assert kv.type == "dist_sync" and kv.compression_threshold == 0.25
    finally:
        kv.close()


def test_runner_options_become_the_workers_spec():
    got = workers_from_options("2:4", "0.5", "0", "1", env={})
    assert got == rm.Workers(2, 4, cpus_per_worker=0.5, gpus_per_worker=0, spares=1)
    assert workers_from_options(None, env={}) is None


# ---- bad values: one line, exit status 2, the script never runs ------------------------------
@pytest.mark.parametrize("flags, named, got", [
    (["--workers", "0"], "--workers", "'0'"),
    (["--workers", "3:2"], "--workers", "'3:2'"),
    (["--workers", "x"], "--workers", "'x'"),
    (["--workers", "2", "--cpus-per-worker", "-1"], "--cpus-per-worker", "'-1'"),
    (["--workers", "2", "--gpus-per-worker", "one"], "--gpus-per-worker", "'one'"),
    (["--workers", "2", "--spares", "-1"], "--spares", "'-1'"),
])
def test_bad_values_stop_raymod_run_before_the_script(tmp_path, flags, named, got):
    marker = tmp_path / "ran"
    script = tmp_path / "script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = subprocess.run([sys.executable, "-m", "raymod.cli", "run", *flags, str(script)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"raymod run: error: {named}: expected ")
    assert lines[0].endswith(f"got {got}")
    assert not marker.exists()


def test_bad_env_var_stops_python_m_raymod_compat(tmp_path):
    marker = tmp_path / "ran"
    script = tmp_path / "script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = subprocess.run([sys.executable, "-m", "raymod.compat", str(script)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, WORKERS_ENV: "2:1"})
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"raymod.compat: error: {WORKERS_ENV}: expected N or "
                                   "MIN:MAX with 1 <= MIN <= MAX, got '2:1'")
    assert not marker.exists()
