"""``export_model(..., dynamic=True)`` serves any batch size (issue 42, item 6).

Every model the other files of ``tests/onnx`` export (each operator case, the fused RNNs, the
FusedRNNCell language models, the model-zoo networks, the CLI's ``--dynamic``) is exported
once with ``dynamic=True`` at batch 2 (or the fixture's) and run in onnxruntime at batch 1, 3
and 17, against raymod's forward / ``Module.predict`` at that batch; the declared output dims
(``N``, ``7*N``...) must be the shapes onnxruntime gives. A network that fixes its batch size
fails the export with ``DynamicBatchError`` naming the operator, and nothing is written.
"""
from __future__ import annotations

import importlib.util
import logging
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="ONNX export needs raymod[onnx]")
ort = pytest.importorskip("onnxruntime", reason="the ONNX checks run onnxruntime")

import raymod as rm  # noqa: E402
from raymod.cli import main  # noqa: E402
from raymod.base import MXNetError  # noqa: E402
from raymod.onnx import DynamicBatchError  # noqa: E402

S = rm.sym
HERE = os.path.dirname(os.path.abspath(__file__))
BATCHES = (1, 3, 17)
EXPORTED_AT = 2


def _sibling(name: str):
    """A module of this folder, loaded under a private name (its tests are not collected
    twice): the models they export are the ones checked here."""
    spec = importlib.util.spec_from_file_location(f"_raymod_dynamic_{name}",
                                                  os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ops = _sibling("test_onnx_ops")
zoo = _sibling("test_onnx_zoo")

# inputs with no batch axis (dynamic_input_shapes entries without None): the right operand
# of an N-d dot, indices into the batch axis (their bound then follows the batch)
NO_BATCH = {"dot_nd": {"other"}, "take_wrap": {"idx"}, "pick_keepdims_wrap": {"idx"}}
# operator cases whose symbol fixes the batch size: the export refuses, naming the operator
PINNED = {
    "reshape_split": ("Reshape", "splits the batch axis into (1, 2): batch 2 only"),
    "broadcast_to": ("broadcast_to", "shape=(4, 3, 5) holds batch 3"),
    "squeeze": ("squeeze", "no axis: at batch 1 the batch axis goes too"),
}


def _session(path: str):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def _declared(model, name: str, batch: int) -> tuple:
    """The declared shape of graph output ``name`` at ``batch`` (``N``, ``7*N``, ``2*N+1``
    evaluated)."""
    out = next(o for o in model.graph.output if o.name == name)
    dims = []
    for d in out.type.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            text = d.dim_param.replace("*N", "*n").replace("N", "n")
            dims.append(eval(text, {"__builtins__": {}}, {"n": batch}))  # noqa: S307
    return tuple(dims)


def _check_outputs(path: str, session, ours: list, theirs: list, batch: int, what: str,
                   rtol: float = 1e-4, atol: float = 1e-5) -> None:
    model = onnx.load(path)
    names = [o.name for o in session.get_outputs()]
    assert len(ours) == len(theirs) == len(names), what
    for name, a, b in zip(names, ours, theirs):
        assert a.shape == b.shape, f"{what} at batch {batch}: {b.shape} vs raymod's {a.shape}"
        assert _declared(model, name, batch) == b.shape, \
            f"{what} at batch {batch}: output {name} declared {_declared(model, name, batch)}"
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg=f"{what}, batch {batch}")


# --- every operator case of test_onnx_ops.py ---------------------------------------------
def _op_shapes(cid: str, shapes: dict, batch: int) -> dict:
    fixed = NO_BATCH.get(cid, set())
    return {n: s if n in fixed else (batch,) + tuple(s[1:]) for n, s in shapes.items()}


def _op_forward(sym, data: dict, arg: dict, aux: dict) -> list:
    shapes = {k: v.shape for k, v in data.items()}
    labels = {n: np.zeros(s, np.float32) for n, s in zip(
        sym.list_arguments(), sym.infer_shape(**shapes)[0]) if n not in data and n not in arg}
    ex = sym.bind(rm.cpu(), args={**data, **arg, **labels}, aux_states=aux, grad_req="null")
    return [np.asarray(o) for o in ex.forward(is_train=False)]


