"""The runner: an MXNet-style script (scripts/mx_style_mlp.py) runs through ``python -m
raymod.compat`` and ``raymod run`` and trains exactly as the same code on raymod in process."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import raymod as rm

SCRIPT = os.path.join(os.path.dirname(__file__), "scripts", "mx_style_mlp.py")


def _run(entry, out, *extra):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", *entry, SCRIPT, str(out), *extra],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _same_on_raymod():
    """The script's training, written against raymod directly."""
    rm.random.seed(7)
    rng = np.random.RandomState(0)
    x = rng.rand(200, 10).astype(np.float32)
    y = (x.sum(axis=1) > 5).astype(np.float32)
    train = rm.io.NDArrayIter(x, y, batch_size=20)
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=8, name="fc1")
    net = rm.sym.Activation(net, act_type="relu")
    net = rm.sym.FullyConnected(net, num_hidden=2, name="fc2")
    net = rm.sym.SoftmaxOutput(net, name="softmax")
    mod = rm.mod.Module(net, context=rm.cpu())
    mod.fit(train, num_epoch=3, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
            initializer=rm.init.Xavier())
    return mod.get_params()[0], mod.predict(train)


@pytest.mark.parametrize("entry", [("raymod.compat",), ("raymod.cli", "run")],
                         ids=["python-m", "raymod-run"])
def test_mxnet_script_trains_as_raymod_does(tmp_path, entry):
    out = tmp_path / "out.params"
    report = _run(entry, out, "--flag")
    assert report["argv"] == [str(out), "--flag"]
    assert report["path0"] == report["here"]  # the script's folder, as `python SCRIPT`
    assert report["version"] == "1.9.1"
    assert report["executor_group"] == "raymod.parallel.executor_group"
    assert "mxnet.gluon.nn" in report["gluon"] and "not supported" in report["gluon"]
    saved = rm.nd.load(str(out))
    arg_params, preds = _same_on_raymod()
    for name, value in arg_params.items():
        np.testing.assert_allclose(saved[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(saved["preds"], preds, rtol=1e-5, atol=1e-6)
    acc = float(np.mean(np.argmax(preds, axis=1) == (np.random.RandomState(0).rand(200, 10)
                                                     .astype(np.float32).sum(1) > 5)))
    assert report["acc"] == pytest.approx(acc)


def test_runner_exit_status_and_usage(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys, mxnet\nsys.exit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "raymod.compat", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    proc = subprocess.run([sys.executable, "-m", "raymod.compat", str(tmp_path / "nope.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "is not a file" in proc.stderr


def test_import_mxnet_is_untouched_outside_the_runner():
    assert "mxnet" not in sys.modules or not sys.modules["mxnet"].__name__.startswith("raymod")
