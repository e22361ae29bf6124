"""Forward + backward time of MXNet's example networks (the zoo fixtures), raymod beside MXNet.

    python bench/bench_zoo.py [--nets vgg11,fcn8s] [--repeats 3] \
        [--mxnet-python /tmp/mxvenv/bin/python]
    python bench/bench_zoo.py --layers fcn8s [--mxnet-python ...]     # one row per conv layer
    python bench/bench_zoo.py --ops googlenet [--mxnet-python ...]    # one row per op type
    python bench/bench_zoo.py --batch 32 --nets resnet20_cifar [...]   # at a training batch
    python bench/bench_zoo.py --rounds 3 [...]                         # sides alternated

Each network of ``tests/fixtures/mxnet/zoo/index.json`` is bound at its fixture shapes (batch 2)
with the fixtures' parameter recipe, then timed as ``forward(is_train=True)`` + ``backward`` on one
thread: CPU time (``time.process_time``, every thread of the process) and wall time per step,
the median of ``--repeats`` steps after one warm-up step, or of more steps where those take
less than ``--min-time`` CPU seconds (default 0.5): a burst of load on a shared machine then
moves a small graph's median no more than a large one's. Both sides run in their own
subprocess with ``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1`` and with
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` unset (they slow numpy's sgemm on hosts that set
them; a user's machine does not). MXNet runs with its default oneDNN backend.

``--layers NET`` times every Convolution / Deconvolution of NET alone (data and weight
gradients), at the data shape it sees inside NET, forward and backward separately.

``--batch N`` binds the networks (or, with ``--layers``, the layers) with every input's first
axis N long instead (shapes inferred on each side; the TN-layout RNN graphs then get N time
steps, not N sequences): the fixtures' batch of 1-2 weighs per-call overheads more than a
training batch does.

``--size S`` binds every image input (N, 3, H, W) at S x S (224 for the ImageNet networks,
299 for Inception), MXNet's usual sizes; with ``--batch`` too, the training shapes.

``--rounds R`` runs each side R times, alternating (raymod, MXNet, MXNet, raymod, ...), and
takes each time's median over the rounds: on a shared machine MXNet's side has measured up
to 1.8x apart between two runs minutes apart (MobileNet 2.5 and 4.4 ms), which one run per
side turns straight into its ratios.

``--ops NET`` splits NET's step by operator type, inside the whole graph: raymod's executor
steps are timed one by one (median over steps of each type's per-step total); MXNet runs
with its profiler and bulk execution off (``MXNET_EXEC_BULK_EXEC_TRAIN=0``), so it reports
each operator (mean per step; its profiler adds a little to each op). Backward rows are
MXNet's ``_backward_<op>``; ops only one side has (``add_n``, ``_zeros``) have one column.

Prints one JSON object per measurement, then a table; the ratio column is raymod / MXNet CPU time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ZOO = ROOT / "tests" / "fixtures" / "mxnet" / "zoo"
CONV_OPS = ("Convolution", "Deconvolution")
# Both vars change which sgemm kernel OpenBLAS picks, and only for this host.
BLAS_ENV_DROP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def side_env() -> dict:
    """The environment of a measuring subprocess: one thread, the host's BLAS overrides dropped."""
    env = {k: v for k, v in os.environ.items() if k not in BLAS_ENV_DROP}
    env.update({k: "1" for k in ONE_THREAD})
    env.pop("MXNET_MKLDNN_ENABLED", None)  # oneDNN on: the speed a user gets
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---------------------------------------------------------------- measuring side (subprocess)
def load_params_helper():
    import importlib.util
    path = ROOT / "tests" / "zoo" / "params.py"
    spec = importlib.util.spec_from_file_location("_zoo_params", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Side:
    """What differs between raymod and MXNet: import, bind, run, wait."""

    def __init__(self, name: str):
        self.name = name
        if name == "mxnet":
            import mxnet as mx
            self.lib, self.version = mx, mx.__version__
        else:
            import raymod as rm
            self.lib, self.version = rm, getattr(rm, "__version__", "dev")

    def load(self, text: str):
        return self.lib.sym.load_json(text)

    def bind(self, sym, args: dict, grads: list, aux: dict):
        lib = self.lib
        if self.name == "mxnet":
            args = {k: lib.nd.array(v) for k, v in args.items()}
            aux = {k: lib.nd.array(v) for k, v in aux.items()}
            args_grad = {k: lib.nd.zeros(args[k].shape) for k in grads}
        else:
            args_grad = {k: args[k] * 0 for k in grads}
        return sym.bind(lib.cpu(), args=args, args_grad=args_grad,
                        grad_req={k: ("write" if k in grads else "null") for k in args},
                        aux_states=aux)

    def heads(self, arrays):
        return [self.lib.nd.array(a) for a in arrays] if self.name == "mxnet" else arrays

    def wait(self):
        if self.name == "mxnet":
            self.lib.nd.waitall()

    def blas(self) -> list:
        if self.name == "mxnet":
            feats = self.lib.runtime.Features()
            return [{k: feats.is_enabled(k) for k in ("MKLDNN", "BLAS_OPEN", "BLAS_MKL")}]
        try:
            from threadpoolctl import threadpool_info
        except ImportError:
            return [{"note": "threadpoolctl not installed in this environment"}]
        keep = ("internal_api", "architecture", "num_threads", "version")
        return [{k: i.get(k) for k in keep} for i in threadpool_info()]


#: at most this many timed steps per measurement, however short a step (see ``--min-time``)
MAX_REPEATS = 5000


def timed(side: Side, fwd, bwd, repeats: int, min_time: float = 0.0) -> dict:
    """Median CPU and wall seconds of forward, backward and the pair, over at least
    ``repeats`` steps and as many more as fill ``min_time`` CPU seconds (up to
    ``MAX_REPEATS``), after one warm-up."""
    rows, spent = [], 0.0
    while len(rows) <= repeats or (spent < min_time and len(rows) <= MAX_REPEATS):
        c0, w0 = time.process_time(), time.perf_counter()
        fwd()
        side.wait()
        c1, w1 = time.process_time(), time.perf_counter()
        bwd()
        side.wait()
        rows.append((c1 - c0, time.process_time() - c1, w1 - w0, time.perf_counter() - w1))
        if len(rows) > 1:
            spent += rows[-1][0] + rows[-1][1]
    med = [statistics.median(col) for col in zip(*rows[1:])]
    return {"fwd_cpu_s": med[0], "bwd_cpu_s": med[1], "cpu_s": med[0] + med[1],
            "fwd_wall_s": med[2], "bwd_wall_s": med[3], "wall_s": med[2] + med[3],
            "steps": len(rows) - 1}


def input_shapes(entry: dict, batch: int | None = None, size: int | None = None) -> dict:
    """A zoo network's input shapes: the fixture's, or with the first axis ``batch`` long,
    and an image input's (N, 3, H, W) maps ``size`` x ``size``."""
    shapes = {}
    for i in entry["inputs"]:
        shape = ((batch,) if batch else tuple(i["shape"][:1])) + tuple(i["shape"][1:])
        if size and len(shape) == 4 and shape[1] == 3:
            shape = shape[:2] + (size, size)
        shapes[i["name"]] = shape
    return shapes


def net_arrays(params, entry: dict, sym=None, batch: int | None = None,
               size: int | None = None):
    """Arguments, auxiliary states and gradient names of a zoo network at its fixture
    shapes, or with every input's first axis ``batch`` long (shapes inferred from ``sym``;
    stored inputs repeated to fill it), and the output shapes."""
    import numpy as np
    stored = np.load(ZOO / entry["npz_file"]) if entry.get("npz_file") else {}
    arg_shapes, aux_shapes, out_shapes = (entry["arg_shapes"], entry["aux_shapes"],
                                          entry["out_shapes"])
    in_shapes = input_shapes(entry, batch, size)
    if batch or size:
        args_, outs, auxs = sym.infer_shape(**in_shapes)
        arg_shapes = dict(zip(sym.list_arguments(), args_))
        aux_shapes = dict(zip(sym.list_auxiliary_states(), auxs))
        out_shapes = outs
    inputs = {i["name"]: (np.resize(stored[i["npz"]].astype(np.float32), in_shapes[i["name"]])
                          if "npz" in i else
                          params.make_input(i["name"], in_shapes[i["name"]], i["recipe"]))
              for i in entry["inputs"]}
    args = {n: (inputs[n] if n in inputs else params.make_param(n, s))
            for n, s in arg_shapes.items()}
    aux = {n: params.make_param(n, s) for n, s in aux_shapes.items()}
    grads = [n for n in args if n not in inputs] + list(entry.get("grad_inputs", []))
    return args, aux, grads, out_shapes


def bound_net(side: Side, params, net: str, entry: dict, batch: int | None = None,
              size: int | None = None):
    """``net`` bound on ``side`` for training (see :func:`net_arrays`), and its head
    gradients."""
    sym = side.load((ZOO / entry["symbol_file"]).read_text())
    args, aux, grads, out_shapes = net_arrays(params, entry, sym, batch, size)
    exe = side.bind(sym, args, grads, aux)
    return exe, side.heads([params.head_grad(f"{net}:{i}", s) for i, s in enumerate(out_shapes)])


def measure_net(side: Side, params, net: str, entry: dict, repeats: int,
                batch: int | None = None, min_time: float = 0.0,
                size: int | None = None) -> dict:
    exe, heads = bound_net(side, params, net, entry, batch, size)
    return timed(side, lambda: exe.forward(is_train=True), lambda: exe.backward(heads), repeats,
                 min_time)


def measure_ops(side: Side, params, net: str, entry: dict, repeats: int,
                batch: int | None = None, size: int | None = None) -> list[dict]:
    """CPU seconds per step of each operator type of ``net``, forward and backward."""
    exe, heads = bound_net(side, params, net, entry, batch, size)

    def step():
        exe.forward(is_train=True)
        exe.backward(heads)
        side.wait()

    step()
    totals: dict = {}
    if side.name == "mxnet":
        mx = side.lib
        dump = Path(tempfile.gettempdir()) / "bench_zoo_mxnet_profile.json"  # not in the cwd
        mx.profiler.set_config(profile_symbolic=True, aggregate_stats=True, filename=str(dump))
        mx.profiler.set_state("run")
        for _ in range(repeats):
            step()
        mx.profiler.set_state("stop")
        ops = json.loads(mx.profiler.dumps(format="json"))["Time"].get("operator", {})
        for name, stat in ops.items():
            phase, op = ("bwd", name[len("_backward_"):]) if name.startswith("_backward_") \
                else ("fwd", name)
            totals.setdefault(op, {"fwd": [0.0], "bwd": [0.0], "calls": 0})
            totals[op][phase] = [stat["Total"] / 1e3 / repeats]
            totals[op]["calls"] += stat["Count"] // repeats
    else:
        # the executor's resolved steps (internal): each callable timed where it runs
        per_step: dict = {}

        def timed_call(fn, op, phase):
            def call(*a, **k):
                t0 = time.process_time()
                out = fn(*a, **k)
                per_step[(op, phase)] = per_step.get((op, phase), 0.0) + time.process_time() - t0
                return out
            return call
        exe._forward_steps = [(timed_call(s[0], s[4].op.name, "fwd"),) + tuple(s[1:])
                              for s in exe._forward_steps]
        exe._backward_steps = [(b[0], timed_call(b[1], exe.plan.steps[b[0]].op.name, "bwd"))
                               + tuple(b[2:]) for b in exe._backward_steps]
        calls = {}
        for st in exe.plan.steps:
            calls[st.op.name] = calls.get(st.op.name, 0) + 1
        for _ in range(repeats):
            per_step.clear()
            step()
            for (op, phase), sec in per_step.items():
                totals.setdefault(op, {"fwd": [], "bwd": [], "calls": calls.get(op, 0)})
                totals[op][phase].append(sec)
    rows = []
    for op, t in totals.items():
        fwd = statistics.median(t["fwd"]) if t["fwd"] else 0.0
        bwd = statistics.median(t["bwd"]) if t["bwd"] else 0.0
        rows.append({"op": op, "fwd_cpu_s": fwd, "bwd_cpu_s": bwd, "cpu_s": fwd + bwd,
                     "calls": t["calls"]})
    return sorted(rows, key=lambda r: -r["cpu_s"])


def conv_layers(net: str, entry: dict, batch: int | None = None,
                size: int | None = None) -> list[dict]:
    """Every Convolution / Deconvolution of ``net``: name, op, attributes, data shape (raymod's
    shape inference, which follows MXNet's), at the fixture's batch or ``batch``."""
    import raymod as rm
    graph = json.loads((ZOO / entry["symbol_file"]).read_text())
    internals = rm.sym.load_json(json.dumps(graph)).get_internals()
    _, outs, _ = internals.infer_shape(**input_shapes(entry, batch, size))
    by_name = dict(zip(internals.list_outputs(), outs))
    nodes, layers = graph["nodes"], []
    for node in nodes:
        if node["op"] not in CONV_OPS:
            continue
        src, idx = node["inputs"][0][:2]
        src = nodes[src]
        names = [src["name"]] if src["op"] == "null" else \
            [f"{src['name']}_output", f"{src['name']}_output{idx}"]
        shape = next((by_name[n] for n in names if n in by_name), None)
        if shape is None:
            continue
        attrs = dict(node.get("attrs", node.get("attr", {})))
        layers.append({"layer": node["name"], "op": node["op"], "attrs": attrs,
                       "data": list(shape)})
    return layers


def measure_layer(side: Side, params, layer: dict, repeats: int, min_time: float = 0.0) -> dict:
    lib = side.lib
    data = lib.sym.Variable("data")
    kwargs = {k: v for k, v in layer["attrs"].items() if not k.startswith("__")}
    sym = getattr(lib.sym, layer["op"])(data, name="L", **kwargs)
    arg_shapes, out_shapes, _ = sym.infer_shape(data=tuple(layer["data"]))
    args = {n: params.make_param(n, s) for n, s in zip(sym.list_arguments(), arg_shapes)}
    args["data"] = params.make_input("data", layer["data"], {"kind": "uniform"})
    exe = side.bind(sym, args, list(args), {})
    heads = side.heads([params.head_grad("L", out_shapes[0])])
    return timed(side, lambda: exe.forward(is_train=True), lambda: exe.backward(heads), repeats,
                 min_time)


def run_side(args) -> None:
    side = Side(args.side)
    params = load_params_helper()
    index = json.loads((ZOO / "index.json").read_text())["networks"]
    head = {"side": side.name, "version": side.version, "blas": side.blas()}
    print(json.dumps(head), flush=True)
    if args.layer_list:
        for layer in json.loads(Path(args.layer_list).read_text()):
            rec = {"side": side.name, "layer": layer["layer"]}
            try:
                rec.update(measure_layer(side, params, layer, args.repeats, args.min_time))
            except Exception as err:  # noqa: BLE001 - a failing layer is reported, not fatal
                rec["error"] = f"{type(err).__name__}: {err}"[:300]
            print(json.dumps(rec), flush=True)
        return
    if args.ops:
        try:
            for rec in measure_ops(side, params, args.ops, index[args.ops], args.repeats,
                                   args.batch, args.size):
                print(json.dumps({"side": side.name, **rec}), flush=True)
        except Exception as err:  # noqa: BLE001 - reported, not fatal
            print(json.dumps({"side": side.name, "error": f"{type(err).__name__}: {err}"[:300]}))
        return
    for net in args.nets.split(","):
        rec = {"side": side.name, "net": net}
        try:
            rec.update(measure_net(side, params, net, index[net], args.repeats, args.batch,
                                   args.min_time, args.size))
        except Exception as err:  # noqa: BLE001 - a net one side cannot run is reported
            rec["error"] = f"{type(err).__name__}: {err}"[:300]
        print(json.dumps(rec), flush=True)


# ---------------------------------------------------------------- driver
def spawn(python: str, argv: list[str], timeout: float, env: dict | None = None) -> list[dict]:
    cmd = [python, str(Path(__file__).resolve())] + argv
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env={**side_env(), **(env or {})},
                             timeout=timeout)
        text, err = out.stdout, out.stderr
    except subprocess.TimeoutExpired as exc:
        text, err = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else \
            (exc.stdout or ""), "timed out"
    recs = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    if not recs:
        recs = [{"error": f"{python} gave no result: {err[-1500:]}"}]
    return recs


