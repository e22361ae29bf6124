"""Soak: elastic training under a steady rate of SIGKILLs of workers and KVServers.

The MLP of DESIGN.md (784-128-64-10, batch 100, SGD 0.1 with momentum; bench_module.py's
``mlp_symbol``/``mlp_data``) trained by ``Module.fit`` on ``--workers`` actors at
``--cpus-per-worker`` CPUs (``rm.Workers(N // 2, N)``: survivors go on while a replacement
starts; ``--spares`` more started and set up ahead of need, idle, take a lost worker's
place at the next step boundary) with a ``dist_sync`` store of ``--servers`` shards, with hot standbys unless
``--no-standby``. The run is cut into stretches of ``--stretch`` steps; odd stretches are
faulty, even ones failure-free, so that both see the same machine load. In a faulty stretch a
killer thread SIGKILLs a random worker's process about every ``--worker-every`` seconds and a
KVServer primary's (the shards in turn) about every ``--server-every`` seconds.

A monitor thread asks the primaries for their finished step every 20 ms. Per fault:
fault -> next completed step is the first time every shard has finished a step beyond the
one it had finished at the kill. Throughput retained is the faulty stretches' steps per
second over the failure-free ones'. At the end the parameters are compared with the same
training in one process (the trajectory must not depend on the faults).

    python bench/bench_soak.py [--workers 8] [--cpus-per-worker 0.25] [--servers 2]
        [--steps 6000] [--stretch 500] [--worker-every 20] [--server-every 90]
        [--spares 1] [--no-standby] [--together] [--seed 0] [--quick]
    python bench/bench_soak.py --cost 3 --steps 1000   # what replication costs a step

Prints one JSON object per fault and a summary, then a table.
"""
from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import ray  # noqa: E402

import raymod as rm  # noqa: E402
from raymod.kvstore.dist import DistKVStore  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import mlp_data, mlp_symbol  # noqa: E402
from records import emit  # noqa: E402

BATCH = 100
EPOCH_STEPS = 500  # rows held: EPOCH_STEPS * BATCH, cycled for as many epochs as needed