DYNAMIC_CASES = [c for c in ops.CASES if c[0] not in PINNED]


@pytest.mark.parametrize("cid,sym,shapes", DYNAMIC_CASES, ids=[c[0] for c in DYNAMIC_CASES])
def test_operator_runs_at_every_batch(cid, sym, shapes, tmp_path, rng):
    base = _op_shapes(cid, shapes, EXPORTED_AT)
    _, arg, aux = ops._arrays(sym, base, rng)
    fixed = NO_BATCH.get(cid, set())
    dyn = [s if n in fixed else (None,) + tuple(s[1:]) for n, s in base.items()]
    path = str(tmp_path / "m.onnx")
    rm.onnx.export_model(sym, [arg, aux], list(base.values()), onnx_file_path=path,
                         dynamic=True, dynamic_input_shapes=dyn)
    onnx.checker.check_model(path)
    session = _session(path)
    for batch in BATCHES:
        data = {n: ops._data(n, s, rng) for n, s in _op_shapes(cid, shapes, batch).items()}
        _check_outputs(path, session, _op_forward(sym, data, arg, aux),
                       session.run(None, data), batch, cid)


@pytest.mark.parametrize("cid", sorted(PINNED))
def test_operator_fixing_the_batch_is_refused(cid, tmp_path, rng):
    op, why = PINNED[cid]
    sym, shapes = next(c[1:] for c in ops.CASES if c[0] == cid)
    # raymod itself cannot run the symbol at every batch with one output rank
    ranks = set()
    for batch in BATCHES:
        try:
            ranks.add(len(sym.infer_shape(**_op_shapes(cid, shapes, batch))[1][0]))
        except MXNetError:
            ranks.add(None)
    assert len(ranks) > 1 or None in ranks, why
    _, arg, aux = ops._arrays(sym, shapes, rng)
    path = tmp_path / "pinned.onnx"
    with pytest.raises(DynamicBatchError, match=rf"dynamic=True: .*{op} (\(node )?'[^']+'"):
        rm.onnx.export_model(sym, [arg, aux], list(shapes.values()), onnx_file_path=str(path),
                             dynamic=True)
    assert not path.exists()
    rm.onnx.export_model(sym, [arg, aux], list(shapes.values()), onnx_file_path=str(path))


# --- the fused RNN (test_onnx_rnn.py): time-major, the states given as inputs ------------
@pytest.mark.parametrize("mode,layers,bidirectional", [
    ("lstm", 1, False), ("lstm", 2, True), ("gru", 2, False), ("gru", 1, True),
    ("rnn_tanh", 2, True), ("rnn_relu", 1, False)])
def test_fused_rnn_with_state_inputs_runs_at_every_batch(mode, layers, bidirectional,
                                                         tmp_path, rng):
    steps, width, hidden, dirs = 5, 4, 6, 2 if bidirectional else 1
    names = ["data", "h0"] + (["c0"] if mode == "lstm" else [])
    sym = S.RNN(*[S.Variable(n) for n in ["data", "params"] + names[1:]], state_size=hidden,
                num_layers=layers, mode=mode, bidirectional=bidirectional,
                state_outputs=True, name="rnn")

    def shapes(batch):
        return {"data": (steps, batch, width),
                **{n: (layers * dirs, batch, hidden) for n in names[1:]}}

    base = shapes(EXPORTED_AT)
    arg_shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**base)[0]))
    arg = {"params": rng.uniform(-0.5, 0.5, arg_shapes["params"]).astype(np.float32)}
    path = str(tmp_path / "rnn.onnx")
    rm.onnx.export_model(sym, [arg, {}], list(base.values()), onnx_file_path=path,
                         dynamic=True, dynamic_input_shapes=[
                             (s[0], None, s[2]) for s in base.values()])   # (T, N, C)
    session = _session(path)
    for batch in BATCHES:
        data = {k: rng.uniform(-1, 1, s).astype(np.float32) for k, s in shapes(batch).items()}
        ours = [np.asarray(o) for o in sym.bind(rm.cpu(), args={**data, **arg},
                                                grad_req="null").forward(is_train=False)]
        _check_outputs(path, session, ours, session.run(None, data), batch, mode)


