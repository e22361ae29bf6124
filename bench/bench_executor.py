"""Executor benchmark: forward + backward + SGD step for the MLP and LeNet of DESIGN.md.

Prints one JSON object per workload and a table: samples/s of raymod's executor, of the same
network hand-written in numpy (bench/handwritten.py) timed in the same run, their ratio, and,
with ``--mxnet-python``, MXNet 1.9.1's figure measured by bench/mxnet_reference.py in the same run.

    OMP_NUM_THREADS=2 python bench/bench_executor.py [--mxnet-python /path/to/mxnet-venv/python]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
import numpy as np  # noqa: E402

import raymod as rm  # noqa: E402
import raymod.symbol as sym  # noqa: E402
from raymod.optimizer import SGD, get_updater  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import handwritten  # noqa: E402


def mlp_symbol():
    net = sym.Variable("data")
    for i, width in enumerate((128, 64)):
        net = sym.Activation(sym.FullyConnected(net, num_hidden=width, name=f"fc{i + 1}"),
                             act_type="relu")
    net = sym.FullyConnected(net, num_hidden=10, name="fc3")
    return sym.SoftmaxOutput(net, name="softmax")


def lenet_symbol():
    net = sym.Variable("data")
    for i, filters in enumerate((20, 50)):
        net = sym.Convolution(net, kernel=(5, 5), num_filter=filters, name=f"conv{i + 1}")
        net = sym.Activation(net, act_type="tanh")
        net = sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = sym.Flatten(net)
    net = sym.Activation(sym.FullyConnected(net, num_hidden=500, name="fc1"), act_type="tanh")
    net = sym.FullyConnected(net, num_hidden=10, name="fc2")
    return sym.SoftmaxOutput(net, name="softmax")


class RaymodStep:
    """One executor and an SGD updater changing its arrays in place, called as Module.update
    calls it: one updater call with every parameter's index, gradient and weight."""

    def __init__(self, symbol, data_shape, batch, rng):
        names = [n for n in symbol.list_arguments() if n not in ("data", "softmax_label")]
        # as Module binds: gradients for parameters only
        self.ex = symbol.simple_bind(rm.cpu(), grad_req={n: "write" for n in names},
                                     data=data_shape, softmax_label=(batch,))
        for n in names:
            arr = self.ex.arg_dict[n]
            arr[...] = rng.uniform(-0.07, 0.07, arr.shape) if n.endswith("weight") else 0
        self.updater = get_updater(SGD(learning_rate=0.1, rescale_grad=1.0 / batch))
        self.indices = list(range(len(names)))
        self.weights = [self.ex.arg_dict[n] for n in names]
        self.grads = [self.ex.grad_dict[n] for n in names]

    def step(self, x, y):
        self.ex.forward(is_train=True, data=x, softmax_label=y)
        self.ex.backward()
        self.updater(self.indices, self.grads, self.weights)


def _rate(step, batches, steps: int) -> float:
    start = time.perf_counter()
    for k in range(steps):
        step(*batches[k % len(batches)])
    return steps * len(batches[0][0]) / (time.perf_counter() - start)


def time_pair(ours, ours_batches, base, base_batches, steps: int, repeats: int):
    """Samples/s of two step functions, timed in alternating blocks so that load changes on
    a shared machine hit both alike; returns the medians and the median per-block ratio."""
    ours(*ours_batches[0])
    base(*base_batches[0])
    a, b = [], []
    for _ in range(repeats):
        a.append(_rate(ours, ours_batches, steps))
        b.append(_rate(base, base_batches, steps))
    ratio = statistics.median(x / y for x, y in zip(a, b))
    return statistics.median(a), statistics.median(b), ratio


WORKLOADS = {
    "mlp": dict(symbol=mlp_symbol, shape=(784,), batch=100, steps=200, hand=handwritten.MLP),
    "lenet": dict(symbol=lenet_symbol, shape=(1, 28, 28), batch=64, steps=20, hand=handwritten.LeNet),
}


def mxnet_figures(python: str, names: list[str], repeats: int) -> dict:
    script = Path(__file__).with_name("mxnet_reference.py")
    out = subprocess.run([python, str(script), "--only", ",".join(names), "--repeats",
                          str(repeats)], capture_output=True, text=True, check=True)
    figures = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("metric") == "step_samples_per_s":
                figures[rec["workload"]] = rec["value"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mlp,lenet")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--mxnet-python", help="python of a venv with mxnet==1.9.1")
    args = parser.parse_args()
    names = args.only.split(",")
    rng = np.random.default_rng(0)
    mx = mxnet_figures(args.mxnet_python, names, args.repeats) if args.mxnet_python else {}
    rows = []
    for name in names:
        w = WORKLOADS[name]
        shape = (w["batch"],) + w["shape"]
        batches = [(rng.standard_normal(shape).astype(np.float32),
                    rng.integers(0, 10, w["batch"])) for _ in range(4)]
        ours = RaymodStep(w["symbol"](), shape, w["batch"], rng)
        hand = w["hand"](rng, batch=w["batch"])
        ours_rate, hand_rate, ratio = time_pair(
            ours.step, [(x, y.astype(np.float32)) for x, y in batches], hand.step, batches,
            w["steps"], args.repeats)
        rec = {"workload": name, "batch": w["batch"], "raymod_samples_per_s": ours_rate,
               "numpy_samples_per_s": hand_rate, "ratio_vs_numpy": ratio,
               "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
               "loadavg_1m": round(os.getloadavg()[0], 2)}
        if name in mx:
            rec["mxnet_samples_per_s"] = mx[name]
            rec["ratio_vs_mxnet"] = rec["raymod_samples_per_s"] / rec["mxnet_samples_per_s"]
        print(json.dumps(rec))
        rows.append(rec)
    print(f"\n{'workload':<8} {'raymod/s':>10} {'numpy/s':>10} {'x numpy':>8} {'mxnet/s':>10} {'x mxnet':>8}")
    for r in rows:
        print(f"{r['workload']:<8} {r['raymod_samples_per_s']:>10.0f} {r['numpy_samples_per_s']:>10.0f} "
              f"{r['ratio_vs_numpy']:>8.2f} {r.get('mxnet_samples_per_s', float('nan')):>10.0f} "
              f"{r.get('ratio_vs_mxnet', float('nan')):>8.2f}")


if __name__ == "__main__":
    main()
