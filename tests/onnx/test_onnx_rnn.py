"""The fused ``RNN`` op exported to ONNX (LSTM, GRU, vanilla; layers chained, both directions
in one node) equals raymod's forward under onnxruntime within 1e-4, and so does a
FusedRNNCell LSTM language model against ``Module.predict``."""
import numpy as np
import pytest

import raymod as rm

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

T, N, C, H = 5, 3, 4, 6


def _export_and_run(sym, arg, data, tmp_path):
    path = str(tmp_path / "rnn.onnx")
    rm.onnx.export_model(sym, [arg, {}], [v.shape for v in data.values()],
                         onnx_file_path=path)
    onnx.checker.check_model(path)
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, data)


@pytest.mark.parametrize("mode,layers,bidirectional", [
    ("lstm", 1, False), ("lstm", 2, True), ("gru", 2, False), ("gru", 1, True),
    ("rnn_tanh", 2, True), ("rnn_relu", 1, False)])
def test_fused_rnn_matches_onnxruntime(mode, layers, bidirectional, tmp_path, rng):
    dirs = 2 if bidirectional else 1
    inputs = [rm.sym.Variable("data"), rm.sym.Variable("params"), rm.sym.Variable("h0")]
    shapes = {"data": (T, N, C), "h0": (layers * dirs, N, H)}
    if mode == "lstm":
        inputs.append(rm.sym.Variable("c0"))
        shapes["c0"] = (layers * dirs, N, H)
    sym = rm.sym.RNN(*inputs, state_size=H, num_layers=layers, mode=mode,
                     bidirectional=bidirectional, state_outputs=True, name="rnn")
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**shapes)[0]))
    arg = {"params": rng.uniform(-0.5, 0.5, arg_shapes["params"]).astype(np.float32)}
    data = {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in shapes.items()}
    ex = sym.bind(rm.cpu(), args={**data, **arg}, grad_req="null")
    ours = [np.asarray(o) for o in ex.forward(is_train=False)]
    theirs = _export_and_run(sym, arg, data, tmp_path)
    assert len(theirs) == len(ours) == (3 if mode == "lstm" else 2)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:NTC layout")
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_fused_rnn_language_model_matches_predict(mode, tmp_path):
    vocab, steps, batch = 20, 7, 4
    cell = rm.rnn.FusedRNNCell(8, num_layers=2, mode=mode, prefix="lm_")
    embed = rm.sym.Embedding(rm.sym.Variable("data"), input_dim=vocab, output_dim=5,
                             name="embed")
    outputs, _ = cell.unroll(steps, inputs=embed, layout="NTC", merge_outputs=True)
    logits = rm.sym.FullyConnected(rm.sym.Reshape(outputs, shape=(-1, 8)), num_hidden=vocab,
                                   name="pred")
    net = rm.sym.softmax(logits, name="probs")
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (batch, steps)).astype(np.float32)
    mod = rm.mod.Module(net, label_names=None)
    mod.bind([("data", tokens.shape)], for_training=False)
    mod.init_params(rm.init.Xavier())
    want = mod.predict(rm.io.NDArrayIter(tokens, batch_size=batch))
    arg, aux = mod.get_params()
    theirs = _export_and_run(net, arg, {"data": tokens}, tmp_path)
    np.testing.assert_allclose(theirs[0], np.asarray(want), rtol=1e-4, atol=1e-5)
