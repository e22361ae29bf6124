"""CPU time of one forward+backward step of bench_module's three anchor graphs, for A/B runs.

    python bench/bench_anchor_steps.py [--code DIR] [--rounds 5]

The graphs of ``bench/bench_module.py`` (MLP batch 100, LeNet batch 64, the 2x200 LSTMCell
language model at bucket 20, batch 32) are bound with ``simple_bind`` and timed as
``forward(is_train=True)`` + ``backward()`` with ``time.process_time``: the median over
``--rounds`` rounds of a fixed number of steps, after one warm-up step. Unlike
``bench_module``'s wall-clock rates this hardly moves with the load of a shared machine, so
two code trees can be compared in one sitting: ``--code`` names the raymod tree to import
(default: this one), e.g. an export of main. Runs in a subprocess with one thread and
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` unset (see bench_zoo). Prints one JSON object per
graph, then a table.
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

HERE = Path(__file__).resolve().parent
STEPS = {"mlp": 300, "lenet": 20, "lstm_b20": 5}


def measure(rounds: int) -> None:
    import numpy as np

    import raymod as rm
    sys.path.insert(0, str(HERE))
    import bench_module as bm
    from bench_zoo import Side

    rng = np.random.default_rng(0)

    def bind(sym, shapes: dict, ints=()):
        reqs = {n: ("null" if n in shapes else "write") for n in sym.list_arguments()}
        exe = sym.simple_bind(rm.cpu(), grad_req=reqs, **shapes)
        for name, array in exe.arg_dict.items():
            if name in ints:
                array[...] = rng.integers(1, 1000, array.shape)
            elif name == "softmax_label":
                array[...] = rng.integers(0, 10, array.shape)
            else:
                array[...] = rng.uniform(-0.1, 0.1, array.shape)
        return exe

    graphs = {
        "mlp": bind(bm.mlp_symbol(), {"data": (100, 784), "softmax_label": (100,)}),
        "lenet": bind(bm.lenet_symbol(), {"data": (64, 1, 28, 28), "softmax_label": (64,)}),
        "lstm_b20": bind(bm.lstm_sym_gen(20)[0], {"data": (32, 20), "softmax_label": (32, 20)},
                         ints=("data", "softmax_label")),
    }
    print(json.dumps({"code": str(Path(rm.__file__).parent.parent), "blas": Side("raymod").blas()}))
    for name, exe in graphs.items():
        exe.forward(is_train=True)
        exe.backward()
        per_round = []
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(STEPS[name]):
                exe.forward(is_train=True)
                exe.backward()
            per_round.append((time.process_time() - start) / STEPS[name])
        print(json.dumps({"graph": name, "cpu_ms": statistics.median(per_round) * 1e3,
                          "rounds_ms": [round(r * 1e3, 3) for r in per_round],
                          "loadavg_1m": round(os.getloadavg()[0], 2)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--code", default=str(HERE.parent), help="raymod tree to import")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        return measure(args.rounds)
    code = Path(args.code).resolve()
    if not (code / "raymod" / "__init__.py").is_file():
        raise SystemExit(f"--code: {code} has no raymod package")
    sys.path.insert(0, str(HERE))
    from bench_zoo import side_env
    env = side_env()
    env["PYTHONPATH"] = str(code) + os.pathsep + str(HERE)
    out = subprocess.run([sys.executable, __file__, "--measure", "--rounds", str(args.rounds)],
                         capture_output=True, text=True, env=env, check=False)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(recs) < 2:
        raise SystemExit(f"measuring run failed: {out.stderr[-2000:]}")
    for rec in recs:
        print(json.dumps(rec))
    print(f"\n{recs[0]['code']}; BLAS {recs[0]['blas']}; one thread; CPU ms per step, "
          f"median of {args.rounds} rounds")
    for rec in recs[1:]:
        print(f"{rec['graph']:<10} {rec['cpu_ms']:10.3f}  load {rec['loadavg_1m']}")


if __name__ == "__main__":
    main()
