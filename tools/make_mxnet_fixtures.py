"""Generate MXNet 1.9.1 ground-truth fixtures for raymod's tests.

This script must run under a Python that has the real MXNet 1.x installed, NOT
raymod's own environment. On the development machine that is a separate venv:

    OMP_NUM_THREADS=2 /tmp/mxvenv/bin/python tools/make_mxnet_fixtures.py

(mxnet==1.9.1 with numpy<1.24; `python -m venv /tmp/mxvenv &&
/tmp/mxvenv/bin/pip install mxnet==1.9.1 "numpy<1.24"`). It writes everything
under tests/fixtures/mxnet/ (path relative to the repository root, resolved
from this file's location), overwriting what is there:

    lenet-symbol.json, lenet-expected.json       LeNet graph + shape inference
    lstm2x5-symbol.json, lstm2x5-expected.json   2-layer LSTM LM unrolled 5 steps
    mlp_bn-symbol.json, mlp_bn-0001.params,      tiny trained checkpoint with
    mlp_bn-0001.states, mlp_bn-io.npz            BatchNorm aux states + predictions
    symbols.json                                 small JSON-layout / naming cases
    ops.json, ops.npz                            per-operator forward/backward truth
    README.md                                    how these were made

Every random draw is seeded, so re-running gives byte-identical npz contents
(the .params/.states binaries are also deterministic on one machine).
"""
import argparse
import json
import os
import pickle
import sys

os.environ.setdefault("MXNET_SUBGRAPH_VERBOSE", "0")

import numpy as np  # noqa: E402
import mxnet as mx  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "mxnet")


def fresh_names():
    """A NameManager whose counters start at zero, so auto names are stable."""
    return mx.name.NameManager()


def dump_json(obj, name):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


def shapes_record(sym, **shapes):
    arg, out, aux = sym.infer_shape(**shapes)
    return {
        "list_arguments": sym.list_arguments(),
        "list_outputs": sym.list_outputs(),
        "list_auxiliary_states": sym.list_auxiliary_states(),
        "infer_shape_input": {k: list(v) for k, v in shapes.items()},
        "arg_shapes": [list(s) for s in arg],
        "out_shapes": [list(s) for s in out],
        "aux_shapes": [list(s) for s in aux],
        "arg_shape_dict": {n: list(s) for n, s in zip(sym.list_arguments(), arg)},
        "aux_shape_dict": {n: list(s) for n, s in zip(sym.list_auxiliary_states(), aux)},
    }


def node_list(sym):
    return [[n["op"], n["name"]] for n in json.loads(sym.tojson())["nodes"]]


# ---------------------------------------------------------------- a. LeNet
def lenet():
    with fresh_names():
        data = mx.sym.Variable("data")
        x = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
        x = mx.sym.Activation(x, act_type="tanh")
        x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
        x = mx.sym.Convolution(x, kernel=(5, 5), num_filter=50, name="conv2")
        x = mx.sym.Activation(x, act_type="tanh")
        x = mx.sym.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
        x = mx.sym.Flatten(x)
        x = mx.sym.FullyConnected(x, num_hidden=500, name="fc1")
        x = mx.sym.Activation(x, act_type="tanh")
        x = mx.sym.FullyConnected(x, num_hidden=10, name="fc2")
        return mx.sym.SoftmaxOutput(x, name="softmax")


def make_lenet():
    sym = lenet()
    sym.save(os.path.join(OUT, "lenet-symbol.json"))
    rec = shapes_record(sym, data=(64, 1, 28, 28))
    rec["nodes"] = node_list(sym)
    rec["mxnet_version"] = mx.__version__
    dump_json(rec, "lenet-expected.json")


# ---------------------------------------------------------------- b. LSTM LM
def make_lstm():
    with fresh_names():
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=50, output_dim=16, name="embed")
        stack = mx.rnn.SequentialRNNCell()
        for i in range(2):
            stack.add(mx.rnn.LSTMCell(num_hidden=32, prefix="lstm_l%d_" % i))
        stack.reset()
        outputs, states = stack.unroll(5, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, 32))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=50, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        sym = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
    sym.save(os.path.join(OUT, "lstm2x5-symbol.json"))
    rec = shapes_record(sym, data=(8, 5), softmax_label=(8, 5))
    graph = json.loads(sym.tojson())
    rec["nodes"] = [[n["op"], n["name"]] for n in graph["nodes"]]
    rec["node_attrs"] = {n["name"]: n.get("attrs", {}) for n in graph["nodes"] if n["op"] != "null"}
    rec["mxnet_version"] = mx.__version__
    dump_json(rec, "lstm2x5-expected.json")


# ---------------------------------------------------------------- c. checkpoint
def make_mlp_bn():
    mx.random.seed(7)
    rng = np.random.RandomState(7)
    X = rng.randn(100, 20).astype(np.float32)
    y = (X[:, :3].argmax(axis=1)).astype(np.float32)
    with fresh_names():
        data = mx.sym.Variable("data")
        x = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
        x = mx.sym.BatchNorm(x, fix_gamma=False, name="bn1")
        x = mx.sym.Activation(x, act_type="relu", name="relu1")
        x = mx.sym.FullyConnected(x, num_hidden=3, name="fc2")
        sym = mx.sym.SoftmaxOutput(x, name="softmax")
    it = mx.io.NDArrayIter(X, y, batch_size=10, shuffle=False)
    mod = mx.mod.Module(sym, context=mx.cpu())
    mod.fit(it, num_epoch=1, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(magnitude=2.0), eval_metric="acc")
    prefix = os.path.join(OUT, "mlp_bn")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    Xp = rng.randn(10, 20).astype(np.float32)
    pred = mod.predict(mx.io.NDArrayIter(Xp, batch_size=10)).asnumpy()
    arg, aux = mod.get_params()
    io = {"input": Xp, "pred": pred, "train_data": X, "train_label": y}
    for k, v in arg.items():
        io["arg:" + k] = v.asnumpy()
    for k, v in aux.items():
        io["aux:" + k] = v.asnumpy()
    # Optimizer state as numpy, to check a .states reader. The .states file is
    # pickle.dumps(updater.states) where states maps the parameter index (int,
    # position in mod._exec_group.param_names) to an NDArray (momentum buffer).
    with open(prefix + "-0001.states", "rb") as f:
        states = pickle.loads(f.read())
    names = mod._exec_group.param_names
    for idx, st in states.items():
        io["state:%d:%s" % (idx, names[idx])] = st.asnumpy()
    np.savez_compressed(prefix + "-io.npz", **io)


