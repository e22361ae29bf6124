"""MXNet 1.9.1's own example networks, replayed through raymod and compared with MXNet.

The fixtures in ``tests/fixtures/mxnet/zoo`` were recorded by
``tools/make_mxnet_zoo_fixtures.py`` from the networks of MXNet's ``example/`` folder (ImageNet
and CIFAR classifiers, bucketing LSTM LMs, Faster R-CNN, SSD, FCN, CTC, DeepSpeech2, neural
style, VAE / VAE-GAN, factorization machine, wide & deep). For every network this test

1. loads ``NET-symbol.json`` with ``raymod.symbol.load_json`` (a network using an operator raymod
   lacks FAILS here, naming the missing operators: it is not skipped);
2. checks list_arguments / list_outputs / list_auxiliary_states, infer_shape and infer_type;
3. makes parameters, auxiliary states, inputs and head gradients with ``tests/zoo/params.py``
   (the recipe the generator used) and checks each array's crc32 against MXNet's side;
4. binds on ``rm.cpu()``, runs ``forward(is_train=False)``, then ``forward(is_train=True)`` +
   ``backward(head gradients)``, and compares with MXNet.

Each mode (inference; training = outputs, gradients and aux states) is compared in the dtype
of its MXNet reference (``reference_dtype`` in the index): float32, except where MXNet's own
float32 result is more than RTOL/4 from its float64 one (deep BatchNorm networks in training
mode at these small batches: float32 rounding flips ReLUs and batch statistics spread the
change, MXNet's float32 gradients being up to 39% off); there raymod runs that mode in
float64 against MXNet's float64 run. See ``tests/fixtures/mxnet/README.md``.

Tolerances (RTOL = 1e-4), with ||x|| the Euclidean norm over all entries:

- outputs, probes (inputs of squashing/detection heads) and auxiliary states after training:
  ``||ours - mxnet|| <= RTOL * max(||mxnet||, 1e-30)`` per array;
- a gradient stored in full (< 4096 entries): ``||ours - mxnet|| <= RTOL * max(||mxnet||, F)``,
  where the floor ``F = 1e-3 * G`` and ``G`` is the norm of all the network's recorded
  gradients together: a gradient that is analytically zero (a conv bias feeding a BatchNorm)
  is float32 cancellation noise in both frameworks, so it is held to ``RTOL * F`` absolutely;
- a gradient stored as a summary: ``|norm - norm_mx| <= RTOL * max(norm_mx, F)``;
  projection on the fixed probe p: ``|proj - proj_mx| <= 4 * RTOL * max(norm_mx, F) * rms(p)``
  (an error e with ||e|| <= RTOL ||g|| moves the projection by e.p, whose spread over random
  probes is ||e|| rms(p): four standard deviations); the sampled entries:
  ``allclose(ours, mxnet, rtol=RTOL, atol=RTOL * max|g_mx|)``.

Randomness is removed on both sides by ``tests/zoo/graph_edits.py`` (sampling nodes become
inputs holding MXNet's draws; Dropout p=0 in the training run) and, for Faster R-CNN's Python
``proposal_target`` op, by a raymod CustomOp that plays back the outputs MXNet's op produced.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import time

import numpy as np
import pytest

import raymod as rm
from raymod.ops import OPS

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures", "mxnet", "zoo")
RTOL = 1e-4
TINY = 1e-30
FLOOR_FRACTION = 1e-3


def _load_helper(name: str):
    # by path, under a private name: these helpers are shared with the MXNet-side generator
    spec = importlib.util.spec_from_file_location(f"_raymod_zoo_{name}",
                                                  os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


params = _load_helper("params")
graph_edits = _load_helper("graph_edits")

with open(os.path.join(FIXTURES, "index.json")) as _f:
    INDEX = json.load(_f)
NETS = list(INDEX["networks"])


def entry(net: str) -> dict:
    return INDEX["networks"][net]


@functools.lru_cache(maxsize=None)
def npz(net: str) -> dict:
    with np.load(os.path.join(FIXTURES, entry(net)["npz_file"])) as z:
        return {k: z[k] for k in z.files}


def rel_err(ours, ref, floor: float = TINY) -> float:
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        return math.inf
    return float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), floor))


# ------------------------------------------------------------------ loading
def missing_ops(graph: dict) -> list[str]:
    """Operators of ``graph`` raymod cannot build, with the custom-op machinery spelled out."""
    missing = [op for op in graph_edits.op_names(graph) if op not in OPS]
    if any(n["op"] == "Custom" for n in graph["nodes"]) and not hasattr(rm, "operator"):
        missing.append("raymod.operator (CustomOp / CustomOpProp / register, for 'Custom')")
    return missing


@functools.lru_cache(maxsize=None)
def loaded(net: str):
    """(graph dict, symbol): the example's JSON loaded by raymod; fails the calling test
    naming every operator raymod lacks, or with load_json's error."""
    with open(os.path.join(FIXTURES, entry(net)["symbol_file"])) as f:
        text = f.read()
    graph = json.loads(text)
    lacking = missing_ops(graph)
    if lacking:   # a failure, not a skip: these operators are being written
        pytest.fail(f"{net}: raymod lacks operator(s) {', '.join(lacking)} used by this MXNet "
                    f"example network", pytrace=False)
    if any(n["op"] == "Custom" for n in graph["nodes"]):
        install_replay(net)
    try:
        return graph, rm.sym.load_json(text)
    except Exception as err:  # the load error itself is the finding: report it with the net
        raise AssertionError(f"{net}: rm.sym.load_json failed: {type(err).__name__}: {err}") \
            from err


