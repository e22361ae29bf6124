"""Where the CPU of one ``bench_scale`` fit goes: CPU seconds per step of every process.

Runs the tiny workload of bench/bench_scale.py with N workers (run-ahead on), and reads
``/proc/<pid>/stat`` of the driver, every Ray actor (``ray::Worker``, ``ray::KVServer``) and
Ray's own daemons (raylet, gcs_server, ...) before and after the timed epoch; prints CPU
ms/step per process kind, with the number of voluntary/involuntary context switches.

    OMP_NUM_THREADS=1 python bench/profile_scale.py [--workers 8] [--steps 300]
        [--cprofile driver.prof]

With ``RAYMOD_CPU_CLOCK=1`` in the environment the workers time their phases (wait,
compute, metric, push) in CPU seconds, printed last.
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
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import raymod as rm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import CLUSTER_CPUS, tiny_data, tiny_symbol  # noqa: E402

_TICK = os.sysconf("SC_CLK_TCK")


def _procs() -> dict[int, tuple[str, float, int, int]]:
    """pid -> (kind, cpu seconds, voluntary, involuntary switches) of this process and its
    descendants (the Ray cluster it started, not another one on this machine)."""
    parents = {}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    ours = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in ours and pid not in ours:
                ours.add(pid)
                grew = True
    out = {}
    for pid in map(str, ours):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            vol = invol = 0
            for tid in os.listdir(f"/proc/{pid}/task"):  # the process's status: its main thread
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    status = dict(line.split(":", 1) for line in f if ":" in line)
                vol += int(status["voluntary_ctxt_switches"])
                invol += int(status["nonvoluntary_ctxt_switches"])
        except OSError:
            continue
        if int(pid) == os.getpid():
            kind = "driver"
        elif cmd.startswith("ray::"):
            kind = cmd.split()[0]
        elif "ray" in cmd:
            kind = Path(cmd.split()[0]).name
            if kind.startswith("python"):
                kind = next((Path(a).name for a in cmd.split()[1:] if a.endswith(".py")), kind)
        else:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        out[int(pid)] = (kind, cpu, vol, invol)
    return out


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--run-ahead", type=int, default=None)
    parser.add_argument("--cprofile", default=None,
                        help="write a CPU-time cProfile of the driver's timed epoch here")
    parser.add_argument("--cprofile-dir", default=None,
                        help="profile the workers' window loops and the servers' doorbell "
                             "threads (both epochs) into this folder; prints the top functions")
    parser.add_argument("--top", type=int, default=25, help="functions printed per profile")
    args = parser.parse_args()
    if args.cprofile_dir:  # read by raymod.profiling in the actors the cluster starts
        os.makedirs(args.cprofile_dir, exist_ok=True)
        os.environ["RAYMOD_CPROFILE_DIR"] = os.path.abspath(args.cprofile_dir)
    warnings.filterwarnings("ignore")
    logging.getLogger().setLevel(logging.ERROR)
    rm.cluster.init(num_cpus=CLUSTER_CPUS)
    X, y = tiny_data(64 * args.steps)
    spec = rm.Workers(args.workers, cpus_per_worker=CLUSTER_CPUS / max(8, args.workers),
                      run_ahead=args.run_ahead)
    mod = rm.mod.Module(tiny_symbol(), workers=spec)
    it = rm.io.NDArrayIter(X, y, batch_size=64)
    marks = []
    import cProfile
    prof = cProfile.Profile(time.thread_time)

    def stamp(*_):
        if args.cprofile:
            prof.disable() if marks else prof.enable()
        t = mod._exec_group.state.timings
        wall, own = time.perf_counter(), _own_cpu()
        procs = _procs()
        if not marks:  # the scan's own CPU stays out of the timed epoch
            wall, own = time.perf_counter(), _own_cpu()
        procs[os.getpid()] = ("driver", own) + procs[os.getpid()][2:]
        marks.append((wall, procs, t.steps, dict(t.phases)))

    mod.fit(it, num_epoch=2, optimizer="sgd", kvstore="dist_sync",
            optimizer_params={"learning_rate": 0.05}, initializer=rm.init.Xavier(),
            epoch_end_callback=stamp)
    (t0, a, s0, p0), (t1, b, s1, p1) = marks
    if args.cprofile:
        prof.dump_stats(args.cprofile)
    per = defaultdict(lambda: [0, 0.0, 0, 0])
    for pid, (kind, cpu, vol, invol) in b.items():
        if pid in a:
            row = per[kind]
            row[0] += 1
            row[1] += cpu - a[pid][1]
            row[2] += vol - a[pid][2]
            row[3] += invol - a[pid][3]
    n = args.steps
    print(f"wall {1e3 * (t1 - t0) / n:.2f} ms/step over {n} steps, {args.workers} workers, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'process':28} {'n':>3} {'CPU ms/step':>11} {'each':>6} {'vol cs/step':>11} "
          f"{'invol':>6}")
    total = 0.0
    for kind, (count, cpu, vol, invol) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        total += cpu
        if cpu / n < 1e-5 and vol / n < 0.5:
            continue
        print(f"{kind[:28]:28} {count:3d} {1e3 * cpu / n:11.3f} {1e3 * cpu / n / count:6.3f} "
              f"{vol / n:11.1f} {invol / n:6.1f}")
    print(f"{'total':28} {'':3} {1e3 * total / n:11.3f}")
    # with RAYMOD_CPU_CLOCK=1 in the environment the workers time their phases in CPU seconds
    clock = "CPU" if os.environ.get("RAYMOD_CPU_CLOCK") else "wall"
    print(f"worker phases, ms/step summed over workers ({clock}):",
          {k: round(1e3 * (v - p0.get(k, 0.0)) / max(1, s1 - s0), 3) for k, v in p1.items()})
    mod.close()
    if args.cprofile_dir:
        _print_profiles(args.cprofile_dir, 2 * n, args.top)


def _print_profiles(folder: str, steps: int, top: int) -> None:
    """Sum each tag's dumps (one per process) and print its costliest functions."""
    import pstats
    tags = defaultdict(list)
    for name in sorted(os.listdir(folder)):
        if name.endswith(".prof"):
            tags[name.split("-")[0]].append(os.path.join(folder, name))
    for tag, files in tags.items():
        stats = pstats.Stats(*files)
        print(f"\n== {tag}: {len(files)} processes, {1e3 * stats.total_tt / steps:.3f} CPU "
              f"ms/step over about {steps} steps (both epochs)")
        stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
