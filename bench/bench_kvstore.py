"""One KVStore round on Ray against the same sums in one numpy process, side by side.

A round: every worker pushes its 25 MB float32 gradient to every KVServer shard tagged
``(step, slice)``; the shard that receives the step's last slice sums the slices in id
order and publishes the result (``KVServer.push`` returns it); every worker then takes the
published values as its parameters. The workers do this through
:class:`raymod.kvstore.client.ShardClient`, the code a module's workers run. Three byte
paths are timed:

- "shm" (server and workers on one machine), as a CPU worker runs it: the gradient sits in
  the push block it was computed into (``gradient_views``), the push is a doorbell message,
  and the worker's parameters are read-only views of the server's block (``value_views``);
- "shm-copy": the same road, but the worker packs its gradient into the block and copies
  the new values into private arrays (what a GPU worker, or a step driven call by call, does);
- "object-store": every byte through Ray, as between machines.

As in the real step protocol, a worker's read of round k's result happens at the start of its
call for round k+1, so the steady-state time per call is one full round. Servers come from
``DistKVStore('dist_sync', num_servers=S)`` with no optimizer: the published value is the sum.

The baseline, timed in alternating blocks in the same run, is one numpy process summing the
same N arrays (``total = g0.copy(); total += g1; ...``), the figure DESIGN.md quotes (10 ms for
2 x 25 MB on the reference machine); "+copy back" adds copying the sum into N arrays, which
is what an in-process multi-device store also does. Target: round <= 2x the sum-only baseline.

    OMP_NUM_THREADS=2 python bench/bench_kvstore.py [--workers 2,4] [--servers 1,2]
        [--paths shm,shm-copy,object-store] [--mb 25] [--rounds 20] [--repeats 3] [--quick]

The final sums are checked against numpy (the round really sums what the workers pushed).
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "2")
import numpy as np  # noqa: E402

import raymod as rm  # noqa: E402
from records import emit  # noqa: E402
from raymod.kvstore.client import ShardClient  # noqa: E402
from raymod.kvstore.dist import DistKVStore  # noqa: E402
from raymod.kvstore.layout import ShardLayout  # noqa: E402
from raymod.kvstore.server import KVServer  # noqa: E402


class PushWorker:
    """A Ray actor that pushes a fixed gradient and reads the published sums through the
    same :class:`ShardClient` a module's workers use."""

    def __init__(self, rank: int, layout, servers: list, sizes: list[int], seed: int,
                 in_place: bool):
        rng = np.random.default_rng(seed)
        self.rank, self.layout, self.in_place = rank, layout, in_place
        self.client = ShardClient(layout, servers)
        self.grads = {f"g{k}": rng.standard_normal(n).astype(np.float32)
                      for k, n in enumerate(sizes)}
        self.params = {k: np.zeros_like(v) for k, v in self.grads.items()}
        self.version = None

    def gradient(self) -> dict:
        return self.grads

    def step(self, step: int, num_slices: int, weights: tuple | None) -> dict:
        """Read the previous round's result (as ``Worker.refresh``), then pack and push."""
        laps, t = {}, time.perf_counter()
        if weights is not None and weights[0] != self.version:
            views = self.client.value_views(weights[1]) if self.in_place else {}
            self.params.update(views)  # a worker rebinds its executors to these
            copied = {k: v for k, v in self.params.items() if k not in views}
            if copied:
                self.client.read(weights[1], lambda shard, values:
                                 self.layout.unpack(shard, values, copied))
            self.version = weights[0]
        now = time.perf_counter()
        laps["read"], t = now - t, now
        if self.in_place:  # a worker's backward writes its gradient into these
            for key, view in self.client.gradient_views(self.client.next_slot(step)).items():
                if view is not self.grads[key]:
                    view[...] = self.grads[key]
                    self.grads[key] = view
        published = self.client.push(step, self.rank, self.grads, num_slices)
        laps["push"] = time.perf_counter() - t
        return {"published": published, "seconds": laps}

    def values(self) -> dict:
        return self.params

    def close(self) -> None:
        self.client.close()


