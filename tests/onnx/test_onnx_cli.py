"""``raymod export CHECKPOINT --onnx FILE``: a saved checkpoint to a runnable ONNX file; bad
input is one line on stderr with status 2 (usage) or 1 (files, unsupported operators)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs raymod[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the ONNX checks run onnxruntime")

import raymod as rm  # noqa: E402
from raymod.cli import main  # noqa: E402


@pytest.fixture
def checkpoint(tmp_path, rng):
    x = rm.sym.Variable("data")
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(x, num_hidden=3, name="fc"),
                               name="softmax")
    arg = {"fc_weight": rng.uniform(-1, 1, (3, 4)).astype(np.float32),
           "fc_bias": rng.uniform(-1, 1, 3).astype(np.float32)}
    prefix = str(tmp_path / "net")
    rm.model.save_checkpoint(prefix, 1, net, arg, {})
    arg2 = {k: v * 2 for k, v in arg.items()}
    rm.model.save_checkpoint(prefix, 2, net, arg2, {})
    return prefix, net, arg2


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_export_newest_epoch_runs(checkpoint, tmp_path, capsys, rng):
    prefix, net, arg = checkpoint
    out = str(tmp_path / "net.onnx")
    assert main(["export", prefix, "--onnx", out, "--shape", "2,4", "--dynamic"]) == 0
    printed = capsys.readouterr().out
    assert "epoch 2" in printed and "data(N, 4)" in printed  # the batch is dynamic
    x = rng.uniform(-1, 1, (5, 4)).astype(np.float32)
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"data": x})
    want = _softmax(x @ arg["fc_weight"].T + arg["fc_bias"])
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_export_params_file_and_named_shape(checkpoint, tmp_path):
    prefix, _, _ = checkpoint
    out = str(tmp_path / "e1.onnx")
    assert main(["export", f"{prefix}-0001.params", "--onnx", out, "--shape", "data=1,4"]) == 0


@pytest.mark.parametrize("argv,status,match", [
    (["--onnx", "o.onnx"], 2, "--shape needed for input(s) data"),
    (["--onnx", "o.onnx", "--shape", "x=1,4"], 2, "unknown input(s) x"),
    (["--onnx", "o.onnx", "--shape", "1,0"], 2, "dimensions must be ints >= 1"),
    (["7", "--onnx", "o.onnx", "--shape", "1,4"], 1, "cannot load checkpoint"),
])
def test_bad_input_is_one_line(checkpoint, argv, status, match, capsys):
    prefix, _, _ = checkpoint
    assert main(["export", prefix] + argv) == status
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_missing_checkpoint_and_unsupported_op(tmp_path, capsys):
    assert main(["export", str(tmp_path / "none"), "--onnx", "o.onnx", "--shape", "1"]) == 1
    assert "no checkpoint at" in capsys.readouterr().err
    net = rm.sym.topk(rm.sym.Variable("data"), k=1, name="best")
    rm.model.save_checkpoint(str(tmp_path / "t"), 0, net, {}, {})
    assert main(["export", str(tmp_path / "t"), "--onnx", str(tmp_path / "t.onnx"),
                 "--shape", "2,3"]) == 1
    err = capsys.readouterr().err
    assert "operator topk (node 'best')" in err and err.count("\n") == 1