def input_shapes(net: str) -> dict:
    return {i["name"]: tuple(i["shape"]) for i in entry(net)["inputs"]}


# ------------------------------------------------------------------ custom-op replay
REPLAY: dict = {"net": None, "calls": []}


def install_replay(net: str) -> None:
    """Register, under the example's op_type, a raymod CustomOp that plays back the outputs
    MXNet's Python op produced (pass 0: inference, pass 1: training) and keeps its inputs."""
    info = entry(net)["custom"]
    if REPLAY.get("registered") == info["op_type"]:
        REPLAY.update(net=net, calls=[])
        return
    recorded = npz(net)

    class Replay(rm.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            pass_name = "train" if is_train else "infer"
            data = npz(REPLAY["net"])
            REPLAY["calls"].append((pass_name, [np.array(a) for a in in_data]))
            for k in range(len(out_data)):
                self.assign(out_data[k], req[k], data[f"custom:{pass_name}:out:{k}"])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            for k in range(len(in_grad)):
                self.assign(in_grad[k], req[k], 0)

    n_out = len(info["outputs"])
    out_shapes = [recorded[f"custom:train:out:{k}"].shape for k in range(n_out)]

    @rm.operator.register(info["op_type"])
    class ReplayProp(rm.operator.CustomOpProp):
        def __init__(self, **kwargs):
            super().__init__(need_top_grad=False)

        def list_arguments(self):
            return list(info["arguments"])

        def list_outputs(self):
            return list(info["outputs"])

        def infer_shape(self, in_shape):
            return in_shape, [list(s) for s in out_shapes], []

        def create_operator(self, ctx, shapes, dtypes):
            return Replay()

    REPLAY.update(registered=info["op_type"], net=net, calls=[])


# ------------------------------------------------------------------ running
def make_inputs(net: str) -> dict:
    data = npz(net)
    out = {}
    for spec in entry(net)["inputs"]:
        name = spec["name"]
        if "npz" in spec:
            out[name] = data[spec["npz"]].astype(np.float32)
        else:
            out[name] = params.make_input(name, spec["shape"], spec["recipe"])
    for name in entry(net)["frozen_random_nodes"]:
        out[name] = data[f"input:{name}"].astype(np.float32)
    return out


def with_probes(sym, probe_names):
    internals = sym.get_internals()
    return rm.sym.Group([sym] + [internals[p] for p in probe_names])


_RAN: dict = {}


def ran(net: str) -> dict:
    """Everything raymod computes for one network (arrays freed, summaries kept); computed
    once, and a failure is re-reported by every test that needs the results."""
    if net not in _RAN:
        try:
            _RAN[net] = _run(net)
        except AssertionError as err:
            _RAN[net] = err
        except Exception as err:  # an op failing at bind/forward/backward is the finding
            _RAN[net] = AssertionError(f"{net}: raymod raised {type(err).__name__} while "
                                       f"binding or running it: {err}")
            _RAN[net].__cause__ = err
    if isinstance(_RAN[net], AssertionError):
        raise _RAN[net]
    return _RAN[net]


def _run(net: str) -> dict:
    graph, sym = loaded(net)
    e = entry(net)
    t0 = time.perf_counter()
    result: dict = {"checksum_mismatch": [], "custom_calls": []}
    inputs = make_inputs(net)
    arg_shapes, aux_shapes = e["arg_shapes"], e["aux_shapes"]
    prm = {}
    for name, shape in arg_shapes.items():
        if name in inputs:
            continue
        prm[name] = params.make_param(name, shape)
        if params.crc32(prm[name]) != e["params"][name]["crc32"]:
            result["checksum_mismatch"].append(name)
    aux = {}
    for name, shape in aux_shapes.items():
        aux[name] = params.make_param(name, shape)
        if params.crc32(aux[name]) != e["aux"][name]["crc32"]:
            result["checksum_mismatch"].append(name)
    for spec in e["inputs"]:
        if "crc32" in spec and params.crc32(inputs[spec["name"]]) != spec["crc32"]:
            result["checksum_mismatch"].append(spec["name"])
    cmp_graph, frozen = graph_edits.freeze_random(graph)
    assert frozen == e["frozen_random_nodes"]
    train_graph, zeroed = graph_edits.zero_dropout(cmp_graph)
    probes = e["probes"]
    n_out = len(e["list_outputs"])
    grad_names = sorted(prm) + list(e["grad_inputs"])
    dtypes = e["reference_dtype"]
    cmp_sym = with_probes(rm.sym.load_json(json.dumps(cmp_graph)), probes)
    train_sym = with_probes(rm.sym.load_json(json.dumps(train_graph)), probes) if zeroed \
        else cmp_sym
    REPLAY["calls"] = []

    def cast(arrays: dict, dtype: str) -> dict:
        return {k: v.astype(dtype, copy=False) for k, v in arrays.items()}

    def bind(sym, dtype, grads):
        args = cast({**inputs, **prm}, dtype)
        return sym.bind(rm.cpu(), args=args,
                        args_grad={n: np.zeros_like(args[n]) for n in grads} if grads else None,
                        grad_req={n: ("write" if n in grads else "null") for n in args},
                        aux_states=cast(aux, dtype))

    exe = bind(train_sym, dtypes["train"], grad_names)
    # inference reuses the training executor when the graph and the dtype are the same
    same = train_sym is cmp_sym and dtypes["infer"] == dtypes["train"]
    infer_exe = exe if same else bind(cmp_sym, dtypes["infer"], [])
    outs = [np.array(o) for o in infer_exe.forward(is_train=False)]
    result["infer"], result["infer_probe"] = outs[:n_out], dict(zip(probes, outs[n_out:]))
    del infer_exe
    outs = [np.array(o) for o in exe.forward(is_train=True)]
    heads = [params.head_grad(h["recipe"], h["shape"], dtypes["train"]) for h in e["head_grads"]]
    exe.backward(heads + [np.zeros_like(o) for o in outs[n_out:]])
    result["train"], result["train_probe"] = outs[:n_out], dict(zip(probes, outs[n_out:]))
    result["grads"] = {n: params.summarize(n, exe.grad_dict[n]) for n in grad_names}
    result["aux_after"] = {n: np.array(exe.aux_dict[n]) for n in aux}
    result["custom_calls"] = list(REPLAY["calls"])
    result["seconds"] = time.perf_counter() - t0
    return result


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("net", NETS)
def test_symbol_loads(net):
    _, sym = loaded(net)
    assert sym.tojson()


@pytest.mark.parametrize("net", NETS)
def test_lists(net):
    _, sym = loaded(net)
    e = entry(net)
    assert sym.list_arguments() == e["list_arguments"]
    assert sym.list_outputs() == e["list_outputs"]
    assert sym.list_auxiliary_states() == e["list_auxiliary_states"]


@pytest.mark.parametrize("net", NETS)
def test_infer_shape(net):
    _, sym = loaded(net)
    e = entry(net)
    arg, out, aux = sym.infer_shape(**input_shapes(net))
    assert dict(zip(sym.list_arguments(), map(list, arg))) == e["arg_shapes"]
    assert [list(s) for s in out] == e["out_shapes"]
    assert dict(zip(sym.list_auxiliary_states(), map(list, aux))) == e["aux_shapes"]
    _, out_types, _ = sym.infer_type(**{k: np.float32 for k in input_shapes(net)})
    assert [np.dtype(t).name for t in out_types] == e["out_types"]


@pytest.mark.parametrize("net", NETS)
def test_parameter_recipe(net):
    assert ran(net)["checksum_mismatch"] == [], \
        "params.py no longer makes the arrays MXNet was run with (recipe or numpy changed)"


def _compare_outputs(net: str, mode: str) -> list[str]:
    r, data, e = ran(net), npz(net), entry(net)
    bad = []
    for i, name in enumerate(e["list_outputs"]):
        err = rel_err(r[mode][i], data[f"{mode}:{i}"])
        if not err <= RTOL:
            bad.append(f"output {i} {name}: relative error {err:.3g}")
    for p in e["probes"]:
        err = rel_err(r[f"{mode}_probe"][p], data[f"{mode}_probe:{p}"])
        if not err <= RTOL:
            bad.append(f"probe {p}: relative error {err:.3g}")
    return bad


@pytest.mark.parametrize("net", NETS)
def test_inference(net):
    bad = _compare_outputs(net, "infer")
    assert not bad, f"{net} forward(is_train=False) differs from MXNet: " + "; ".join(bad)


@pytest.mark.parametrize("net", NETS)
def test_training(net):
    r, data, e = ran(net), npz(net), entry(net)
    bad = _compare_outputs(net, "train")
    for name in e["list_auxiliary_states"]:
        err = rel_err(r["aux_after"][name], data[f"aux_after:{name}"])
        if not err <= RTOL:
            bad.append(f"aux state {name} after training: relative error {err:.3g}")
    for pass_name, ins in r["custom_calls"]:
        for k, a in enumerate(ins):
            err = rel_err(a, data[f"custom:{pass_name}:in:{k}"])
            if not err <= RTOL:
                bad.append(f"input {k} of the replayed custom op ({pass_name}): relative "
                           f"error {err:.3g}")
    assert not bad, f"{net} forward(is_train=True) differs from MXNet: " + "; ".join(bad)


def gradient_errors(net: str) -> list[str]:
    r, data, e = ran(net), npz(net), entry(net)
    total = math.sqrt(sum(g["norm"] ** 2 for g in e["grads"].values()))
    floor = max(FLOOR_FRACTION * total, TINY)
    bad = []
    for name, ref in e["grads"].items():
        ours = r["grads"][name]
        scale = max(ref["norm"], floor)
        if f"grad:{name}:full" in data:
            err = np.linalg.norm(ours["full"] - data[f"grad:{name}:full"]) / scale
            if not err <= RTOL:
                bad.append(f"{name}: relative error {err:.3g}")
            continue
        problems = []
        if not abs(ours["norm"] - ref["norm"]) <= RTOL * scale:
            problems.append(f"norm {ours['norm']:.7g} vs {ref['norm']:.7g}")
        if not abs(ours["projection"] - ref["projection"]) <= 4 * RTOL * scale * ref["probe_rms"]:
            problems.append(f"projection {ours['projection']:.7g} vs {ref['projection']:.7g}")
        samples = data[f"grad:{name}:samples"]
        if not np.array_equal(ours["positions"], data[f"grad:{name}:positions"]):
            problems.append("sample positions differ (params.py changed)")
        elif not np.allclose(ours["samples"], samples, rtol=RTOL, atol=RTOL * ref["max_abs"]):
            worst = np.abs(ours["samples"] - samples).max()
            problems.append(f"sampled entries differ by up to {worst:.3g} "
                            f"(max |g| {ref['max_abs']:.3g})")
        if problems:
            bad.append(f"{name}: " + ", ".join(problems))
    return bad


@pytest.mark.parametrize("net", NETS)
def test_gradients(net):
    bad = gradient_errors(net)
    assert not bad, (f"{net}: {len(bad)} of {len(entry(net)['grads'])} gradients differ from "
                     f"MXNet: " + "; ".join(bad[:8]) + (" ..." if len(bad) > 8 else ""))


def test_fixtures_are_complete():
    """Every indexed network has its files, and the index was made with this recipe."""
    assert INDEX["recipe_version"] == params.RECIPE_VERSION
    assert INDEX["mxnet_version"] == "1.9.1"
    for net in NETS:
        e = entry(net)
        assert os.path.exists(os.path.join(FIXTURES, e["symbol_file"]))
        data = npz(net)
        assert all(f"infer:{i}" in data and f"train:{i}" in data
                   for i in range(len(e["list_outputs"])))
