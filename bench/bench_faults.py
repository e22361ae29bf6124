"""Faults at any moment of a fit: many seeded schedules on a loopback multi-node cluster.

Each schedule (``raymod.chaos.generate``) trains a 20-32-4 MLP for 40 steps on
``rm.Workers(2, 4)`` over three 2-CPU worker nodes, its KVServer on a node of its own, with a
checkpoint every 15 steps, and strikes one to three faults (worker or KVServer SIGKILL,
worker SIGSTOP, node removal, a worker killed while it starts) at moments of the fit's life
(bind, init_optimizer, windows, batch ends, a recovery, a joiner's set-up, get_params, a
checkpoint, SVRG's full-gradient pass, close). Every schedule must end on the trajectory of
the same training in one process (relative 1e-5), directly or, when too few workers were
left, through the checkpoint it stopped with; anything else is a bug, and its row prints the
command that replays it.

    python bench/bench_faults.py [--schedules 200] [--seed 0] [--only I] [--slow]

Prints one JSON line per schedule, then a table and a summary line (outcomes, hangs,
internal errors, fault -> next completed step p50 / p99 per fault kind).
"""
from __future__ import annotations

import argparse
import collections
import logging
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import raymod as rm  # noqa: E402
from raymod.chaos import Rig, generate  # noqa: E402
from records import emit  # noqa: E402


def _pct(values: list, q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, default=None, help="run schedule I alone")
    parser.add_argument("--slow", action="store_true",
                        help="also stop workers before any step time is known (60 s each)")
    args = parser.parse_args()
    if args.schedules < 1:
        parser.error(f"--schedules must be >= 1, got {args.schedules}")
    logging.getLogger("raymod").setLevel(logging.ERROR)
    rm.cluster.init(num_cpus=2, multi_node=True, include_dashboard=False)
    schedules = generate(args.seed, max(args.schedules, (args.only or 0) + 1), args.slow)
    if args.only is not None:
        schedules = [schedules[args.only]]
    rig = Rig()
    outcomes, t0 = [], time.perf_counter()
    try:
        for schedule in schedules:
            outcome = rig.run(schedule)
            outcomes.append(outcome)
            emit(bench="faults", seed=args.seed, **outcome.row())
            if not outcome.ok:
                print(outcome.error, file=sys.stderr, flush=True)
    finally:
        rig.close()
    print(f"\n{'#':>4} {'result':<10} {'max err':>9} {'s':>6}  faults -> next step (s)")
    for o in outcomes:
        recov = ", ".join(f"{f} {'-' if r is None else r}"
                          for f, r in zip(o.fired, o.recovery_s))
        print(f"{o.schedule.index:>4} {o.result:<10} {o.max_error:>9.1e} {o.seconds:>6.1f}  "
              f"{recov or 'no fault struck'}{'' if o.ok else '   REPLAY: ' + o.schedule.replay}")
    by_kind = collections.defaultdict(list)
    for o in outcomes:
        for fired, r in zip(o.fired, o.recovery_s):
            if r is not None:
                by_kind[fired.split("@")[0]].append(r)
    counts = collections.Counter(o.result for o in outcomes)
    summary = emit(bench="faults_summary", seed=args.seed, schedules=len(outcomes),
                   outcomes=dict(counts), hangs=counts["hang"], internal_errors=counts["error"],
                   off_trajectory=counts["off"],
                   faults_struck=sum(len(o.fired) for o in outcomes),
                   next_step_s={k: {"p50": _pct(v, 0.5), "p99": _pct(v, 0.99), "n": len(v)}
                                for k, v in sorted(by_kind.items())},
                   median_schedule_s=round(statistics.median(o.seconds for o in outcomes), 2),
                   wall_s=round(time.perf_counter() - t0, 1))
    print(f"\n{summary['schedules']} schedules, {summary['faults_struck']} faults struck: "
          f"{dict(counts)}; hangs {counts['hang']}, internal errors {counts['error']}")
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