# ---------------------------------------------------------------- symbols.json
LEGACY_JSON = (
    '{"nodes":[{"op":"null","name":"data","inputs":[]},'
    '{"op":"null","name":"fc_weight","param":{},"inputs":[],"backward_source_id":-1},'
    '{"op":"null","name":"fc_bias","param":{},"inputs":[],"backward_source_id":-1},'
    '{"op":"FullyConnected","name":"fc","param":{"num_hidden":"4","no_bias":"False"},'
    '"attr":{"lr_mult":"2"},"inputs":[[0,0],[1,0],[2,0]],"backward_source_id":-1}],'
    '"arg_nodes":[0,1,2],"heads":[[3,0]]}'
)


def make_symbols():
    cases = []

    def add(desc, build):
        with fresh_names():
            s = build()
        cases.append({
            "desc": desc,
            "json": json.loads(s.tojson()),
            "list_arguments": s.list_arguments(),
            "list_outputs": s.list_outputs(),
            "list_auxiliary_states": s.list_auxiliary_states(),
            "attr_dict": s.attr_dict(),
        })

    V = mx.sym.Variable
    add("a+b", lambda: V("a") + V("b"))
    add("a-b", lambda: V("a") - V("b"))
    add("a*b", lambda: V("a") * V("b"))
    add("a/b", lambda: V("a") / V("b"))
    add("a+1", lambda: V("a") + 1)
    add("1+a", lambda: 1 + V("a"))
    add("a-1", lambda: V("a") - 1)
    add("1-a", lambda: 1 - V("a"))
    add("a*2", lambda: V("a") * 2)
    add("a/2", lambda: V("a") / 2)
    add("2/a", lambda: 2 / V("a"))
    add("-a", lambda: -V("a"))
    add("a**2", lambda: V("a") ** 2)
    add("2**a", lambda: 2 ** V("a"))
    add("a+b then a+1 (counters per op)", lambda: (V("a") + V("b")) + ((V("a") + V("b")) + 1.5))
    add("two unnamed FullyConnected (auto names)",
        lambda: mx.sym.FullyConnected(mx.sym.FullyConnected(V("data"), num_hidden=4), num_hidden=2))
    add("Variable attrs: lr_mult, wd_mult, init, shape, dtype",
        lambda: V("x", lr_mult=2, wd_mult=0, init=mx.init.Xavier(), shape=(3, 4), dtype="float16"))
    add("FullyConnected with explicit weight variable carrying attrs",
        lambda: mx.sym.FullyConnected(V("data"), weight=V("w", lr_mult=0.5), num_hidden=3, name="fc"))

    def scoped():
        with mx.AttrScope(ctx_group="dev1", __layout__="NCHW"):
            return mx.sym.FullyConnected(V("x"), num_hidden=3, name="fcx")
    add("AttrScope(ctx_group, __layout__) propagates to auto-created weights", scoped)

    def prefixed():
        with mx.name.Prefix("net_"):
            return mx.sym.Activation(mx.sym.FullyConnected(V("data"), num_hidden=3), act_type="relu")
    add("mx.name.Prefix('net_')", prefixed)
    add("Group of two heads", lambda: mx.sym.Group([V("a") + 1, mx.sym.exp(V("b"), name="e")]))
    add("SliceChannel num_outputs=3 (output names)",
        lambda: mx.sym.SliceChannel(V("data"), num_outputs=3, axis=1))
    add("SliceChannel then pick output 1", lambda: mx.sym.SliceChannel(V("data"), num_outputs=3)[1])
    add("BatchNorm (aux states, output_mean_var)",
        lambda: mx.sym.BatchNorm(V("data"), name="bn", output_mean_var=True))
    add("get_internals of a 2-layer net",
        lambda: mx.sym.FullyConnected(mx.sym.Activation(mx.sym.FullyConnected(
            V("data"), num_hidden=4, name="fc1"), act_type="relu", name="r1"),
            num_hidden=2, name="fc2").get_internals())
    add("Symbol with lr_mult attr on op", lambda: mx.sym.FullyConnected(
        V("data"), num_hidden=3, name="fc", attr={"lr_mult": "0.1", "__wd_mult__": "0"}))
    add("Deconvolution default no_bias=True",
        lambda: mx.sym.Deconvolution(V("data"), kernel=(3, 3), num_filter=4, name="dc"))
    add("Embedding", lambda: mx.sym.Embedding(V("data"), input_dim=10, output_dim=4, name="emb"))
    add("rnn begin_state zeros",
        lambda: mx.sym.Group(mx.rnn.LSTMCell(8, prefix="l_").begin_state()))
    legacy = mx.sym.load_json(LEGACY_JSON)
    obj = {
        "mxnet_version": mx.__version__,
        "cases": cases,
        "legacy_v0_8_json": LEGACY_JSON,
        "legacy_upgraded_json": json.loads(legacy.tojson()),
        "legacy_attr_dict": legacy.attr_dict(),
    }
    dump_json(obj, "symbols.json")


# ---------------------------------------------------------------- d. operators
def sym_op(op):
    f = getattr(mx.sym, op, None)
    if f is None:
        f = getattr(mx.sym._internal, op)
    return f


class Case:
    """One operator case.

    inputs: list of (arg_name, shape, kind, grad) where kind is 'normal',
    'pos' (positive), 'int:<hi>' (integers in [0, hi)), 'len:<lo>:<hi>'
    (integers in [lo, hi]), 'label:<k>' (class ids), 'uniform' (0..1),
    'var' (positive, around 1), 'sep' (normal, kept away from 0 and ±a_min).
    aux: list of (aux_name, shape, kind).
    """

    def __init__(self, name, op, attrs, inputs, aux=(), positional=False, seed=0,
                 train=True, loss_head=False, note="", dtype=None):
        self.name, self.op, self.attrs = name, op, {k: str(v) for k, v in attrs.items()}
        self.inputs, self.aux = list(inputs), list(aux)
        self.positional, self.seed, self.train = positional, seed, train
        self.loss_head, self.note, self.dtype = loss_head, note, dtype