def _language_model(mode: str, steps: int = 7, vocab: int = 20):
    """test_onnx_rnn.py's FusedRNNCell LM: batch-major tokens, the begin states zeros whose
    batch shape inference fills in (the model of the issue)."""
    cell = rm.rnn.FusedRNNCell(8, num_layers=2, mode=mode, prefix="lm_")
    embed = S.Embedding(S.Variable("data"), input_dim=vocab, output_dim=5, name="embed")
    outputs, _ = cell.unroll(steps, inputs=embed, layout="NTC", merge_outputs=True)
    logits = S.FullyConnected(S.Reshape(outputs, shape=(-1, 8)), num_hidden=vocab, name="pred")
    return S.softmax(logits, name="probs")


def _predict(net, arg: dict, aux: dict, tokens: np.ndarray) -> np.ndarray:
    mod = rm.mod.Module(net, label_names=None)
    mod.bind([("data", tokens.shape)], for_training=False)
    mod.set_params(arg, aux)
    return np.asarray(mod.predict(rm.io.NDArrayIter(tokens, batch_size=len(tokens))))


@pytest.mark.filterwarnings("ignore:NTC layout")
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_fused_rnn_language_model_serves_any_batch(mode, tmp_path):
    steps, vocab = 7, 20
    net = _language_model(mode, steps, vocab)
    mod = rm.mod.Module(net, label_names=None)
    mod.bind([("data", (EXPORTED_AT, steps))], for_training=False)
    mod.init_params(rm.init.Xavier(rnd_type="uniform", magnitude=3))
    arg, aux = mod.get_params()
    path = str(tmp_path / "lm.onnx")
    rm.onnx.export_model(net, [arg, aux], [(EXPORTED_AT, steps)], onnx_file_path=path,
                         dynamic=True)
    model = onnx.load(path)
    # the begin states are filled at run time: no batch-sized constant is left
    assert "ConstantOfShape" in {n.op_type for n in model.graph.node}
    assert [d.dim_param or d.dim_value for d in
            model.graph.output[0].type.tensor_type.shape.dim] == ["7*N", vocab]
    session = _session(path)
    rng = np.random.default_rng(1)
    for batch in BATCHES:
        tokens = rng.integers(0, vocab, (batch, steps)).astype(np.float32)
        _check_outputs(path, session, [_predict(net, arg, aux, tokens)],
                       session.run(None, {"data": tokens}), batch, f"{mode} LM")


@pytest.mark.filterwarnings("ignore:NTC layout")
def test_cli_dynamic_fused_rnn_checkpoint_serves_any_batch(tmp_path, capsys):
    net = _language_model("lstm")
    mod = rm.mod.Module(net, label_names=None)
    mod.bind([("data", (4, 7))], for_training=False)
    mod.init_params(rm.init.Xavier())
    arg, aux = mod.get_params()
    prefix = str(tmp_path / "lm")
    rm.model.save_checkpoint(prefix, 1, net, arg, aux)
    out = str(tmp_path / "lm.onnx")
    assert main(["export", prefix, "--onnx", out, "--shape", "4,7", "--dynamic"]) == 0
    assert "data(N, 7)" in capsys.readouterr().out
    session = _session(out)
    rng = np.random.default_rng(2)
    for batch in BATCHES:
        tokens = rng.integers(0, 20, (batch, 7)).astype(np.float32)
        _check_outputs(out, session, [_predict(net, arg, aux, tokens)],
                       session.run(None, {"data": tokens}), batch, "CLI LM")