def numpy_round(grads: list[np.ndarray], outs: list[np.ndarray] | None) -> float:
    t0 = time.perf_counter()
    total = grads[0].copy()
    for g in grads[1:]:
        total += g
    if outs is not None:
        for o in outs:
            o[...] = total
    return time.perf_counter() - t0


def server_floor(per_worker: list[np.ndarray], repeats: int = 5) -> dict:
    """The work one shard does per round, run here on a plain KVServer (no actor): the
    pushes and the finish (sum in slice order, replace the stored value, ``ray.put`` the
    result), and ``ray.put`` of one gradient alone (what serialising a push costs a worker)."""
    import ray
    layout = ShardLayout(1)
    pieces = [p for _, p in layout.add("g", per_worker[0].shape, per_worker[0].dtype)]
    server = KVServer(0, "sync", shared_memory=False)
    server.add(pieces, layout.buffers(0))
    payloads = [layout.pack(0, {"g": g}) for g in per_worker]
    finish, put = [], []
    for step in range(repeats):
        t0 = time.perf_counter()
        for slice_id, payload in enumerate(payloads):
            server.push(step, slice_id, payload, len(payloads))
        finish.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref = ray.put(payloads[0])
        put.append(time.perf_counter() - t0)
        del ref
    return {"server_round_ms": 1e3 * statistics.median(finish),
            "ray_put_gradient_ms": 1e3 * statistics.median(put)}


def ray_rounds(actors, kv, num_slices: int, start: int, rounds: int,
               weights: tuple | None) -> tuple[list, dict, tuple]:
    """``rounds`` steady-state rounds; returns per-round seconds, mean worker laps (s) and
    the published weights the workers read next."""
    import ray
    secs, laps = [], {}
    for step in range(start, start + rounds):
        t0 = time.perf_counter()
        outs = ray.get([a.step.remote(step, num_slices, weights) for a in actors])
        secs.append(time.perf_counter() - t0)
        published = {}
        for o in outs:
            published.update(o["published"])
            for k, v in o["seconds"].items():
                laps[k] = laps.get(k, 0.0) + v / (len(actors) * rounds)
        kv.set_published([published[s] for s in range(len(kv.servers))])
        weights = kv.weights()
    return secs, laps, weights


PATHS = {"shm": "shared memory", "shm-copy": "shm, copies", "object-store": "object store"}


