"""Recovery from a killed worker: from the kill to the next completed training step.

The MLP of DESIGN.md (784-128-64-10, batch 100, SGD 0.1, synthetic rows; bench/bench_module.py's
``mlp_symbol``/``mlp_data``) trained by ``Module.fit`` on 2, 4 and 8 worker actors of a local
cluster (``rm.cluster.init(num_cpus=...)``, one CPU per worker), as ``rm.Workers(1, N)``: the
survivors recompute the lost slices at once. A last configuration, ``rm.Workers(N, N)`` for
the smallest N ("fixed"), shows the other policy: below ``min_workers`` the step waits for the
replacement to start before it completes ("wait" column). A batch-end callback waits
(untimed) until the pool is back to full strength, lets a few failure-free steps run, then
kills one live worker, chosen at random, with ``ray.kill(handle, no_restart=True)``, stamping
``time.time()`` just before the kill: between steps ("between"), or from a timer thread a
random fraction of a step later, so that it usually lands during the next step ("during").
Per kill, from the pool's membership events:

- kill -> detect: the "lost" event's ``time`` (when the driver saw the actor error) minus the
  kill stamp;
- re-plan: the "recovered" event's ``replan_s`` (driver time spent forgetting the worker,
  re-assigning its slices to the survivors and submitting them);
- kill -> step: the "recovered" event's ``time`` (the step that saw the loss has completed)
  minus the kill stamp; the target for this MLP is below 1 s;
- wait: the "recovered" event's ``wait_s``, time the step spent waiting for a replacement
  because fewer than ``min_workers`` were left;
- replacement: seconds from detection to the replacement's "join" (the pool asks for it at
  the next step boundary, it starts in the background and joins at a later boundary).

For comparison, the failure-free step time: batch-end to batch-end over steps with the pool
at full strength, no kill, no join. Each worker count reports median, min and max.

    OMP_NUM_THREADS=2 python bench/bench_recovery.py [--workers 2,4,8] [--kills 10]
        [--during 3] [--fixed-kills 3] [--quick]

Prints one JSON object per kill and per (worker count, mode), then a table.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
import ray  # noqa: E402

import raymod as rm  # noqa: E402
from records import emit  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import mlp_data, mlp_symbol  # noqa: E402

BATCH = 100


class KillSchedule:
    """A batch-end callback: warm up, then per kill wait for full strength, run ``calm``
    failure-free steps, and kill one worker (between steps, or from a timer thread)."""

    def __init__(self, workers: int, modes: list[str], calm: int, seed: int):
        self.workers, self.modes, self.calm = workers, list(modes), calm
        self.rng = random.Random(seed)
        self.kills: list[dict] = []        # rank, mode, t_kill (time.time() just before)
        self.steps: list[tuple] = []       # (start, end, full strength, killed) per step
        self.countdown = 3 + calm          # warm-up steps, then the first calm run
        self.end = time.time()             # when the previous callback returned
        self.killed_last = False

    @property
    def done(self) -> bool:
        return not self.modes

    def __call__(self, param) -> None:
        now = time.time()
        pool = param.locals["self"]._pool
        self.steps.append((self.end, now, len(pool) == self.workers, self.killed_last))
        self.killed_last = False
        self.countdown -= 1
        if self.countdown <= 0 and self.modes:
            pool.wait_for(self.workers, 300)  # the previous kill's replacement: untimed
            mode = self.modes.pop(0)
            rank = self.rng.choice(pool.ranks)
            if mode == "between":
                self._kill(pool.workers[rank], rank, mode)
            else:  # a random moment of the next step (or just after it, if it is quick)
                delay = self.rng.uniform(0.0, 0.8 * self.calm_step_s())
                threading.Timer(delay, self._kill, args=(pool.workers[rank], rank, mode)).start()
            self.killed_last = True
            self.countdown = 1 + self.calm  # the recovering step, then calm ones
        self.end = time.time()

    def _kill(self, handle, rank: int, mode: str) -> None:
        self.kills.append({"rank": rank, "mode": mode, "t_kill": time.time()})
        ray.kill(handle, no_restart=True)

    def calm_step_s(self) -> float:
        calm = [b - a for a, b, full, killed in self.steps[3:] if full and not killed]
        return statistics.median(calm) if calm else 0.05


def run(workers: int, min_workers: int, modes: list[str], calm: int,
        seed: int) -> tuple[list[dict], list[float]]:
    """One fit with the kills of ``modes``; returns per-kill records and calm step seconds."""
    steps = 3 + len(modes) * (1 + calm) + 4  # warm-up, kill cycles, a few to finish
    X, y = mlp_data(steps * BATCH)
    it = rm.io.NDArrayIter(X, y, batch_size=BATCH, shuffle=False, label_name="softmax_label")
    mod = rm.mod.Module(mlp_symbol(), context=rm.cpu(), workers=rm.Workers(min_workers, workers))
    schedule = KillSchedule(workers, modes, calm, seed)
    try:
        mod.fit(it, num_epoch=1, eval_metric="acc", initializer=rm.init.Xavier(),
                optimizer="sgd", optimizer_params={"learning_rate": 0.1},
                batch_end_callback=schedule)
        events = list(mod._pool.events)
    finally:
        mod.close()
    joins = [e["time"] for e in events if e["event"] == "join"]
    calm_steps = [b - a for i, (a, b, full, killed) in enumerate(schedule.steps)
                  if i >= 3 and full and not killed and not any(a <= j <= b for j in joins)]
    records = []
    for kill in schedule.kills:
        lost = next((e for e in events if e["event"] == "lost" and e["rank"] == kill["rank"]),
                    None)
        done = next((e for e in events if e["event"] == "recovered"
                     and kill["rank"] in e["ranks_lost"]), None)
        if lost is None or done is None:  # seen outside a step (e.g. by get_params)
            records.append({**kill, "recovered": False})
            continue
        joined = [j for j in joins if j > lost["time"]]
        records.append({
            "workers": workers, "min_workers": min_workers, "mode": kill["mode"],
            "rank": kill["rank"], "recovered": True,
            "step": done["step"], "kill_to_detect_ms": 1e3 * (lost["time"] - kill["t_kill"]),
            "replan_ms": 1e3 * done["replan_s"],
            "kill_to_step_ms": 1e3 * (done["time"] - kill["t_kill"]),
            "detect_to_step_ms": 1e3 * done["seconds_to_step"],
            "wait_ms": 1e3 * done["wait_s"],
            "slices_recomputed": done["slices_recomputed"], "ranks_lost": done["ranks_lost"],
            "replacement_join_s": round(joined[0] - lost["time"], 3) if joined else None})
    return records, calm_steps


def stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)} if values else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,4,8", help="worker counts")
    ap.add_argument("--kills", type=int, default=10, help="kills between steps per count")
    ap.add_argument("--during", type=int, default=3,
                    help="kills from a timer thread during a step per count")
    ap.add_argument("--fixed-kills", type=int, default=3,
                    help="kills between steps with min_workers = max_workers (smallest count)")
    ap.add_argument("--calm", type=int, default=3, help="failure-free steps before each kill")
    ap.add_argument("--num-cpus", type=int, default=None,
                    help="CPUs of the local Ray cluster (default: the largest worker count)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 and 4 workers, 3+1 kills")
    args = ap.parse_args()
    if args.quick:
        args.workers, args.kills, args.during, args.fixed_kills, args.calm = "2,4", 3, 1, 1, 2
    logging.disable(logging.WARNING)  # the pool logs every loss as a warning
    warnings.filterwarnings("ignore", message="Parameters already initialized")
    counts = [int(w) for w in args.workers.split(",")]
    t_start, load_start = time.perf_counter(), os.getloadavg()
    rm.cluster.init(num_cpus=args.num_cpus or max(counts))
    configs = [(n, 1, ["between"] * args.kills + ["during"] * args.during) for n in counts]
    if args.fixed_kills:
        configs.append((counts[0], counts[0], ["between"] * args.fixed_kills))
    rows = []
    for workers, min_workers, modes in configs:
        random.Random(args.seed + workers).shuffle(modes)  # load drifts: interleave the modes
        records, calm = run(workers, min_workers, modes, args.calm, args.seed + workers)
        gc.collect()  # the closed module's kvstore servers go with it
        for rec in records:
            emit(kind="kill", **rec)
        for mode in ("between", "during"):
            done = [r for r in records if r.get("recovered") and r["mode"] == mode]
            if not done:
                continue
            summary = {"workers": workers, "min_workers": min_workers, "mode": mode,
                       "kills": len(done),
                       "not_in_a_step": sum(1 for r in records if not r.get("recovered")
                                            and r["mode"] == mode),
                       "step_ms_no_failure": stats([1e3 * s for s in calm])}
            for key in ("kill_to_detect_ms", "replan_ms", "wait_ms", "kill_to_step_ms",
                        "detect_to_step_ms", "slices_recomputed"):
                summary[key] = stats([r[key] for r in done])
            summary["replacement_join_s"] = stats([r["replacement_join_s"] for r in done
                                                   if r["replacement_join_s"] is not None])
            rows.append(emit(kind="summary", **summary))
    print(f"\nraymod recovery from a killed worker, MLP 784-128-64-10 batch {BATCH} "
          f"(OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, Ray num_cpus="
          f"{args.num_cpus or max(counts)}, 1 CPU per worker, {os.cpu_count()} cores; load "
          f"average {load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
          f"{time.perf_counter() - t_start:.0f} s)")
    print("median [min - max]; ms unless noted; target: kill -> step below 1000 ms")
    print(f"{'workers':>7} {'min':>3} {'mode':<8} {'kills':>5} | {'kill -> detect':>16} "
          f"{'re-plan':>16} {'wait':>16} {'kill -> step':>20} | {'step, no failure':>16} | "
          f"{'replacement s':>15}")

    def cell(s: dict, fmt: str = ".0f") -> str:
        return f"{s['median']:{fmt}} [{s['min']:{fmt}} - {s['max']:{fmt}}]" if s else "-"
    for r in rows:
        print(f"{r['workers']:>7} {r['min_workers']:>3} {r['mode']:<8} {r['kills']:>5} | "
              f"{cell(r['kill_to_detect_ms']):>16} {cell(r['replan_ms'], '.1f'):>16} "
              f"{cell(r['wait_ms']):>16} {cell(r['kill_to_step_ms']):>20} | "
              f"{cell(r['step_ms_no_failure']):>16} | {cell(r['replacement_join_s'], '.1f'):>15}")
    lost = sum(r["not_in_a_step"] for r in rows)
    if lost:
        print(f"{lost} kill(s) were seen outside a training step (no 'recovered' event)")
    rm.cluster.shutdown()


if __name__ == "__main__":
    main()
