"""How the driver and the step scale with the number of worker actors, before and after run-ahead.

Two workloads, each trained by ``Module.fit`` with ``dist_sync`` on N worker actors of one local
cluster (``rm.cluster.init(num_cpus=8)``, fractional CPUs per worker so that 32 fit):

- ``tiny``: 16 inputs -> FC 8 -> relu -> FC 4 -> softmax, batch 64 (one slice per worker), where
  the step is almost all protocol;
- ``mlp``: DESIGN.md's 784-128-64-10 MLP, batch 100 (bench/bench_module.py's data).

For every N (1, 2, 4, 8, 16, 32 by default) one pool of N workers runs two fits of the same
module, one epoch each after a warm-up epoch: "before" hands the workers one call per step
(``run_ahead=1``, the step protocol of earlier releases) and "after" hands them windows of
``Workers.run_ahead`` steps that they run back to back, waiting on the servers, not on the driver.
Per fit, over the timed epoch:

- wall ms/step: the epoch's seconds (``epoch_end_callback`` stamps) over its steps;
- driver CPU ms/step: this process's user + system CPU (``getrusage``; Ray's own threads in
  the driver included) over the steps;
- worker idle ms/step: wall time per step minus the mean worker's busy time (its refresh,
  compute, metric and push phases from the group's step timings), i.e. time a worker waits
  for the driver or for the other workers.

    OMP_NUM_THREADS=1 python bench/bench_scale.py [--workers 1,2,4,8,16,32] [--steps 200]
        [--only tiny,mlp]

Prints one JSON object per fit, then a table with the ratios to N=1 that the README quotes.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import resource
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import raymod as rm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import mlp_data, mlp_symbol  # noqa: E402
from records import emit  # noqa: E402

CLUSTER_CPUS = 8


def tiny_symbol():
    data = rm.sym.Variable("data")
    net = rm.sym.FullyConnected(data, num_hidden=8, name="fc1")
    net = rm.sym.Activation(net, act_type="relu")
    net = rm.sym.FullyConnected(net, num_hidden=4, name="fc2")
    return rm.sym.SoftmaxOutput(net, name="softmax")


def tiny_data(rows: int):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, 16)).astype(np.float32)
    return X, (X[:, :4].argmax(axis=1)).astype(np.float32)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _busy(mod) -> tuple[int, float]:
    """(steps, busy seconds summed over workers) of the group's step timings so far."""
    if mod._exec_group is None:  # before the first bind
        return 0, 0.0
    t = mod._exec_group.state.timings
    return t.steps, sum(v for k, v in t.phases.items() if k != "wait")


def fit_timed(mod, it, workers: int, run_ahead: int, steps: int) -> dict:
    """One warm-up epoch and one timed epoch with the pool's run-ahead set to ``run_ahead``."""
    pool = mod.pool
    stamps = []

    def stamp(*_):
        stamps.append((time.perf_counter(), _cpu(), _busy(mod)))

    pool.spec = dataclasses.replace(pool.spec, run_ahead=run_ahead)
    it.reset()
    stamp()
    mod.fit(it, num_epoch=2, optimizer="sgd", kvstore="dist_sync",
            optimizer_params={"learning_rate": 0.05}, initializer=rm.init.Xavier(),
            epoch_end_callback=stamp, force_init=True, force_rebind=False)
    (t0, c0, (s0, b0)), (t1, c1, (s1, b1)) = stamps[-2], stamps[-1]
    wall = (t1 - t0) / steps
    busy = (b1 - b0) / max(1, s1 - s0) / workers if s1 > s0 else 0.0
    return {"wall_ms": 1e3 * wall, "driver_cpu_ms": 1e3 * (c1 - c0) / steps,
            "worker_idle_ms": 1e3 * max(0.0, wall - busy)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2,4,8,16,32")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per fit (tiny)")
    parser.add_argument("--only", default="tiny,mlp")
    parser.add_argument("--run-ahead", type=int, default=rm.Workers(1).run_ahead)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    counts = [int(n) for n in args.workers.split(",")]
    rm.cluster.init(num_cpus=CLUSTER_CPUS)
    rows = []
    for workload in args.only.split(","):
        if workload == "tiny":
            batch, steps, symbol = 64, args.steps, tiny_symbol()
            X, y = tiny_data(batch * steps)
        else:
            batch, steps, symbol = 100, max(20, args.steps // 2), mlp_symbol()
            X, y = mlp_data(batch * steps)
        for n in counts:
            spec = rm.Workers(n, cpus_per_worker=CLUSTER_CPUS / max(counts))
            mod = rm.mod.Module(symbol, workers=spec)
            it = rm.io.NDArrayIter(X, y, batch_size=batch)
            # bound first: the pool (whose spec each mode sets) exists from the bind on
            mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
            for mode, ahead in (("before", 1), ("after", args.run_ahead)):
                rec = fit_timed(mod, it, n, ahead, steps)
                rows.append(emit(kind="fit", workload=workload, workers=n, mode=mode,
                                 run_ahead=ahead, batch=batch, steps=steps,
                                 **{k: round(v, 3) for k, v in rec.items()}))
            mod.close()
    _table(rows)


def _table(rows: list[dict]) -> None:
    base = {(r["workload"], r["mode"]): r for r in rows if r["workers"] == min(
        x["workers"] for x in rows)}
    print(f"\n{'workload':8} {'N':>3} {'mode':7} {'wall ms':>8} {'x N=1':>6} {'drv CPU ms':>10} "
          f"{'x N=1':>6} {'idle ms':>8}")
    for r in rows:
        b = base[(r["workload"], r["mode"])]
        print(f"{r['workload']:8} {r['workers']:3d} {r['mode']:7} {r['wall_ms']:8.2f} "
              f"{r['wall_ms'] / b['wall_ms']:6.2f} {r['driver_cpu_ms']:10.2f} "
              f"{r['driver_cpu_ms'] / b['driver_cpu_ms']:6.2f} {r['worker_idle_ms']:8.2f}")


if __name__ == "__main__":
    main()