class Monitor(threading.Thread):
    """Polls every shard's finished step: ``series`` holds ``(time, min steps_done)``."""

    def __init__(self, kv: DistKVStore):
        super().__init__(daemon=True)
        self.kv, self.series, self.stop = kv, [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            try:
                done = ray.get([s.progress.remote() for s in list(self.kv.servers)], timeout=1)
            except Exception:  # a dead primary: the driver is replacing it
                continue
            self.series.append((time.time(), min(p["steps_done"] for p in done)))

    def step_now(self) -> int:
        return self.series[-1][1] if self.series else -1

    def first_after(self, t: float, step: int) -> float | None:
        """When the shards first had a step beyond ``step`` finished, after time ``t``."""
        return next((when for when, s in self.series if when >= t and s > step), None)


class Killer(threading.Thread):
    """SIGKILLs workers and KVServer primaries during the faulty stretches."""

    def __init__(self, mod, kv, monitor: Monitor, args):
        super().__init__(daemon=True)
        self.mod, self.kv, self.monitor, self.args = mod, kv, monitor, args
        self.rng, self.faults, self.stop = random.Random(args.seed), [], threading.Event()
        self._shard = 0

    def faulty(self) -> bool:
        step = self.monitor.step_now()
        return step >= 0 and (step // self.args.stretch) % 2 == 1

    def run(self) -> None:
        due = {"worker": self._next("worker"), "server": self._next("server")}
        while not self.stop.wait(0.1):
            if not self.faulty() or self.monitor.step_now() >= self.args.steps - 20:
                due = {k: max(v, time.time() + 1) for k, v in due.items()}
                continue
            for kind in ("worker", "server"):
                if time.time() >= due[kind]:
                    if kind == "server" and self.args.together:
                        self._kill("worker")  # the same instant: both recoveries at once
                    self._kill(kind)
                    due[kind] = self._next(kind)

    def _next(self, kind: str) -> float:
        every = self.args.worker_every if kind == "worker" else self.args.server_every
        return time.time() + every * self.rng.uniform(0.5, 1.5)

    def _kill(self, kind: str) -> None:
        try:
            if kind == "worker":
                pool = self.mod._pool
                rank = self.rng.choice(sorted(pool.ranks))
                pid, who = pool.info[rank]["pid"], f"worker {rank}"
            else:
                shard, self._shard = self._shard, (self._shard + 1) % len(self.kv.servers)
                pid = ray.get(self.kv.servers[shard].__ray_call__.remote(
                    lambda _: os.getpid()), timeout=5)
                who = f"kvserver {shard}"
        except Exception as err:  # mid-recovery: try again at the next tick
            print(f"# skipped a {kind} kill: {type(err).__name__}: {err}", file=sys.stderr)
            return
        step = self.monitor.step_now()
        t = time.time()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # died meanwhile (an earlier kill's replacement path)
            return
        self.faults.append({"fault": kind, "who": who, "time": t, "step": step})


def stretch_rates(series: list, stretch: int, steps: int) -> dict[str, float]:
    """Steps per second over the failure-free and the faulty stretches (each stretch's
    first and last polled points; the first stretch is warm-up and left out)."""
    totals = {"free": [0, 0.0], "faulty": [0, 0.0]}
    for k in range(1, steps // stretch):
        inside = [(t, s) for t, s in series if k * stretch <= s < (k + 1) * stretch]
        if len(inside) < 2:
            continue
        kind = "faulty" if k % 2 else "free"
        totals[kind][0] += inside[-1][1] - inside[0][1]
        totals[kind][1] += inside[-1][0] - inside[0][0]
    return {k: n / s if s else float("nan") for k, (n, s) in totals.items()}


def fit(args, workers=None, kv=None, callback=None):
    X, y = mlp_data(EPOCH_STEPS * BATCH)
    it = rm.io.NDArrayIter(X, y, batch_size=BATCH, shuffle=True, seed=3,
                           label_name="softmax_label")
    rm.random.seed(1)
    mod = rm.mod.Module(mlp_symbol(), context=rm.cpu(), workers=workers)
    if callback is not None:
        callback(mod)
    mod.fit(it, num_epoch=args.steps // EPOCH_STEPS, kvstore=kv or "local",
            initializer=rm.init.Xavier(), optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    return mod


def replication_cost(args) -> None:
    """Failure-free steps/s without and with hot standbys, alternated ``--cost`` times each
    in one process (the same load for both)."""
    rates = {False: [], True: []}
    for _ in range(args.cost):
        for standby in (False, True):
            kv = DistKVStore("dist_sync", num_servers=args.servers, standby=standby)
            t0 = time.time()
            mod = fit(args, rm.Workers(args.workers, cpus_per_worker=args.cpus_per_worker), kv)
            rates[standby].append(args.steps / (time.time() - t0))
            mod.close()
            kv.close()
    without, with_ = (statistics.median(rates[k]) for k in (False, True))
    emit(kind="replication_cost", steps=args.steps, runs=args.cost,
         steps_per_s_without=without, steps_per_s_with=with_, load=os.getloadavg()[0])
    print(f"\nfailure-free, {args.workers} workers, {args.servers} KVServers, median of "
          f"{args.cost} fits of {args.steps} steps: {without:.1f} steps/s without standbys, "
          f"{with_:.1f} with ({100 * (1 - with_ / without):.1f} % per step for replication; "
          f"{1e3 / with_ - 1e3 / without:.2f} ms)")


def pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--cpus-per-worker", type=float, default=0.25)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--spares", type=int, default=1,
                    help="workers kept started and set up, idle, beyond the training ones")
    ap.add_argument("--steps", type=int, default=6000, help="a multiple of 500")
    ap.add_argument("--stretch", type=int, default=500, help="steps per stretch")
    ap.add_argument("--worker-every", type=float, default=20.0)
    ap.add_argument("--server-every", type=float, default=90.0)
    ap.add_argument("--no-standby", dest="standby", action="store_false")
    ap.add_argument("--together", action="store_true",
                    help="each KVServer kill also kills a worker at the same instant")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true", help="log every loss and recovery")
    ap.add_argument("--cost", type=int, default=0, metavar="N",
                    help="instead: N failure-free fits without and with standbys, alternated")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2000 steps, a kill every 5 s / 15 s")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.worker_every, args.server_every = 2000, 5.0, 15.0
    if args.steps % EPOCH_STEPS:
        ap.error(f"--steps must be a multiple of {EPOCH_STEPS}, got {args.steps}")
    if not args.verbose:
        logging.disable(logging.WARNING)  # every loss is logged as a warning
    warnings.filterwarnings("ignore")
    load = [os.getloadavg()[0]]
    # (logical CPUs: room for the spares' reservations; they are idle, the cores are 2)
    rm.cluster.init(num_cpus=max(2, int(np.ceil((args.workers + args.spares)
                                                * args.cpus_per_worker))))
    if args.cost:
        replication_cost(args)
        return
    kv = DistKVStore("dist_sync", num_servers=args.servers, standby=args.standby)
    monitor = Monitor(kv)
    killer = []

    def start(mod):
        monitor.start()
        killer.append(Killer(mod, kv, monitor, args))
        killer[0].start()

    t0 = time.time()
    mod = fit(args, rm.Workers(max(1, args.workers // 2), args.workers, spares=args.spares,
                               cpus_per_worker=args.cpus_per_worker), kv, start)
    wall = time.time() - t0
    killer[0].stop.set()
    monitor.stop.set()
    load.append(os.getloadavg()[0])
    got = {k: v.copy() for k, v in mod.get_params()[0].items()}
    events = list(mod._pool.events)
    mod.close()
    kv.close()
    want = fit(args).get_params()[0]
    err = max(float(np.abs(got[k] - want[k]).max() / max(np.abs(want[k]).max(), 1e-3))
              for k in want)
    lat = {"worker": [], "server": []}
    for f in killer[0].faults:
        after = monitor.first_after(f["time"], f["step"])
        f["to_next_step_s"] = None if after is None else after - f["time"]
        emit(kind="fault", **f)
        if after is not None:
            lat[f["fault"]].append(after - f["time"])
    rates = stretch_rates(monitor.series, args.stretch, args.steps)
    promoted = sum(1 for e in events if e["event"] == "kvserver_recovered"
                   and e.get("standby_promoted"))
    restored = sum(1 for e in events if e["event"] == "kvserver_recovered"
                   and not e.get("standby_promoted"))
    from_spares = sum(1 for e in events if e["event"] == "join" and e.get("spare"))
    summary = emit(kind="summary", workers=args.workers, spares=args.spares,
                   joins_from_spares=from_spares, servers=args.servers,
                   standby=args.standby, steps=args.steps, wall_s=round(wall, 1),
                   load_start=load[0], load_end=load[1],
                   worker_kills=len(lat["worker"]), server_kills=len(lat["server"]),
                   worker_p50_s=pct(lat["worker"], 50), worker_p99_s=pct(lat["worker"], 99),
                   server_p50_s=pct(lat["server"], 50), server_p99_s=pct(lat["server"], 99),
                   steps_per_s_free=rates["free"], steps_per_s_faulty=rates["faulty"],
                   retained=rates["faulty"] / rates["free"], promoted=promoted,
                   restored_from_snapshot=restored, max_rel_err_vs_one_process=err)

    def f(x, fmt=".2f"):
        return "-" if x is None else format(x, fmt)
    print(f"\nsoak: {args.workers} workers x {args.cpus_per_worker} CPU ({args.spares} spare(s), "
          f"{from_spares} joins from them), {args.servers} "
          f"KVServers {'with' if args.standby else 'without'} hot standbys, {args.steps} "
          f"steps in {wall:.0f} s on {os.cpu_count()} cores, load {load[0]:.1f} -> "
          f"{load[1]:.1f}")
    print("| fault | kills | -> next completed step p50 | p99 |")
    print("|---|---|---|---|")
    for kind in ("worker", "server"):
        print(f"| {kind} SIGKILL | {len(lat[kind])} | {f(pct(lat[kind], 50))} s | "
              f"{f(pct(lat[kind], 99))} s |")
    print(f"\nsteps/s failure-free {rates['free']:.1f}, faulty {rates['faulty']:.1f}: "
          f"{100 * summary['retained']:.0f} % retained; servers promoted {promoted}, "
          f"restored from the snapshot {restored}; max relative difference from one "
          f"process {err:.1e}")


if __name__ == "__main__":
    main()
