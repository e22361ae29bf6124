"""Start ``jobs/train_digits.py`` many times on a loaded machine: does each start succeed, or
fail with one line and exit status 2 naming the cause?

    python bench/digits_starts.py --starts 20 --parallel 2 --burners 9 --min-load 8

``--burners`` processes spin on the CPU meanwhile (the load the issue asks for: a 1-minute
load average of 8 or more on 2 cores); run ``bench/ray_neighbour_loop.py`` beside it for
another Ray cluster starting and stopping too. Each start trains one epoch on 2 workers with
its outputs in a temporary folder. Prints one JSON line per start (exit status, seconds, the
load when it began, the last line of stderr when it failed) and a summary; bounded by
``--starts`` and ``--seconds``.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _burn(deadline: float) -> None:
    while time.monotonic() < deadline:
        pass


def wait_for_load(minimum: float, bound: float) -> float:
    """Wait (at most ``bound`` seconds) until the 1-minute load average is ``minimum`` or
    more; returns the load then."""
    end = time.monotonic() + bound
    while os.getloadavg()[0] < minimum and time.monotonic() < end:
        time.sleep(1.0)
    return os.getloadavg()[0]


def one_start(index: int, timeout: float, min_load: float = 0.0) -> dict:
    """Run the digits job once, when the load is ``min_load`` or more (waiting up to 5
    minutes for it); its exit status, time and (on failure) last stderr line."""
    load = wait_for_load(min_load, 300.0)
    with tempfile.TemporaryDirectory(prefix="raymod-digits-start-") as out:
        t0 = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, os.path.join(ROOT, "jobs", "train_digits.py"), "--epochs", "1",
                 "--workers", "2", "--checkpoint", os.path.join(out, "digits"),
                 "--metrics", os.path.join(out, "metrics.jsonl")],
                cwd=out, capture_output=True, text=True, timeout=timeout)
            status, err = done.returncode, done.stderr.strip().splitlines()
        except subprocess.TimeoutExpired:
            status, err = "timeout", []
        record = {"start": index, "status": status, "seconds": round(time.monotonic() - t0, 1),
                  "load_at_start": round(load, 2)}
        if status != 0:
            record["stderr_last"] = err[-1][:600] if err else ""
            record["stderr_lines"] = len(err)  # the job's log lines go to stderr too
            record["traceback"] = any(line.startswith("Traceback") for line in err)
        print(json.dumps(record), flush=True)
        return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--burners", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=1800.0, help="bound on the whole run")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on one start")
    parser.add_argument("--min-load", type=float, default=0.0,
                        help="begin each start only once the 1-minute load average is this "
                             "or more (the issue asks for 8 on 2 cores)")
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    burners = [multiprocessing.Process(target=_burn, args=(deadline,), daemon=True)
               for _ in range(args.burners)]
    for b in burners:
        b.start()
    time.sleep(20 if burners else 0)  # let the load average climb first
    try:
        with ThreadPoolExecutor(args.parallel) as pool:
            records = list(pool.map(lambda i: one_start(i, args.timeout, args.min_load),
                                    range(args.starts)))
    finally:
        for b in burners:
            b.terminate()
    ok = sum(r["status"] == 0 for r in records)
    # a clean failure: status 2, no traceback, and the last line is the job's one error line
    clean = sum(r["status"] == 2 and not r.get("traceback")
                and r.get("stderr_last", "").startswith("train_digits.py: error:")
                for r in records)
    loads = [r["load_at_start"] for r in records]
    print(json.dumps({"starts": len(records), "succeeded": ok, "failed_one_line_exit_2": clean,
                      "other_failures": len(records) - ok - clean,
                      "load_at_start_min": min(loads), "load_at_start_max": max(loads),
                      "cpu_count": os.cpu_count()}))
    return 0 if ok + clean == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
