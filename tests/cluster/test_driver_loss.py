"""A driver killed with SIGKILL mid-epoch; fit(resume=True) continues the same trajectory."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import raymod as rm

pytestmark = [pytest.mark.ray]

TRAIN = textwrap.dedent('''
    import sys
    import time
    import numpy as np
    import raymod as rm

    def train(path, resume, address=None, workers=2):
        if address:
            rm.cluster.init(address=address)
        data = rm.sym.Variable("data")
        h = rm.sym.Activation(rm.sym.FullyConnected(data, num_hidden=32, name="fc1"),
                              act_type="relu")
        net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(h, num_hidden=10, name="fc2"),
                                   name="softmax")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((800, 16)).astype(np.float32)
        y = x[:, :10].argmax(axis=1).astype(np.float32)
        rm.random.seed(1)
        mod = rm.mod.Module(net, workers=workers)
        mod.fit(rm.io.NDArrayIter(x, y, batch_size=40, shuffle=True, seed=2), num_epoch=4,
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                initializer=rm.init.Xavier(), resume=resume,
                # steps of ~20 ms: the killer sees each checkpoint before the next (a bare
                # step takes ~1 ms, and the kill could land on an epoch boundary)
                batch_end_callback=None if path is None else (lambda p: time.sleep(0.02)),
                checkpoint=None if path is None else rm.CheckpointConfig(path, every_n_steps=5))
        params = {k: v.copy() for k, v in mod.get_params()[0].items()}
        mod.close()
        return params

    if __name__ == "__main__":
        train(sys.argv[1], False, address=sys.argv[2])
''')


def test_driver_killed_mid_epoch_resumes_the_same_trajectory(ray_cluster, tmp_path):
    script = tmp_path / "train_job.py"
    script.write_text(TRAIN)
    sys.path.insert(0, str(tmp_path))
    try:
        import train_job
    finally:
        sys.path.remove(str(tmp_path))
    reference = train_job.train(None, False)
    folder = tmp_path / "ckpt"
    proc = subprocess.Popen([sys.executable, str(script), str(folder), ray_cluster["address"]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            done = [d for d in os.listdir(folder) if d.startswith("step-")] \
                if folder.exists() else []
            if any(int(d.split("-")[1]) >= 30 for d in done):  # mid-epoch 2 of 4
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the driver finished (or failed) before it was killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    steps = sorted(int(d.split("-")[1]) for d in os.listdir(folder) if d.startswith("step-"))
    assert 30 <= steps[-1] < 80 and steps[-1] % 20  # killed mid-epoch, after a checkpoint
    resumed = train_job.train(str(folder), True)
    for name in reference:
        scale = np.abs(reference[name]).max()
        np.testing.assert_allclose(resumed[name], reference[name], atol=1e-5 * scale,
                                   err_msg=name)


def test_resume_needs_a_checkpoint_and_configs_are_checked():
    with pytest.raises(ValueError, match="every_n_steps"):
        rm.CheckpointConfig("x", every_n_steps=0)
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2),
                               name="softmax")
    it = rm.io.NDArrayIter(np.zeros((4, 3), np.float32), np.zeros(4, np.float32), batch_size=2)
    with pytest.raises(ValueError, match=r"resume=True\) needs checkpoint"):
        rm.mod.Module(net).fit(it, num_epoch=1, resume=True)
