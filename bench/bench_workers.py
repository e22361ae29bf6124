"""Module.fit on Ray worker actors (workers=1, 2) against the same fit in process, side by side.

The MLP (784-128-64-10, batch 100, SGD 0.1) and LeNet (batch 64) of bench/bench_module.py, on
a local Ray cluster (``rm.cluster.init(num_cpus=4)``). Each repeat runs the in-process fit and
then the workers=1 and workers=2 fits, each a fresh Module: one warm-up epoch, then timed
epochs (``epoch_end_callback`` stamps). Reported per configuration:

- samples/s and its ratio to in process (median of the per-repeat ratios);
- per-step overhead over in process in ms: (epoch seconds - in-process epoch seconds) / steps;
- the step timings of ``mod._exec_group.state.timings`` over the timed epochs: the driver's
  wall time per step and the workers' phases (refresh, compute, push, metric; summed over
  workers, and also per worker; the table adds compute and metric up), and what is left of
  the wall time outside the mean worker ("dispatch": task serialisation, actor calls and
  results, waiting for the slower worker, the driver's own bookkeeping);
- a Ray floor measured in the same run: an empty actor call, and a call carrying one step's
  batch slice by value.

    OMP_NUM_THREADS=2 python bench/bench_workers.py [--only mlp,lenet] [--repeats 2]
        [--cpus-per-worker 1] [--quick]

``mod.close()`` follows every workers fit.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
import numpy as np  # noqa: E402

import raymod as rm  # noqa: E402
from records import emit  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import lenet_data, lenet_symbol, mlp_data, mlp_symbol  # noqa: E402

WORKLOADS = {"mlp": (mlp_symbol, mlp_data, 100), "lenet": (lenet_symbol, lenet_data, 64)}


def _snapshot(mod) -> tuple | None:
    group = getattr(mod, "_exec_group", None)
    state = getattr(group, "state", None)
    if state is None:
        return None
    t = state.timings
    return t.steps, t.wall, dict(t.phases)


def _delta(a: tuple, b: tuple, workers: int) -> dict:
    """Mean ms per step between two timing snapshots."""
    steps = max(b[0] - a[0], 1)
    out = {"steps": b[0] - a[0], "wall_ms": 1e3 * (b[1] - a[1]) / steps}
    phases = {k: 1e3 * (v - a[2].get(k, 0.0)) / steps for k, v in b[2].items()}
    for k, v in phases.items():
        out[f"{k}_ms"] = v                     # summed over workers, as summary() gives
        out[f"{k}_ms_per_worker"] = v / workers
    out["dispatch_ms"] = out["wall_ms"] - sum(phases.values()) / workers
    # forward+backward and the metric: worker.py's laps have moved between the two labels,
    # so the table shows their sum
    out["compute_metric_ms_per_worker"] = (phases.get("compute", 0.0)
                                           + phases.get("metric", 0.0)) / workers
    return out


def fit_once(name: str, X, y, workers, epochs: int, cpus: float) -> dict:
    symbol_fn, _, batch = WORKLOADS[name]
    spec = None if workers is None else rm.Workers(workers, cpus_per_worker=cpus)
    it = rm.io.NDArrayIter(X, y, batch_size=batch, shuffle=False, label_name="softmax_label")
    by_reference = getattr(next(iter(it)), "source", None) is not None
    it.reset()
    mod = rm.mod.Module(symbol_fn(), context=rm.cpu(), workers=spec)
    t_bind = time.perf_counter()
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=rm.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1})
    t_bind = time.perf_counter() - t_bind
    stamps, snaps = [], []

    def on_epoch_end(*_):
        stamps.append(time.perf_counter())
        snaps.append(_snapshot(mod))

    t0 = time.perf_counter()
    try:
        mod.fit(it, num_epoch=1 + epochs, eval_metric="acc", epoch_end_callback=on_epoch_end)
        ends = [t0] + stamps
        secs = [b - a for a, b in zip(ends[:-1], ends[1:])][1:]
        rows = (len(X) // batch) * batch
        rec = {"workers": workers, "samples_per_s": rows / statistics.median(secs),
               "epoch_seconds": [round(s, 4) for s in secs], "steps_per_epoch": rows // batch,
               "bind_init_s": round(t_bind, 3), "rows_by_reference": by_reference}
        if workers is not None and snaps[0] is not None:
            rec["timings"] = _delta(snaps[0], snaps[-1], workers)
            rec["timings_summary_all_epochs"] = mod._exec_group.state.timings.summary()
        return rec
    finally:
        mod.close()


def ray_floor(batch: int, row_shape: tuple, workers: int, calls: int = 200) -> dict:
    """Round trips to ``workers`` idle actors: empty, and carrying one step's slices."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def nothing(self, *args):
            return {"rank": 0, "metrics": {}, "seconds": {}}

    actors = [Echo.remote() for _ in range(workers)]
    ray.get([a.nothing.remote() for a in actors])
    per = batch // workers
    slices = [(np.zeros((per,) + row_shape, np.float32), np.zeros(per, np.float32))
              for _ in actors]
    out = {}
    for label, with_data in (("empty_call_ms", False), ("call_with_batch_slice_ms", True)):
        t0 = time.perf_counter()
        for _ in range(calls):
            ray.get([a.nothing.remote(*(s if with_data else ())) for a, s in zip(actors, slices)])
        out[label] = 1e3 * (time.perf_counter() - t0) / calls
    for a in actors:
        ray.kill(a)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mlp,lenet")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per fit")
    ap.add_argument("--mlp-rows", type=int, default=60000)
    ap.add_argument("--lenet-rows", type=int, default=3200)
    ap.add_argument("--workers", default="1,2", help="worker counts to compare")
    ap.add_argument("--cpus-per-worker", type=float, default=1.0,
                    help="Ray CPUs per worker actor (its BLAS threads follow)")
    ap.add_argument("--num-cpus", type=int, default=4, help="CPUs of the local Ray cluster")
    ap.add_argument("--quick", action="store_true", help="smoke run: small data, 1 repeat")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.mlp_rows, args.lenet_rows = 1, 2000, 256
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore", message="Parameters already initialized")
    counts = [int(w) for w in args.workers.split(",")]
    t_start, load_start = time.perf_counter(), os.getloadavg()
    t0 = time.perf_counter()
    rm.cluster.init(num_cpus=args.num_cpus)
    ray_init_s = time.perf_counter() - t0
    rows = []
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        _, data_fn, batch = WORKLOADS[name]
        X, y = data_fn(args.mlp_rows if name == "mlp" else args.lenet_rows)
        runs = {w: [] for w in [None] + counts}
        for rep in range(args.repeats):
            for w in [None] + counts:
                rec = fit_once(name, X, y, w, args.epochs, args.cpus_per_worker)
                gc.collect()  # the closed module's kvstore servers go with it
                runs[w].append(rec)
                emit(kind="fit", workload=name, repeat=rep, **rec)
        local = runs[None]
        steps = local[0]["steps_per_epoch"]
        for w in [None] + counts:
            summary = {"workload": name, "workers": w, "batch": batch, "steps_per_epoch": steps,
                       "cpus_per_worker": None if w is None else args.cpus_per_worker,
                       "samples_per_s": statistics.median(r["samples_per_s"] for r in runs[w]),
                       "ratio_vs_in_process": statistics.median(
                           r["samples_per_s"] / l["samples_per_s"] for r, l in zip(runs[w], local)),
                       "step_ms": statistics.median(1e3 * statistics.median(r["epoch_seconds"])
                                                    / steps for r in runs[w]),
                       "overhead_ms_per_step": statistics.median(
                           1e3 * (statistics.median(r["epoch_seconds"])
                                  - statistics.median(l["epoch_seconds"])) / steps
                           for r, l in zip(runs[w], local)),
                       "rows_by_reference": runs[w][0]["rows_by_reference"]}
            if w is not None:
                keys = runs[w][0]["timings"].keys()
                summary["timings"] = {
                    k: round(statistics.median(r["timings"][k] for r in runs[w]), 3) for k in keys}
                summary["ray_floor"] = ray_floor(batch, X.shape[1:], w, 50 if args.quick else 200)
            rows.append(emit(kind="summary", **summary))
    print(f"\nraymod Module.fit on Ray workers vs in process (OMP_NUM_THREADS="
          f"{os.environ['OMP_NUM_THREADS']}, Ray num_cpus={args.num_cpus}, cpus_per_worker="
          f"{args.cpus_per_worker}, {os.cpu_count()} cores; load average {load_start[0]:.2f} at "
          f"start, {os.getloadavg()[0]:.2f} at end; ray init {ray_init_s:.1f} s; "
          f"{time.perf_counter() - t_start:.0f} s)")
    print(f"{'workload':<8} {'workers':>7} {'samples/s':>10} {'x in-proc':>9} {'ms/step':>8} "
          f"{'+ms/step':>8} | {'wall':>6} {'refresh':>7} {'comp+met':>8} {'push':>6} "
          f"{'dispatch':>8} | floor: {'empty':>5} {'+batch':>6}  (ms; phases per worker)")
    for r in rows:
        t = r.get("timings", {})
        f = r.get("ray_floor", {})

        def g(d, k):
            return f"{d[k]:.2f}" if k in d else "-"
        print(f"{r['workload']:<8} {str(r['workers'] or 'in-proc'):>7} "
              f"{r['samples_per_s']:>10.0f} {r['ratio_vs_in_process']:>9.2f} "
              f"{r['step_ms']:>8.2f} {r['overhead_ms_per_step']:>8.2f} | "
              f"{g(t, 'wall_ms'):>6} {g(t, 'refresh_ms_per_worker'):>7} "
              f"{g(t, 'compute_metric_ms_per_worker'):>8} {g(t, 'push_ms_per_worker'):>6} "
              f"{g(t, 'dispatch_ms'):>8} | "
              f"{g(f, 'empty_call_ms'):>12} {g(f, 'call_with_batch_slice_ms'):>6}")
    rm.cluster.shutdown()


if __name__ == "__main__":
    main()