# --- the model-zoo networks (test_onnx_zoo.py) -------------------------------------------
# entries of the batch axis per batch item: the KL loss takes the means and log-variances
# stacked along axis 0 and splits them apart
ROWS = {"vaegan_kl_loss": 2}


def _zoo_inputs(net: str, inputs: dict, batch: int) -> dict:
    out = {}
    for spec in zoo.INDEX[net]["inputs"]:
        name = spec["name"]
        if name not in inputs:
            continue
        shape = (ROWS.get(net, 1) * batch,) + tuple(spec["shape"][1:])
        if "recipe" in spec:
            out[name] = zoo.params.make_input(name, shape, spec["recipe"])
        else:   # stored rows (dense features of wide & deep), cycled
            out[name] = inputs[name][np.arange(shape[0]) % len(inputs[name])]
    return out


@pytest.mark.parametrize("net", zoo.NETS + [pytest.param(n, marks=pytest.mark.skipif(
    not os.environ.get("RAYMOD_ONNX_ALL_ZOO"), reason="large weights (tens of seconds); "
    "set RAYMOD_ONNX_ALL_ZOO=1")) for n in zoo.HEAVY])
def test_zoo_network_serves_any_batch(net, tmp_path):
    sym, arg, aux, inputs, labels = zoo._network(net)
    sym = zoo._with_logits(sym)
    path = str(tmp_path / f"{net}.onnx")
    rm.onnx.export_model(sym, [arg, aux], [v.shape for v in inputs.values()],
                         onnx_file_path=path, dynamic=True)
    onnx.checker.check_model(path)
    model = onnx.load(path)
    rows = ROWS.get(net, 1)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == \
        ("N" if rows == 1 else f"{rows}*N")
    session = _session(path)
    for batch in BATCHES:
        data = _zoo_inputs(net, inputs, batch)
        label_shapes = {n: (batch,) + s[1:] for n, s in labels.items()}
        ours = zoo._raymod_outputs(sym, arg, aux, data, label_shapes)
        theirs = session.run(None, data)
        zoo._assert_close(ours, theirs, f"{net}, batch {batch}")
        for o, b in zip(session.get_outputs(), theirs):
            assert _declared(model, o.name, batch) == b.shape, (net, o.name, batch)


def test_zoo_lenet_predict_over_batches(tmp_path):
    # Module.predict over an iterator (batches of 3, the last one padded) against one run
    sym, arg, aux, _, _ = zoo._network("lenet")
    x = zoo.params.make_input("data", (17, 1, 28, 28),
                              {"kind": "uniform", "low": -1.0, "high": 1.0})
    path = str(tmp_path / "lenet.onnx")
    rm.onnx.export_model(sym, [arg, aux], [(2, 1, 28, 28)], onnx_file_path=path,
                         dynamic=True)
    mod = rm.mod.Module(sym, data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", (3, 1, 28, 28))], label_shapes=[("softmax_label", (3,))],
             for_training=False)
    mod.set_params(arg, aux)
    ours = np.asarray(mod.predict(rm.io.NDArrayIter(x, batch_size=3)))
    zoo._assert_close([ours], _session(path).run(None, {"data": x}), "lenet predict, 17")


# --- what cannot be made batch-dynamic: a clear error, nothing written --------------------
x = S.Variable("data")


def _refused(sym, params: dict, in_shapes: list, tmp_path, match: str, **kwargs) -> None:
    path = tmp_path / "refused.onnx"
    with pytest.raises(DynamicBatchError, match=match):
        rm.onnx.export_model(sym, params, in_shapes, onnx_file_path=str(path), dynamic=True,
                             **kwargs)
    assert not path.exists()


def test_dim_not_affine_in_the_batch_is_refused(tmp_path):
    # (N, N) flattened: N * N elements, not scale * N + offset
    outer = S.Reshape(S.dot(x, x, transpose_b=True, name="gram"), shape=(-1,), name="flat")
    _refused(outer, {}, [(2, 3)], tmp_path,
             r"operator Reshape \(node 'flat'\) output 0 has dimension 0 = 4, 9, 49 .*"
             r"not a whole multiple of the batch")


