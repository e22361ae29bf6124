"""Acceptance: MXNet 1.9.1's example/image-classification/train_cifar10.py, unmodified, on a
small .rec (compat_data.write_cifar_rec) through raymod's runner: in process, and on two Ray
workers with one killed mid-epoch, reaching the same parameters (every record used once).

Needs MXNet 1.9.1's ``example/`` folder: set ``RAYMOD_MXNET_EXAMPLES`` (e.g.
``/tmp/mxnet-1.9.1/example``); skipped otherwise."""
import os
import re
import shutil
import sys

import numpy as np
import pytest
import ray

import raymod as rm
from raymod.cluster import moments
from raymod.compat import runner
from raymod.ndarray_io import load

from compat_data import write_cifar_rec

EXAMPLES = os.environ.get("RAYMOD_MXNET_EXAMPLES")
pytestmark = pytest.mark.skipif(
    not EXAMPLES or not os.path.isdir(str(EXAMPLES)),
    reason="set RAYMOD_MXNET_EXAMPLES to MXNet 1.9.1's example/ folder to run these")

# 600 images of 32x32, 12 steps of 50 per epoch; the script's own augmentations switched on
ARGS = ["--network", "lenet", "--num-epochs", "2", "--num-examples", "600",
        "--batch-size", "50", "--disp-batches", "4", "--data-nthreads", "2", "--lr", "0.05",
        "--lr-step-epochs", "10", "--random-crop", "1", "--random-mirror", "1",
        "--model-prefix", "out/cifar"]


@pytest.fixture
def example(tmp_path, monkeypatch):
    """train_cifar10.py's folder with the .rec files its download step looks for; run it
    there with ``run(workers)`` (seeded, so both runs start from the same weights)."""
    folder = tmp_path / "image-classification"
    shutil.copytree(os.path.join(EXAMPLES, "image-classification"), folder)
    write_cifar_rec(str(folder / "data"))
    (folder / "out").mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    was_installed = runner.installed()

    def run(workers=None):
        rm.random.seed(7)
        runner.run("train_cifar10.py", ARGS, workers)
        return load(str(folder / "out" / "cifar-0002.params"))

    yield run
    if not was_installed:
        runner.uninstall()


def test_in_process_and_on_two_workers_with_one_killed(example, ray_cluster, caplog):
    caplog.set_level("INFO")
    example()
    accuracy = [float(r.getMessage().rsplit("=", 1)[1]) for r in caplog.records
                if "Validation-accuracy" in r.getMessage()]
    assert len(accuracy) == 2 and accuracy[-1] > 0.5  # it learns the ten classes
    # this script's in-process and on-worker runs do not end at the same weights even
    # seeded alike (not yet explained; the cluster tests' Module.fit runs do): the
    # reference for the run with a kill is the same run on workers without one
    reference = example(rm.Workers(2, run_ahead=2))

    killed, windows = [], []

    def kill_mid_epoch(name, context):
        # the third window of the run: the workers are inside it, mid-epoch 0
        if name == "window.launched":
            windows.append(name)
            pool = context["pool"]
            if len(windows) == 3 and len(pool.workers) == 2:
                rank = max(pool.workers)
                ray.kill(pool.workers[rank], no_restart=True)
                killed.append(rank)

    before = moments.listen(kill_mid_epoch)
    try:
        got = example(rm.Workers(2, run_ahead=2))
    finally:
        moments.listen(before)
    assert killed, "no worker was killed"
    # the second run's layers have the next auto names (convolution2 for convolution0, ...)
    assert len(got) == len(reference)
    for ref_name, got_name in zip(sorted(reference), sorted(got)):
        assert re.sub(r"\d+", "", ref_name) == re.sub(r"\d+", "", got_name)
        # the same steps over the same draws: a lost or doubled slice would show here
        np.testing.assert_allclose(got[got_name], reference[ref_name], rtol=1e-3, atol=1e-5,
                                   err_msg=ref_name)