def gen(rng, shape, kind, dtype):
    if kind == "normal":
        a = rng.randn(*shape)
    elif kind == "sep":  # away from 0 so abs/clip/relu-like kinks are not hit
        a = rng.randn(*shape)
        a = np.where(np.abs(a) < 0.1, a + np.sign(a + 1e-12) * 0.2, a)
        a = np.where(np.abs(np.abs(a) - 0.5) < 0.05, a * 1.2, a)
    elif kind == "pos":
        a = rng.uniform(0.5, 2.0, size=shape)
    elif kind == "uniform":
        a = rng.uniform(0.05, 0.95, size=shape)
    elif kind == "var":
        a = rng.uniform(0.5, 1.5, size=shape)
    elif kind.startswith("int:"):
        a = rng.randint(0, int(kind[4:]), size=shape)
    elif kind.startswith("len:"):
        _, lo, hi = kind.split(":")
        a = rng.randint(int(lo), int(hi) + 1, size=shape)
    elif kind.startswith("label:"):
        a = rng.randint(0, int(kind[6:]), size=shape)
    else:
        raise ValueError(kind)
    return np.asarray(a, dtype=dtype)


def run_case(case, dtype, arrays):
    rng = np.random.RandomState(case.seed)
    with fresh_names():
        vars_ = [mx.sym.Variable(n) for (n, _, _, _) in case.inputs]
        auxv = {n: mx.sym.Variable(n) for (n, _, _) in case.aux}
        f = sym_op(case.op)
        if case.positional:
            sym = f(*vars_, name="op", **case.attrs)
        else:
            kw = {n: v for (n, _, _, _), v in zip(case.inputs, vars_)}
            kw.update(auxv)
            sym = f(name="op", **kw, **case.attrs)
    in_names = [n for (n, _, _, _) in case.inputs]
    assert sym.list_arguments() == in_names, (case.name, sym.list_arguments(), in_names)
    assert sym.list_auxiliary_states() == [n for (n, _, _) in case.aux], case.name
    ins = {n: gen(rng, s, k, dtype) for (n, s, k, _) in case.inputs}
    auxs = {n: gen(rng, s, k, dtype) for (n, s, k) in case.aux}
    grad_req = {n: ("write" if g else "null") for (n, _, _, g) in case.inputs}
    shapes = {n: s for (n, s, _, _) in case.inputs}
    shapes.update({n: s for (n, s, _) in case.aux})
    exe = sym.simple_bind(mx.cpu(), grad_req=grad_req,
                          type_dict={n: dtype for n in shapes}, **shapes)
    for n, v in ins.items():
        exe.arg_dict[n][:] = v
    for n, v in auxs.items():
        exe.aux_dict[n][:] = v
    out_names = sym.list_outputs()
    rec = {
        "name": case.name, "op": case.op, "attrs": case.attrs, "seed": case.seed,
        "dtype": np.dtype(dtype).name,
        "inputs": [{"name": n, "shape": list(s), "kind": k, "grad_req": grad_req[n]}
                   for (n, s, k, _) in case.inputs],
        "aux": [{"name": n, "shape": list(s), "kind": k} for (n, s, k) in case.aux],
        "outputs": out_names, "positional": case.positional,
        "node": [n for n in json.loads(sym.tojson())["nodes"] if n["name"] == "op"][0],
        "loss_head": case.loss_head, "note": case.note,
    }
    key = case.name + "/"
    for n, v in ins.items():
        arrays[key + "in:" + n] = v
    for n, v in auxs.items():
        arrays[key + "aux:" + n] = v
    if case.train:
        exe.forward(is_train=True)
        outs = [o.asnumpy() for o in exe.outputs]
        for n, o in zip(out_names, outs):
            arrays[key + "out:" + n] = o
        mx.nd.waitall()
        for n in auxs:
            arrays[key + "aux_after_fwd:" + n] = exe.aux_dict[n].asnumpy()
        ogs = [gen(rng, o.shape, "normal", dtype) for o in outs]
        for n, g in zip(out_names, ogs):
            arrays[key + "out_grad:" + n] = g
        exe.backward([mx.nd.array(g, dtype=dtype) for g in ogs])
        # BatchNorm updates its moving stats inside backward, and that write is
        # not tracked by the engine: wait for everything before reading aux.
        mx.nd.waitall()
        for n in auxs:
            arrays[key + "aux_after_bwd:" + n] = exe.aux_dict[n].asnumpy()
        for n in in_names:
            if grad_req[n] == "write":
                arrays[key + "grad:" + n] = exe.grad_dict[n].asnumpy()
        rec["output_shapes"] = [list(o.shape) for o in outs]
        if case.loss_head:
            # Check that the gradient does not depend on out_grad.
            exe.forward(is_train=True)
            exe.backward([mx.nd.array(2 * g + 1, dtype=dtype) for g in ogs])
            rec["grad_ignores_out_grad"] = all(
                np.array_equal(arrays[key + "grad:" + n], exe.grad_dict[n].asnumpy())
                for n in in_names if grad_req[n] == "write")
    # Inference forward from the original aux values.
    mx.nd.waitall()
    for n, v in auxs.items():
        exe.aux_dict[n][:] = v
    exe.forward(is_train=False)
    outs_inf = [o.asnumpy() for o in exe.outputs]
    differs = []
    for n, o in zip(out_names, outs_inf):
        if not case.train or not np.array_equal(o, arrays[key + "out:" + n]):
            arrays[key + "out_infer:" + n] = o
            differs.append(n)
    rec["infer_differs"] = differs if case.train else None
    if not case.train:
        rec["output_shapes"] = [list(o.shape) for o in outs_inf]
    return rec