def test_attribute_from_a_batch_dim_is_refused(tmp_path, rng):
    # a batch axis among the spatial ones: ConvTranspose's pads are fixed attributes
    deconv = S.Deconvolution(x, kernel=(2, 2), num_filter=2, stride=(2, 2), no_bias=True,
                             name="up")
    weight = {"up_weight": rng.uniform(-1, 1, (3, 2, 2, 2)).astype(np.float32)}
    _refused(deconv, weight, [(1, 3, 4, 4)], tmp_path,
             r"operator Deconvolution \(node 'up'\) takes its padding from dimension 2",
             dynamic_input_shapes=[(1, 3, None, 4)])
    # a Convolution has no such attribute: the same batch axis exports and runs
    conv = S.Convolution(x, kernel=(1, 1), num_filter=2, no_bias=True, name="c")
    cw = {"c_weight": rng.uniform(-1, 1, (2, 3, 1, 1)).astype(np.float32)}
    path = str(tmp_path / "c.onnx")
    rm.onnx.export_model(conv, cw, [(1, 3, 4, 4)], onnx_file_path=path, dynamic=True,
                         dynamic_input_shapes=[(1, 3, None, 4)])
    data = rng.uniform(-1, 1, (1, 3, 9, 4)).astype(np.float32)
    want = conv.bind(rm.cpu(), args={"data": data, **cw}, grad_req="null").forward()[0]
    np.testing.assert_allclose(_session(path).run(None, {"data": data})[0], np.asarray(want),
                               rtol=1e-4, atol=1e-5)


def test_time_major_rnn_needs_its_batch_axis_named(tmp_path):
    sym = S.RNN(x, S.Variable("params"), S.Variable("h0"), state_size=6, num_layers=1,
                mode="rnn_tanh", name="rnn")
    params = {"params": np.zeros(sym.infer_shape(data=(5, 3, 4), h0=(1, 3, 6))[0][1],
                                 np.float32)}
    with pytest.raises(ValueError, match=r"batch dimensions must agree, got data: 5, h0: 1"):
        rm.onnx.export_model(sym, params, [(5, 3, 4), (1, 3, 6)], dynamic=True,
                             onnx_file_path=str(tmp_path / "r.onnx"))


@pytest.mark.parametrize("dyn,match", [
    ([(None, None)], r"at most one None"),
    ([(None, 4)], r"must be its in_shapes \(3, 5\) with None at the batch axis"),
    ([(None, 5), (None, 5)], r"dynamic_input_shapes has 2 shape\(s\), the network has 1"),
    ("N,5", r"dynamic_input_shapes must be a list of shapes"),
])
def test_bad_dynamic_input_shapes_are_named(dyn, match, tmp_path):
    net = S.FullyConnected(x, num_hidden=2, name="fc")
    prm = {"fc_weight": np.ones((2, 5), np.float32), "fc_bias": np.zeros(2, np.float32)}
    with pytest.raises((ValueError, TypeError), match=match):
        rm.onnx.export_model(net, prm, [(3, 5)], onnx_file_path=str(tmp_path / "x.onnx"),
                             dynamic=True, dynamic_input_shapes=dyn)
    assert not (tmp_path / "x.onnx").exists()


def test_static_export_ignores_dynamic_input_shapes(tmp_path, caplog):
    net = S.FullyConnected(x, num_hidden=2, name="fc")
    prm = {"fc_weight": np.ones((2, 5), np.float32), "fc_bias": np.zeros(2, np.float32)}
    path = str(tmp_path / "s.onnx")
    with caplog.at_level(logging.WARNING, logger="raymod.onnx.export"):
        rm.onnx.export_model(net, prm, [(3, 5)], onnx_file_path=path,
                             dynamic_input_shapes=[(None, 5)])
    assert "ignored without dynamic=True" in caplog.text
    dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [3, 5]