TIMES = ("cpu_s", "fwd_cpu_s", "bwd_cpu_s", "wall_s", "fwd_wall_s", "bwd_wall_s")


def merge_rounds(rounds: list[list[dict]], key: str) -> list[dict]:
    """One side's records over rounds (each a run of the side: a header, then one record
    per name) as one record per name: every time the median over the rounds that measured
    it, an error only where no round did."""
    merged: dict[str, dict] = {}
    for recs in rounds:
        for rec in recs:
            if key not in rec:
                continue
            entry = merged.setdefault(rec[key], {key: rec[key], "_times": []})
            if "error" in rec:
                entry.setdefault("error", rec["error"])
            else:
                entry["_times"].append(rec)
    out = []
    for entry in merged.values():
        times = entry.pop("_times")
        if times:
            entry.pop("error", None)
            entry.update({t: statistics.median(r[t] for r in times) for t in TIMES
                          if all(t in r for r in times)})
            entry["rounds"] = len(times)
        out.append(entry)
    return out


def ratio(a: dict | None, b: dict | None, key: str) -> float | None:
    if not a or not b or key not in a or key not in b or not b[key]:
        return None
    return a[key] / b[key]


def fmt(x, digits=4) -> str:
    return "-" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nets", default=None, help="comma list (default: every zoo network)")
    ap.add_argument("--layers", default=None, help="time each conv layer of this network")
    ap.add_argument("--ops", default=None, help="split this network's step by operator type")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.5,
                    help="CPU seconds of timed steps per network or layer at the least: small "
                         "graphs take more than --repeats steps (at most %d)" % MAX_REPEATS)
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each side this many times, alternating (ABBA), and take each "
                         "time's median over the rounds")
    ap.add_argument("--batch", type=int, default=None,
                    help="every input's first axis this long (the fixtures' shapes: 1-2)")
    ap.add_argument("--size", type=int, default=None,
                    help="bind every image input (N, 3, H, W) at size x size (e.g. 224)")
    ap.add_argument("--mxnet-python", default=None,
                    help="python of a venv with mxnet 1.9.1 (e.g. /tmp/mxvenv/bin/python)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per side")
    ap.add_argument("--side", choices=("raymod", "mxnet"), help=argparse.SUPPRESS)
    ap.add_argument("--layer-list", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit(f"--rounds: expected a positive count, got {args.rounds}")
    if args.side:
        return run_side(args)
    index = json.loads((ZOO / "index.json").read_text())["networks"]
    if args.min_time < 0:
        raise SystemExit(f"--min-time: expected seconds >= 0, got {args.min_time}")
    common = ["--repeats", str(args.repeats), "--min-time", str(args.min_time)]
    env = None
    if args.ops:
        if args.ops not in index:
            raise SystemExit(f"--ops: {args.ops!r} not in the zoo; known: {sorted(index)}")
        common += ["--ops", args.ops] + (["--batch", str(args.batch)] if args.batch else [])
        common += ["--size", str(args.size)] if args.size else []
        env = {"MXNET_EXEC_BULK_EXEC_TRAIN": "0", "MXNET_EXEC_BULK_EXEC_INFERENCE": "0"}
        key = "op"
    elif args.layers:
        os.environ.update({k: "1" for k in ONE_THREAD})
        layers = conv_layers(args.layers, index[args.layers], args.batch, args.size)
        suffix = (f"_batch{args.batch}" if args.batch else "") + (
            f"_size{args.size}" if args.size else "")
        listing = ROOT / "bench" / "results" / f"zoo_layers_{args.layers}{suffix}.json"
        listing.parent.mkdir(exist_ok=True)
        listing.write_text(json.dumps(layers))
        common += ["--layer-list", str(listing)]
        key = "layer"
    else:
        nets = args.nets.split(",") if args.nets else list(index)
        unknown = [n for n in nets if n not in index]
        if unknown:
            raise SystemExit(f"--nets: {unknown} not in the zoo; known: {sorted(index)}")
        common += ["--nets", ",".join(nets)] + (["--batch", str(args.batch)] if args.batch
                                                 else [])
        common += ["--size", str(args.size)] if args.size else []
        key = "net"
    load = round(os.getloadavg()[0], 2)
    pythons = {"raymod": sys.executable}
    if args.mxnet_python:
        pythons["mxnet"] = args.mxnet_python
    runs: dict[str, list[list[dict]]] = {s: [] for s in pythons}
    for r in range(args.rounds):
        # ABBA order: a machine that speeds up or slows down over the run favours neither
        for s in (pythons if r % 2 == 0 else reversed(list(pythons))):
            recs = spawn(pythons[s], ["--side", s] + common, args.timeout, env)
            for rec in recs:
                print(json.dumps({**rec, "round": r}))
            runs[s].append(recs)
    sides = {s: [rounds[0][0]] + merge_rounds(rounds, key) for s, rounds in runs.items()}
    rows = {s: {r[key]: r for r in recs if key in r} for s, recs in sides.items()}
    names = list(rows["raymod"]) or list(rows.get("mxnet", {}))
    names += [n for n in rows.get("mxnet", {}) if n not in names]
    print(f"\nload average (1 min) at start {load}, at end {round(os.getloadavg()[0], 2)}; "
          f"one thread; CPU time per forward+backward step, median of {args.repeats} steps or "
          f"more, to {args.min_time} s"
          + (f", then the median over {args.rounds} rounds per side" if args.rounds > 1 else "")
          + (f"; batch {args.batch}" if args.batch else "")
          + (f"; image inputs {args.size}x{args.size}" if args.size else ""))
    for s, recs in sides.items():
        print(f"{s}: {recs[0].get('version')} BLAS {recs[0].get('blas')}")
    print(f"{key:<28} {'raymod cpu s':>12} {'mxnet cpu s':>12} {'ratio':>7} "
          f"{'fwd ratio':>9} {'bwd ratio':>9} {'raymod wall':>11} {'mxnet wall':>11}")
    ratios = []
    for name in names:
        ours, theirs = rows["raymod"].get(name), rows.get("mxnet", {}).get(name)
        r = ratio(ours, theirs, "cpu_s")
        if r is not None:
            ratios.append(r)
        err = (ours or {}).get("error") or (theirs or {}).get("error")
        ours_s, theirs_s = (ours or {}).get("cpu_s"), (theirs or {}).get("cpu_s")
        print(f"{name:<28} {fmt(ours_s):>12} {fmt(theirs_s):>12} "
              f"{fmt(r, 2):>7} {fmt(ratio(ours, theirs, 'fwd_cpu_s'), 2):>9} "
              f"{fmt(ratio(ours, theirs, 'bwd_cpu_s'), 2):>9} "
              f"{fmt((ours or {}).get('wall_s')):>11} {fmt((theirs or {}).get('wall_s')):>11}"
              + (f"  error: {err[:80]}" if err else ""))
    if ratios and key != "op":
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        summary = {"median_ratio": statistics.median(ratios), "q1": q[0], "q3": q[2],
                   "max_ratio": max(ratios), "over_1_5": sum(r > 1.5 for r in ratios),
                   "count": len(ratios), "loadavg_1m": load}
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