def op_cases():
    C = Case
    cs = []
    # FullyConnected
    cs += [
        C("fc_flatten", "FullyConnected", {"num_hidden": 5},
          [("data", (3, 2, 4), "normal", 1), ("weight", (5, 8), "normal", 1), ("bias", (5,), "normal", 1)]),
        C("fc_noflatten", "FullyConnected", {"num_hidden": 5, "flatten": False},
          [("data", (3, 2, 4), "normal", 1), ("weight", (5, 4), "normal", 1), ("bias", (5,), "normal", 1)]),
        C("fc_nobias", "FullyConnected", {"num_hidden": 5, "no_bias": True},
          [("data", (3, 4), "normal", 1), ("weight", (5, 4), "normal", 1)]),
    ]
    # Convolution
    x = ("data", (2, 4, 7, 7), "normal", 1)
    cs += [
        C("conv_basic", "Convolution", {"kernel": (3, 3), "num_filter": 3},
          [x, ("weight", (3, 4, 3, 3), "normal", 1), ("bias", (3,), "normal", 1)]),
        C("conv_stride2_pad1", "Convolution", {"kernel": (3, 3), "num_filter": 3, "stride": (2, 2), "pad": (1, 1)},
          [x, ("weight", (3, 4, 3, 3), "normal", 1), ("bias", (3,), "normal", 1)]),
        C("conv_dilate2", "Convolution", {"kernel": (3, 3), "num_filter": 3, "dilate": (2, 2)},
          [x, ("weight", (3, 4, 3, 3), "normal", 1), ("bias", (3,), "normal", 1)]),
        C("conv_group2", "Convolution", {"kernel": (3, 3), "num_filter": 4, "num_group": 2, "pad": (1, 1)},
          [x, ("weight", (4, 2, 3, 3), "normal", 1), ("bias", (4,), "normal", 1)]),
        C("conv_nobias_rect", "Convolution",
          {"kernel": (3, 2), "num_filter": 3, "stride": (2, 1), "pad": (1, 0), "no_bias": True},
          [x, ("weight", (3, 4, 3, 2), "normal", 1)]),
        C("conv_all", "Convolution",
          {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1), "dilate": (2, 2), "num_group": 2},
          [x, ("weight", (4, 2, 3, 3), "normal", 1), ("bias", (4,), "normal", 1)]),
        C("conv1d", "Convolution", {"kernel": (3,), "num_filter": 2, "stride": (2,), "pad": (1,)},
          [("data", (2, 3, 9), "normal", 1), ("weight", (2, 3, 3), "normal", 1), ("bias", (2,), "normal", 1)]),
    ]
    # Deconvolution (weight layout: (in_channels, num_filter/num_group, kh, kw))
    xd = ("data", (2, 4, 4, 4), "normal", 1)
    cs += [
        C("deconv_basic", "Deconvolution", {"kernel": (3, 3), "num_filter": 3, "no_bias": False},
          [xd, ("weight", (4, 3, 3, 3), "normal", 1), ("bias", (3,), "normal", 1)]),
        C("deconv_default_nobias", "Deconvolution", {"kernel": (2, 2), "num_filter": 3, "stride": (2, 2)},
          [xd, ("weight", (4, 3, 2, 2), "normal", 1)], note="no_bias defaults to True for Deconvolution"),
        C("deconv_s2_p1_adj1", "Deconvolution",
          {"kernel": (3, 3), "num_filter": 3, "stride": (2, 2), "pad": (1, 1), "adj": (1, 1), "no_bias": False},
          [xd, ("weight", (4, 3, 3, 3), "normal", 1), ("bias", (3,), "normal", 1)]),
        C("deconv_group2", "Deconvolution",
          {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2), "pad": (1, 1), "num_group": 2},
          [xd, ("weight", (4, 2, 3, 3), "normal", 1)]),
        C("deconv_target_shape", "Deconvolution",
          {"kernel": (3, 3), "num_filter": 2, "stride": (2, 2), "target_shape": (8, 8)},
          [xd, ("weight", (4, 2, 3, 3), "normal", 1)], note="target_shape overrides pad/adj"),
        C("deconv_target_shape_odd", "Deconvolution",
          {"kernel": (4, 4), "num_filter": 2, "stride": (2, 2), "target_shape": (9, 9)},
          [xd, ("weight", (4, 2, 4, 4), "normal", 1)]),
    ]
    # Pooling
    xp = ("data", (2, 3, 7, 7), "normal", 1)
    xp6 = ("data", (2, 2, 6, 6), "normal", 1)
    for pt in ("max", "avg", "sum"):
        cs.append(C("pool_%s_valid" % pt, "Pooling", {"kernel": (3, 3), "stride": (2, 2), "pool_type": pt}, [xp6]))
        cs.append(C("pool_%s_full" % pt, "Pooling",
                    {"kernel": (3, 3), "stride": (2, 2), "pool_type": pt, "pooling_convention": "full"}, [xp6]))
        cs.append(C("pool_%s_global" % pt, "Pooling",
                    {"kernel": (1, 1), "pool_type": pt, "global_pool": True}, [xp]))
        cs.append(C("pool_%s_pad1" % pt, "Pooling",
                    {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": pt}, [xp]))
    cs += [
        C("pool_avg_pad1_full", "Pooling",
          {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg", "pooling_convention": "full"},
          [xp6]),
        C("pool_avg_pad1_nocip", "Pooling",
          {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg", "count_include_pad": False},
          [xp]),
        C("pool_avg_pad1_full_nocip", "Pooling",
          {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg",
           "pooling_convention": "full", "count_include_pad": False}, [xp6]),
        C("pool_max_pad1_full", "Pooling",
          {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max", "pooling_convention": "full"},
          [xp6]),
        C("pool_max_2x2", "Pooling", {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"},
          [("data", (2, 3, 5, 5), "normal", 1)]),
        C("pool_max_2x2_full", "Pooling",
          {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max", "pooling_convention": "full"},
          [("data", (2, 3, 5, 5), "normal", 1)]),
        C("pool_max_default_stride", "Pooling", {"kernel": (2, 2), "pool_type": "max"},
          [("data", (1, 2, 4, 4), "normal", 1)], note="stride defaults to 1"),
        C("pool1d_max", "Pooling", {"kernel": (3,), "stride": (2,), "pool_type": "max"},
          [("data", (2, 3, 8), "normal", 1)]),
    ]
    # Activation, LeakyReLU
    xa = ("data", (3, 4, 5), "sep", 1)
    for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
        cs.append(C("act_" + act, "Activation", {"act_type": act}, [xa]))
    cs += [
        C("leaky_default", "LeakyReLU", {}, [xa],
          note="default act_type leaky, slope 0.25; LeakyReLU's float64 results carry ~1e-8 "
               "relative error (float32-precision internals), compare with rtol ~1e-6"),
        C("leaky_0_1", "LeakyReLU", {"act_type": "leaky", "slope": 0.1}, [xa]),
        C("prelu", "LeakyReLU", {"act_type": "prelu"},
          [("data", (2, 3, 4, 4), "sep", 1), ("gamma", (3,), "uniform", 1)]),
        C("elu", "LeakyReLU", {"act_type": "elu", "slope": 0.7}, [xa]),
        C("elu_default", "LeakyReLU", {"act_type": "elu"}, [xa], note="default slope 0.25"),
        C("selu", "LeakyReLU", {"act_type": "selu"}, [xa],
          note="MXNet 1.9.1 selu backward for x<0 is lambda*(y+alpha), not the true derivative "
               "lambda*alpha*exp(x) = y+lambda*alpha"),
        C("gelu", "LeakyReLU", {"act_type": "gelu"}, [xa], note="erf form: 0.5*x*(1+erf(x/sqrt(2)))"),
    ]
    # BatchNorm
    bn_in = [("data", (4, 3, 2, 2), "normal", 1), ("gamma", (3,), "pos", 1), ("beta", (3,), "normal", 1)]
    bn_aux = [("moving_mean", (3,), "normal"), ("moving_var", (3,), "var")]
    cs += [
        C("bn_train_fixgamma", "BatchNorm", {}, bn_in, bn_aux,
          note="defaults: fix_gamma True (gamma treated as 1, its grad is 0), eps 1e-3, momentum 0.9"),
        C("bn_train", "BatchNorm", {"fix_gamma": False}, bn_in, bn_aux,
          note="moving stats are NOT changed by forward(is_train=True); the backward pass updates "
               "them: m = m*momentum + batch_mean*(1-momentum), v likewise with the biased batch var"),
        C("bn_train_eps_mom", "BatchNorm", {"fix_gamma": False, "eps": 1e-5, "momentum": 0.7}, bn_in, bn_aux),
        C("bn_global_stats", "BatchNorm", {"fix_gamma": False, "use_global_stats": True}, bn_in, bn_aux),
        C("bn_global_stats_fixgamma", "BatchNorm", {"use_global_stats": True}, bn_in, bn_aux),
        C("bn_2d", "BatchNorm", {"fix_gamma": False},
          [("data", (6, 3), "normal", 1), ("gamma", (3,), "pos", 1), ("beta", (3,), "normal", 1)], bn_aux),
        C("bn_axis_last", "BatchNorm", {"fix_gamma": False, "axis": -1},
          [("data", (2, 4, 3), "normal", 1), ("gamma", (3,), "pos", 1), ("beta", (3,), "normal", 1)], bn_aux),
        C("bn_output_mean_var", "BatchNorm", {"fix_gamma": False, "output_mean_var": True}, bn_in, bn_aux,
          note="outputs: output, batch mean, batch inverse std 1/sqrt(var+eps) (in training); "
               "backward ignores the out_grads of the mean and var outputs"),
    ]
    # Embedding
    cs += [
        C("embedding", "Embedding", {"input_dim": 7, "output_dim": 4},
          [("data", (3, 4), "int:7", 0), ("weight", (7, 4), "normal", 1)], note="data contains repeated ids"),
    ]
    # Shape ops
    x4 = ("data", (2, 3, 4, 5), "normal", 1)
    for nm, shp, extra in [
        ("0_m1", (0, -1), {}), ("m3_m2", (-3, -2), {}), ("0_m4_1_m1_m2", (0, -4, 1, -1, -2), {}),
        ("m4_1_2_m3_5", (-4, 1, 2, -3, 5), {}), ("2_m2", (2, -2), {}), ("m1", (-1,), {}),
        ("0_0_m1", (0, 0, -1), {}), ("m4_m1_1_m2", (-4, -1, 1, -2), {}),
        ("reverse_m1_0", (-1, 0), {"reverse": True}), ("6_m1_0", (6, -1, 0), {}),
    ]:
        a = {"shape": shp}
        a.update(extra)
        cs.append(C("reshape_" + nm, "Reshape", a, [x4]))
    cs += [
        C("flatten", "Flatten", {}, [x4]),
        C("transpose_axes", "transpose", {"axes": (2, 0, 3, 1)}, [x4]),
        C("transpose_default", "transpose", {}, [("data", (2, 3, 4), "normal", 1)]),
        C("expand_dims_1", "expand_dims", {"axis": 1}, [("data", (2, 3), "normal", 1)]),
        C("expand_dims_m1", "expand_dims", {"axis": -1}, [("data", (2, 3), "normal", 1)]),
        C("concat_dim1", "Concat", {"dim": 1},
          [("arg0", (2, 1, 3), "normal", 1), ("arg1", (2, 2, 3), "normal", 1), ("arg2", (2, 3, 3), "normal", 1)],
          positional=True),
        C("concat_dim0", "Concat", {"dim": 0},
          [("arg0", (1, 3), "normal", 1), ("arg1", (2, 3), "normal", 1)], positional=True),
        C("slicechannel_axis1", "SliceChannel", {"num_outputs": 3}, [("data", (2, 6, 2), "normal", 1)],
          note="default axis 1"),
        C("slicechannel_squeeze0", "SliceChannel", {"num_outputs": 3, "axis": 0, "squeeze_axis": False},
          [("data", (6, 2), "normal", 1)]),
        C("slicechannel_squeeze1", "SliceChannel", {"num_outputs": 3, "axis": 1, "squeeze_axis": True},
          [("data", (2, 3, 4), "normal", 1)]),
        C("slice_axis_neg_none", "slice_axis", {"axis": 1, "begin": -3, "end": None},
          [("data", (2, 5, 3), "normal", 1)]),
        C("slice_axis_pos", "slice_axis", {"axis": -1, "begin": 1, "end": 3},
          [("data", (2, 5, 4), "normal", 1)]),
        C("swapaxis_0_2", "SwapAxis", {"dim1": 0, "dim2": 2}, [("data", (2, 3, 4), "normal", 1)]),
        C("swapaxis_default", "SwapAxis", {}, [("data", (2, 3, 4), "normal", 1)], note="defaults dim1=0 dim2=0"),
    ]
    # Broadcast / elementwise / scalar
    for op in ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div"):
        kr = "pos" if op == "broadcast_div" else "normal"
        cs.append(C(op + "_bcast", op, {}, [("lhs", (2, 1, 4), "normal", 1), ("rhs", (1, 3, 1), kr, 1)]))
        cs.append(C(op + "_ndim", op, {}, [("lhs", (2, 3, 4), "normal", 1), ("rhs", (3, 1), kr, 1)]))
    cs += [
        C("broadcast_maximum", "broadcast_maximum", {}, [("lhs", (2, 3), "normal", 1), ("rhs", (1, 3), "normal", 1)]),
        C("broadcast_power", "broadcast_power", {}, [("lhs", (2, 3), "pos", 1), ("rhs", (2, 1), "normal", 1)]),
    ]
    e2 = lambda k="normal": [("lhs", (3, 4), "normal", 1), ("rhs", (3, 4), k, 1)]
    cs += [
        C("elemwise_add", "elemwise_add", {}, e2()),
        C("elemwise_sub", "elemwise_sub", {}, e2()),
        C("elemwise_mul", "elemwise_mul", {}, e2()),
        C("elemwise_div", "elemwise_div", {}, e2("pos")),
        C("maximum", "_maximum", {}, e2()),
        C("minimum", "_minimum", {}, e2()),
        C("power", "_power", {}, [("lhs", (3, 4), "pos", 1), ("rhs", (3, 4), "normal", 1)]),
        C("add_n", "add_n", {}, [("arg0", (3, 4), "normal", 1), ("arg1", (3, 4), "normal", 1),
                                 ("arg2", (3, 4), "normal", 1)], positional=True),
    ]
    for op, sc, kind in [("_plus_scalar", 1.5, "normal"), ("_minus_scalar", 1.5, "normal"),
                         ("_rminus_scalar", 1.5, "normal"), ("_mul_scalar", -2.5, "normal"),
                         ("_div_scalar", 4.0, "normal"), ("_rdiv_scalar", 2.0, "pos"),
                         ("_power_scalar", 3.0, "normal"), ("_rpower_scalar", 2.0, "normal"),
                         ("_maximum_scalar", 0.2, "sep"), ("_minimum_scalar", 0.2, "sep")]:
        cs.append(C(op.strip("_"), op, {"scalar": sc}, [("data", (3, 4), kind, 1)]))
    # dot / batch_dot
    cs += [
        C("dot", "dot", {}, [("lhs", (3, 4), "normal", 1), ("rhs", (4, 5), "normal", 1)]),
        C("dot_ta", "dot", {"transpose_a": True}, [("lhs", (4, 3), "normal", 1), ("rhs", (4, 5), "normal", 1)]),
        C("dot_tb", "dot", {"transpose_b": True}, [("lhs", (3, 4), "normal", 1), ("rhs", (5, 4), "normal", 1)]),
        C("dot_ta_tb", "dot", {"transpose_a": True, "transpose_b": True},
          [("lhs", (4, 3), "normal", 1), ("rhs", (5, 4), "normal", 1)]),
        C("dot_3d", "dot", {}, [("lhs", (2, 3, 4), "normal", 1), ("rhs", (4, 5), "normal", 1)],
          note="dot contracts last axis of lhs with first of rhs"),
        C("batch_dot", "batch_dot", {}, [("lhs", (2, 3, 4), "normal", 1), ("rhs", (2, 4, 5), "normal", 1)]),
        C("batch_dot_ta_tb", "batch_dot", {"transpose_a": True, "transpose_b": True},
          [("lhs", (2, 4, 3), "normal", 1), ("rhs", (2, 5, 4), "normal", 1)]),
    ]
    # reductions
    xr = ("data", (2, 3, 4), "normal", 1)
    for op in ("sum", "mean", "max"):
        cs += [
            C(op + "_all", op, {}, [xr]),
            C(op + "_axis1", op, {"axis": 1}, [xr]),
            C(op + "_axis1_keepdims", op, {"axis": 1, "keepdims": True}, [xr]),
            C(op + "_axis02", op, {"axis": (0, 2)}, [xr]),
            C(op + "_exclude1", op, {"axis": 1, "exclude": True}, [xr]),
            C(op + "_axism1_keep", op, {"axis": -1, "keepdims": True}, [xr]),
        ]
    cs.append(C("min_axis0", "min", {"axis": 0}, [xr]))
    cs.append(C("prod_axis2", "prod", {"axis": 2}, [("data", (2, 3, 4), "pos", 1)]))
    # unary
    cs += [
        C("exp", "exp", {}, [xa]),
        C("log", "log", {}, [("data", (3, 4), "pos", 1)]),
        C("sqrt", "sqrt", {}, [("data", (3, 4), "pos", 1)]),
        C("rsqrt", "rsqrt", {}, [("data", (3, 4), "pos", 1)]),
        C("square", "square", {}, [xa]),
        C("abs", "abs", {}, [xa]),
        C("negative", "negative", {}, [xa]),
        C("reciprocal", "reciprocal", {}, [("data", (3, 4), "pos", 1)]),
        C("sigmoid", "sigmoid", {}, [xa]),
        C("tanh", "tanh", {}, [xa]),
        C("relu", "relu", {}, [xa]),
        C("clip", "clip", {"a_min": -0.5, "a_max": 0.5}, [xa]),
    ]
    # softmax family
    xs = ("data", (2, 3, 4), "normal", 1)
    cs += [
        C("softmax_default", "softmax", {}, [xs], note="default axis -1"),
        C("softmax_axis1", "softmax", {"axis": 1}, [xs]),
        C("softmax_temp2", "softmax", {"axis": -1, "temperature": 2.0}, [xs]),
        C("log_softmax_axis1", "log_softmax", {"axis": 1}, [xs]),
        C("log_softmax_default", "log_softmax", {}, [xs]),
        C("softmaxact_instance", "SoftmaxActivation", {}, [("data", (2, 3, 2), "normal", 1)],
          note="mode instance (default): softmax over all non-batch dims flattened"),
        C("softmaxact_channel", "SoftmaxActivation", {"mode": "channel"}, [("data", (2, 3, 2, 2), "normal", 1)]),
    ]
    # SequenceMask
    cs += [
        C("seqmask_axis0", "SequenceMask", {"use_sequence_length": True, "value": -1.0},
          [("data", (4, 3, 2), "normal", 1), ("sequence_length", (3,), "len:1:4", 0)]),
        C("seqmask_axis1", "SequenceMask", {"use_sequence_length": True, "axis": 1},
          [("data", (3, 4, 2), "normal", 1), ("sequence_length", (3,), "len:1:4", 0)]),
        C("seqmask_off", "SequenceMask", {}, [("data", (4, 3, 2), "normal", 1)],
          note="use_sequence_length False: identity"),
    ]
    # misc
    cs += [
        C("blockgrad", "BlockGrad", {}, [xa], note="gradient is zero"),
        C("identity", "identity", {}, [xa]),
        C("zeros_like", "zeros_like", {}, [xa]),
        C("ones_like", "ones_like", {}, [xa]),
        C("dropout_infer", "Dropout", {"p": 0.5}, [xa], train=False, note="inference only: identity"),
    ]
    # Loss heads (gradients ignore out_grad)
    L = dict(loss_head=True)
    sm_in = [("data", (4, 5), "normal", 1), ("label", (4,), "label:5", 0)]
    sm_ign = [("data", (6, 5), "normal", 1), ("label", (6,), "int:3", 0)]
    mo_in = [("data", (2, 4, 3), "normal", 1), ("label", (2, 3), "label:4", 0)]
    ps_in = [("data", (2, 3, 5), "normal", 1), ("label", (2, 3), "label:5", 0)]
    cs += [
        C("softmaxout_default", "SoftmaxOutput", {}, sm_in, **L,
          note="out = softmax(data, last axis); grad = (out - onehot(label)) * grad_scale / k with "
               "k = 1 (normalization null), N (batch), number of non-ignored labels (valid); "
               "rows whose label == ignore_label get 0 when use_ignore"),
        C("softmaxout_grad_scale", "SoftmaxOutput", {"grad_scale": 0.5}, sm_in, **L),
        C("softmaxout_norm_batch", "SoftmaxOutput", {"normalization": "batch"}, sm_in, **L),
        C("softmaxout_ignore", "SoftmaxOutput", {"use_ignore": True, "ignore_label": 1}, sm_ign, **L,
          note="labels in {0,1,2}; label 1 ignored"),
        C("softmaxout_ignore_valid", "SoftmaxOutput",
          {"use_ignore": True, "ignore_label": 1, "normalization": "valid"}, sm_ign, **L),
        C("softmaxout_ignore_batch", "SoftmaxOutput",
          {"use_ignore": True, "ignore_label": 1, "normalization": "batch"}, sm_ign, **L),
        C("softmaxout_ignore_nouse", "SoftmaxOutput", {"ignore_label": 1}, sm_ign, **L,
          note="ignore_label without use_ignore has no effect"),
        C("softmaxout_multi", "SoftmaxOutput", {"multi_output": True}, mo_in, **L,
          note="multi_output: softmax over axis 1, label (N, d1*d2...); grad divided by the spatial "
               "size d even for normalization null (batch: N*d; valid: number of non-ignored labels)"),
        C("softmaxout_multi_valid", "SoftmaxOutput",
          {"multi_output": True, "normalization": "valid", "use_ignore": True, "ignore_label": 0}, mo_in, **L),
        C("softmaxout_multi_batch", "SoftmaxOutput", {"multi_output": True, "normalization": "batch"},
          mo_in, **L),
        C("softmaxout_preserve", "SoftmaxOutput", {"preserve_shape": True}, ps_in, **L,
          note="preserve_shape: softmax over the last axis, label = data.shape[:-1], no extra scaling"),
        C("softmaxout_multi_4d", "SoftmaxOutput", {"multi_output": True},
          [("data", (2, 3, 2, 2), "normal", 1), ("label", (2, 4), "label:3", 0)], **L,
          note="multi_output label shape is (N, prod(data.shape[2:]))"),
        C("linreg", "LinearRegressionOutput", {}, [("data", (4, 3), "normal", 1), ("label", (4, 3), "normal", 0)], **L,
          note="out = data; grad = (out - label) * grad_scale / (label.size / label.shape[0])"),
        C("linreg_scale", "LinearRegressionOutput", {"grad_scale": 2.0},
          [("data", (4, 3), "normal", 1), ("label", (4, 3), "normal", 0)], **L),
        C("linreg_1d_label", "LinearRegressionOutput", {},
          [("data", (4, 1), "normal", 1), ("label", (4,), "normal", 0)], **L),
        C("logreg", "LogisticRegressionOutput", {}, [("data", (4, 3), "normal", 1), ("label", (4, 3), "uniform", 0)], **L,
          note="out = sigmoid(data); grad = (out - label) * grad_scale / (label.size / label.shape[0])"),
        C("maereg", "MAERegressionOutput", {}, [("data", (4, 3), "normal", 1), ("label", (4, 3), "normal", 0)], **L,
          note="out = data; grad = sign(out - label) * grad_scale / (label.size / label.shape[0])"),
        C("makeloss", "MakeLoss", {}, [("data", (3, 4), "normal", 1)], **L,
          note="out = data; grad = grad_scale (null), grad_scale / N (batch), "
               "grad_scale / count(data > valid_thresh) (valid), everywhere"),
        C("makeloss_scale", "MakeLoss", {"grad_scale": 0.3}, [("data", (3, 4), "normal", 1)], **L),
        C("makeloss_batch", "MakeLoss", {"normalization": "batch"}, [("data", (3, 4), "normal", 1)], **L),
        C("makeloss_valid", "MakeLoss", {"normalization": "valid", "valid_thresh": 0.5},
          [("data", (3, 4), "uniform", 1)], **L, note="valid counts elements > valid_thresh"),
    ]
    for i, c in enumerate(cs):
        c.seed = 1000 + i
    # float32 twins (same seed, so same data up to rounding) of a few cases:
    # MXNet's float32 CPU path runs oneDNN kernels, float64 the plain ones.
    twins = {"fc_flatten", "conv_all", "deconv_s2_p1_adj1", "pool_avg_pad1_full", "bn_train",
             "softmaxout_multi_valid", "act_softrelu", "embedding"}
    for c in list(cs):
        if c.name in twins:
            cs.append(C(c.name + "_f32", c.op, c.attrs, c.inputs, c.aux, c.positional, seed=c.seed,
                        train=c.train, loss_head=c.loss_head, note=c.note, dtype=np.float32))
    return cs


def make_ops(only=None):
    arrays, recs = {}, []
    names = set()
    for case in op_cases():
        assert case.name not in names, case.name
        names.add(case.name)
        if only and case.name not in only:
            continue
        print("op case", case.name, flush=True)
        if case.dtype is not None:
            recs.append(run_case(case, case.dtype, arrays))
            continue
        try:
            rec = run_case(case, np.float64, arrays)
        except mx.base.MXNetError as e:
            for k in [k for k in arrays if k.startswith(case.name + "/")]:
                del arrays[k]
            rec = run_case(case, np.float32, arrays)
            rec["float64_error"] = str(e).strip().splitlines()[-1][:300]
        recs.append(rec)
    dump_json({"mxnet_version": mx.__version__,
               "npz_keys": "'<case>/in:<arg>', 'aux:<name>' (initial aux), 'out:<output>' "
                           "(forward is_train=True), 'aux_after_fwd:<name>' / 'aux_after_bwd:<name>' "
                           "(aux after that forward / after the following backward), "
                           "'out_grad:<output>', 'grad:<arg>' (grad_req write), 'out_infer:<output>' "
                           "(forward is_train=False from the initial aux; only when it differs "
                           "from the training output, or for inference-only cases)",
               "cases": recs}, "ops.json")
    np.savez_compressed(os.path.join(OUT, "ops.npz"), **arrays)
    return recs


README = """# MXNet 1.9.1 ground-truth fixtures

Generated by `tools/make_mxnet_fixtures.py`, which must run under real MXNet, not raymod's env:

    OMP_NUM_THREADS=2 /tmp/mxvenv/bin/python tools/make_mxnet_fixtures.py

with mxnet {mxv} (pip wheel, CPU, oneDNN) and numpy {npv}. All random draws are seeded.

| file | what |
|---|---|
| `lenet-symbol.json` | LeNet (`sym.save`): conv1(5x5,20)-tanh-maxpool2/2-conv2(5x5,50)-tanh-maxpool2/2-Flatten-fc1(500)-tanh-fc2(10)-SoftmaxOutput('softmax') |
| `lenet-expected.json` | list_arguments/outputs/auxiliary_states, infer_shape for data (64,1,28,28), node (op, name) list |
| `lstm2x5-symbol.json` | Embedding(50->16,'embed') + SequentialRNNCell of 2x LSTMCell(32, prefix 'lstm_l%d_') unrolled 5 steps (merge_outputs) + Reshape(-1,32) + FC(50,'pred') + SoftmaxOutput('softmax', label reshaped to (-1,)) |
| `lstm2x5-expected.json` | lists, infer_shape for data (8,5) / softmax_label (8,5), every node's [op, name], op nodes' attrs |
| `mlp_bn-symbol.json`, `mlp_bn-0001.params`, `mlp_bn-0001.states` | `Module.save_checkpoint(prefix, 1, save_optimizer_states=True)` after 1 epoch (10 batches of 10) of SGD(lr .1, momentum .9, wd 1e-4): FC(16,'fc1')-BatchNorm('bn1', fix_gamma False)-relu-FC(3,'fc2')-SoftmaxOutput |
| `mlp_bn-io.npz` | `input` (10x20 f32), `pred` (mod.predict output), the training data, every param as `arg:<name>` / `aux:<name>`, and the optimizer state (momentum) as `state:<index>:<param name>` |
| `symbols.json` | small symbols: their JSON, lists and attr_dict; scalar-op / operator-overload naming, AttrScope, Prefix, Group, and a v0.8 legacy JSON with MXNet's upgraded form |
| `ops.json`, `ops.npz` | per-operator cases: op, attrs (MXNet strings), inputs (name, shape, kind, grad_req), seed, dtype; npz key layout described in `ops.json["npz_keys"]` |

Notes
- Op cases use float64 where MXNet's CPU kernel accepts it; a case has `float64_error` and `dtype` float32 otherwise.
- Backward is a bound executor (`simple_bind`, grad_req 'write' for float inputs, 'null' for labels/ids/lengths),
  `forward(is_train=True)` then `backward(out_grads)` with a random normal `out_grad:<output>`.
- Loss heads (`loss_head: true`) ignore out_grad; `grad_ignores_out_grad` records that it was checked by a
  second backward with a different out_grad.
- `.params` layout (little endian): u64 magic 0x112, u64 reserved 0, u64 count, then `count` NDArray
  records, then u64 name count and names (u64 length + utf-8 bytes), `arg:<name>` / `aux:<name>`.
  An NDArray record (V2): u32 magic 0xF993FAC9, i32 storage type (0 dense), i32 ndim, ndim x i64 dims,
  i32 dev_type + i32 dev_id (1, 0 = cpu), i32 dtype flag (0 f32, 1 f64, 2 f16, 3 u8, 4 i32, 5 i8, 6 i64),
  then the raw data. `mlp_bn-io.npz` holds the same arrays under the same keys.
- The `.states` file is `pickle.dumps({{param_index: NDArray}})` (index = position in the module's
  param_names, here fc1_weight, fc1_bias, bn1_gamma, bn1_beta, fc2_weight, fc2_bias; value = SGD momentum).
  Each NDArray pickles as `(mxnet.ndarray.ndarray.NDArray, (None,), {{'handle': bytearray}})`, the bytes
  being one NDArray record as above: unpickle with a `find_class` stand-in for that class.
- BatchNorm's moving mean/var are updated during *backward* (not forward) in training mode; the
  write is not tracked by MXNet's engine, so the generator calls `mx.nd.waitall()` before reading aux.
- `symbols.json` names depend on the process-wide NameManager; every case here was built in a fresh
  `mx.name.NameManager()`, so auto names start at 0.
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma list of: lenet,lstm,mlp,symbols,ops")
    ap.add_argument("--cases", default="", help="comma list of op case names (with --only ops)")
    args = ap.parse_args()
    parts = set(args.only.split(",")) if args.only else {"lenet", "lstm", "mlp", "symbols", "ops"}
    os.makedirs(OUT, exist_ok=True)
    if "lenet" in parts:
        make_lenet()
    if "lstm" in parts:
        make_lstm()
    if "mlp" in parts:
        make_mlp_bn()
    if "symbols" in parts:
        make_symbols()
    if "ops" in parts:
        recs = make_ops(set(args.cases.split(",")) if args.cases else None)
        f32 = [r["name"] for r in recs if "float64_error" in r]
        print("ops: %d cases, float64 rejected (ran in float32): %s" % (len(recs), f32))
    with open(os.path.join(OUT, "README.md"), "w") as f:
        f.write(README.format(mxv=mx.__version__, npv=np.__version__))
    for fn in sorted(os.listdir(OUT)):
        print("%-28s %8d" % (fn, os.path.getsize(os.path.join(OUT, fn))))


if __name__ == "__main__":
    sys.exit(main())
