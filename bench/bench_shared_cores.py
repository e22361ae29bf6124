"""Training throughput with a core taken by another process, against the same run quiet.

For each workload (bench/workloads.py) and each place it trains (in process; on 2 Ray workers
of 1 CPU each), one ``Module.fit`` times a quiet phase and then a busy one, in which a second
process spins on one core (``while True: pass``) for the rest of the fit. Each phase starts
with a warm-up epoch. The ratio busy/quiet is what a user on a shared machine keeps.

Pools compared (each in its own process, ``RAYMOD_THREADS``):
  auto   raymod's governor (raymod/threads.py) sizes the BLAS pool to the free cores
  fixed  a fixed pool of one thread per core: the behaviour before the governor

    python bench/bench_shared_cores.py [--only lenet,resnet20,lstm_lm] [--runs 3]
        [--places process,workers] [--batches N]

Prints one JSON object per measurement and then a table (medians over runs). OPENBLAS_CORETYPE
and OPENBLAS_L2_SIZE are unset for every measuring process.
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

for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # before numpy loads OpenBLAS
    os.environ.pop(_name, None)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from records import cpu_model  # noqa: E402

BATCHES = {"mlp": 200, "lenet": 40, "resnet20": 12, "lstm_lm": 8}  # an epoch of about 2 s
SPIN = "import time\nend = time.time() + 1800\nwhile time.time() < end: pass\n"


def child(args) -> None:
    """One measurement: quiet phase, then busy phase, printed as one JSON line."""
    sys.path.insert(0, str(HERE))
    import raymod as rm
    from raymod import threads
    from workloads import fit_rate

    spinner = []

    def before_phase(label):
        if label == "busy":
            spinner.append(subprocess.Popen([sys.executable, "-c", SPIN]))
            time.sleep(0.5)

    workers = None
    if args.place == "workers":
        rm.cluster.init(num_cpus=2)
        workers = 2
    try:
        rates = fit_rate(args.child, args.batches, (("quiet", args.epochs), ("busy", args.epochs)),
                         before_phase, workers=workers)
    finally:
        for p in spinner:
            p.kill()
            p.wait()
    g = threads.governor()
    rec = {"workload": args.child, "place": args.place,
           "pool": os.environ.get("RAYMOD_THREADS", "auto"),
           "quiet": rates["quiet"], "busy": rates["busy"],
           "kept": rates["busy"]["samples_per_s"] / rates["quiet"]["samples_per_s"],
           "driver_pool_changes": [(round(c.others, 2), c.threads) for c in g.history] if g
           else None, "loadavg_1m": round(os.getloadavg()[0], 2)}
    print("RESULT " + json.dumps(rec), flush=True)


def measure(workload: str, place: str, pool: str, batches: int, epochs: int) -> dict:
    env = dict(os.environ)
    env["RAYMOD_THREADS"] = pool if pool != "fixed" else str(len(os.sched_getaffinity(0)))
    env.pop("OMP_NUM_THREADS", None)
    env.pop("OPENBLAS_NUM_THREADS", None)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", workload, "--place", place,
           "--batches", str(batches), "--epochs", str(epochs)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            rec = json.loads(line[len("RESULT "):])
            rec["pool"] = pool
            return rec
    raise RuntimeError(f"{workload} {place} {pool}: no result\n{out.stdout[-2000:]}\n"
                       f"{out.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="lenet,resnet20,lstm_lm")
    ap.add_argument("--places", default="process,workers")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", type=int, help="batches an epoch (default: about 2 s each)")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs a phase")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--place", default="process", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    from threadpoolctl import threadpool_info
    __import__("numpy")  # loads the BLAS threadpoolctl reports
    blas = [{k: i.get(k) for k in ("internal_api", "architecture", "num_threads", "version")}
            for i in threadpool_info()]
    print(json.dumps({"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)), "blas": blas,
                      "loadavg_1m_at_start": round(os.getloadavg()[0], 2)}), flush=True)
    results = []
    for run in range(args.runs):
        for workload in args.only.split(","):
            for place in args.places.split(","):
                # workers hold 1 CPU each, so their pool is 1 thread either way
                for pool in (("fixed", "auto") if place == "process" else ("auto",)):
                    rec = measure(workload, place, pool, args.batches or BATCHES[workload],
                                  args.epochs)
                    rec["run"] = run
                    results.append(rec)
                    print(json.dumps(rec), flush=True)

    print(f"\nThroughput kept with one core busy ({cpu_model()}, "
          f"{len(os.sched_getaffinity(0))} cores, load now {os.getloadavg()[0]:.2f})")
    print(f"{'workload':<10}{'place':<9}{'pool':<7}{'quiet/s':>10}{'busy/s':>10}"
          f"{'kept (median)':>15}{'kept per run':>24}")
    keys = sorted({(r["workload"], r["place"], r["pool"]) for r in results},
                  key=lambda k: (args.only.split(",").index(k[0]), k[1], k[2]))
    for key in keys:
        rows = [r for r in results if (r["workload"], r["place"], r["pool"]) == key]
        quiet = statistics.median(r["quiet"]["samples_per_s"] for r in rows)
        busy = statistics.median(r["busy"]["samples_per_s"] for r in rows)
        kept = [r["kept"] for r in rows]
        print(f"{key[0]:<10}{key[1]:<9}{key[2]:<7}{quiet:>10.0f}{busy:>10.0f}"
              f"{statistics.median(kept):>15.2f}{', '.join(f'{k:.2f}' for k in kept):>24}")


if __name__ == "__main__":
    main()