def bench_config(n_workers: int, n_servers: int, sizes: list[int], rounds: int, repeats: int,
                 path: str):
    import ray
    kv = DistKVStore("dist_sync", num_servers=n_servers, shared_memory=path != "object-store")
    keys = [f"g{k}" for k in range(len(sizes))]
    kv.init(keys, [np.zeros(n, np.float32) for n in sizes])
    actor_cls = ray.remote(num_cpus=1)(PushWorker)
    actors = [actor_cls.remote(r, kv.layout, kv.servers, sizes, seed=r, in_place=path == "shm")
              for r in range(n_workers)]
    grads = ray.get([a.gradient.remote() for a in actors])
    per_worker = [np.concatenate([g[k] for k in keys]) for g in grads]
    outs = [np.empty_like(per_worker[0]) for _ in range(n_workers)]
    step = 0
    # warm-up: plasma pages, first calls
    _, _, weights = ray_rounds(actors, kv, n_workers, step, 2, None)
    step += 2
    ray_secs, base_secs, copy_secs, all_laps = [], [], [], []
    for _ in range(repeats):  # alternating blocks: a load change hits both
        secs, laps, weights = ray_rounds(actors, kv, n_workers, step, rounds, weights)
        step += rounds
        ray_secs.append(statistics.median(secs))
        all_laps.append(laps)
        base_secs.append(statistics.median(numpy_round(per_worker, None) for _ in range(rounds)))
        copy_secs.append(statistics.median(numpy_round(per_worker, outs) for _ in range(rounds)))
    # correctness: one more round's read leaves the sum in every worker
    ray.get([a.step.remote(step, n_workers, weights) for a in actors])
    got = ray.get(actors[0].values.remote())
    expect = np.sum(per_worker, axis=0, dtype=np.float32)
    err = float(np.max(np.abs(np.concatenate([got[k] for k in keys]) - expect)))
    floor = server_floor(per_worker)
    ray.get([a.close.remote() for a in actors])
    for a in actors:
        ray.kill(a)
    kv.close()
    del kv, actors, grads
    gc.collect()
    ratios = [r / b for r, b in zip(ray_secs, base_secs)]
    phases = {k: 1e3 * statistics.median(l[k] for l in all_laps) for k in all_laps[0]}
    return {"workers": n_workers, "servers": n_servers,
            "path": PATHS[path],
            "mbytes_per_worker": round(4 * sum(sizes) / 2**20, 2), "keys": len(sizes),
            "round_ms": 1e3 * statistics.median(ray_secs),
            "numpy_sum_ms": 1e3 * statistics.median(base_secs),
            "numpy_sum_copy_ms": 1e3 * statistics.median(copy_secs),
            "ratio": statistics.median(ratios), "ratios": [round(r, 2) for r in ratios],
            "ratio_vs_sum_copy": statistics.median(r / c for r, c in zip(ray_secs, copy_secs)),
            "worker_phase_ms": {k: round(v, 2) for k, v in phases.items()},
            "one_process_floor_ms": {k: round(v, 2) for k, v in floor.items()},
            "max_abs_error": err, "target_ratio": 2.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,4")
    ap.add_argument("--servers", default="1,2")
    ap.add_argument("--mb", type=float, default=25.0, help="gradient megabytes per worker")
    ap.add_argument("--keys", type=int, default=1, help="split the gradient into this many keys")
    ap.add_argument("--rounds", type=int, default=20, help="rounds per timed block")
    ap.add_argument("--repeats", type=int, default=3, help="alternating Ray/numpy blocks")
    ap.add_argument("--num-cpus", type=int, default=4, help="CPUs of the local Ray cluster")
    ap.add_argument("--paths", default="shm,shm-copy,object-store",
                    help="byte paths to time: " + ", ".join(f"{k} ({v})" for k, v in PATHS.items()))
    ap.add_argument("--quick", action="store_true", help="smoke run: 3 rounds, 1 block")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.repeats = 3, 1
    logging.disable(logging.WARNING)
    total = int(args.mb * 2**20 / 4)
    sizes = [total // args.keys + (1 if k < total % args.keys else 0) for k in range(args.keys)]
    t_start, load_start = time.perf_counter(), os.getloadavg()
    rm.cluster.init(num_cpus=args.num_cpus)
    rows = []
    for path in args.paths.split(","):
        for w in [int(x) for x in args.workers.split(",")]:
            for s in [int(x) for x in args.servers.split(",")]:
                rows.append(emit(kind="summary", **bench_config(
                    w, s, sizes, args.rounds, args.repeats, path)))
    print(f"\nKVStore round on Ray vs one numpy process ({args.mb:g} MB float32 per worker, "
          f"{args.keys} key(s), {args.rounds} rounds x {args.repeats} blocks; Ray num_cpus="
          f"{args.num_cpus}, {os.cpu_count()} cores; load average {load_start[0]:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at end; {time.perf_counter() - t_start:.0f} s)")
    print(f"{'path':>13} {'workers':>7} {'servers':>7} {'round ms':>9} {'sum ms':>7} "
          f"{'ratio':>6} {'target':>6} {'+copy ms':>8} {'ratio':>6} | worker ms: {'read':>5} "
          f"{'push':>6} | 1 shard's work ms: {'server':>6} {'put':>5}")
    for r in rows:
        p, f = r["worker_phase_ms"], r["one_process_floor_ms"]
        print(f"{r['path']:>13} {r['workers']:>7} {r['servers']:>7} {r['round_ms']:>9.1f} "
              f"{r['numpy_sum_ms']:>7.1f} "
              f"{r['ratio']:>6.2f} {r['target_ratio']:>5.1f}x {r['numpy_sum_copy_ms']:>8.1f} "
              f"{r['ratio_vs_sum_copy']:>6.2f} | {'':>10} {p['read']:>5.1f} "
              f"{p['push']:>6.1f} | {'':>18} {f['server_round_ms']:>6.1f} "
              f"{f['ray_put_gradient_ms']:>5.1f}")
    rm.cluster.shutdown()


if __name__ == "__main__":
    main()
