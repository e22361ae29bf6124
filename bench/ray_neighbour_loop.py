"""A neighbour: another Ray cluster that starts and stops beside raymod's, over and over.

    python bench/ray_neighbour_loop.py --cycles 40 --seconds 900 &
    python -m pytest -q -n 2 --dist loadfile          # must pass meanwhile

On a shared machine other Ray clusters come and go (other users' sessions, other test runs):
they bind Ray's usual dashboard port 8265 (or the next free one), the dashboard agent's 52365
and ports of the kernel's choice at any moment. This script is such a neighbour, so that
raymod's start-up (ports bound without a probe first, tries with longer waits, the one-line
error) can be checked against one: each cycle starts a single-node Ray cluster in a process
of its own, as a user's ``ray.init()`` would (its dashboard included, on 127.0.0.1), holds it
a random while, stops it, and pauses.

It stays out of everyone else's way: every service is bound to 127.0.0.1, the cluster lives
in a temporary directory of its own (``--temp-dir``, removed at the end), and at the end, or
when a cycle's process does not stop, it kills only the Ray processes that hold files in that
directory. It never runs ``ray stop`` (which would stop every Ray cluster of the user).
Bounded: at most ``--cycles`` cycles and ``--seconds`` seconds, each cycle's start and stop
within ``--start-timeout``. Prints one line per cycle and a summary; exits 0 (a start that
failed is counted and printed, it is the neighbour's business), 2 for bad flags.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

#: one cycle's process: start a cluster, say "up <dashboard url>", hold it until its stdin
#: says "stop" (or ends), stop it, say "down"
CHILD = r"""
import sys, time
import ray
temp_dir, port = sys.argv[1], int(sys.argv[2])
t0 = time.monotonic()
info = ray.init(address="local", num_cpus=1, _node_ip_address="127.0.0.1", _temp_dir=temp_dir,
                include_dashboard=True, dashboard_host="127.0.0.1",
                dashboard_port=port or None, logging_level="ERROR", log_to_driver=False)
print("up", round(time.monotonic() - t0, 1), info.dashboard_url or "-", flush=True)
sys.stdin.readline()
ray.shutdown()
print("down", flush=True)
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags (exit 2 with a one-line message when one is invalid)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])

    def positive(kind: type) -> object:
        def convert(text: str) -> float:
            value = kind(text)
            if value <= 0:
                raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
            return value
        return convert

    parser.add_argument("--cycles", type=positive(int), default=40,
                        help="most start/stop cycles (default %(default)s)")
    parser.add_argument("--seconds", type=positive(float), default=900.0,
                        help="most seconds in all; the cycle running then is finished "
                             "(default %(default)s)")
    parser.add_argument("--hold", type=positive(float), default=4.0,
                        help="longest a cluster is held up, s: each cycle holds it a random "
                             "0.5..HOLD (default %(default)s)")
    parser.add_argument("--pause", type=positive(float), default=2.0,
                        help="longest pause between cycles, s: random 0..PAUSE "
                             "(default %(default)s)")
    parser.add_argument("--dashboard-port", type=int, default=0, metavar="PORT",
                        help="the neighbour's dashboard port; 0 (default): Ray's choice, 8265 "
                             "or the next free one, as a user's ray.init() takes")
    parser.add_argument("--start-timeout", type=positive(float), default=180.0,
                        help="longest a cycle's start or stop may take before its processes "
                             "are killed, s (default %(default)s)")
    parser.add_argument("--temp-dir", default=None,
                        help="the clusters' Ray temp directory (default: a new one under "
                             "/tmp, removed at the end); keep its path short, Ray puts unix "
                             "sockets in it")
    parser.add_argument("--seed", type=int, default=None,
                        help="seeds the random holds and pauses (default: from the clock; "
                             "printed)")
    return parser.parse_args(argv)


def ray_processes_in(temp_dir: str) -> list[int]:
    """Ray's processes that hold a file under ``temp_dir``: this loop's clusters only."""
    import ray
    marker = os.path.dirname(os.path.realpath(ray.__file__)).encode()
    root, found = os.path.realpath(temp_dir), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        proc = f"/proc/{name}"
        try:
            with open(f"{proc}/comm", "rb") as f:
                comm = f.read().strip()
            if not (comm.startswith(b"ray") or comm == b"gcs_server"):
                with open(f"{proc}/cmdline", "rb") as f:
                    if marker not in f.read():
                        continue
            for fd in os.listdir(f"{proc}/fd"):
                try:
                    target = os.readlink(f"{proc}/fd/{fd}")
                except OSError:
                    continue
                if target == root or target.startswith(root + "/"):
                    found.append(int(name))
                    break
        except OSError:
            continue
    return found


def kill_leftovers(temp_dir: str, rounds: int = 20) -> int:
    """SIGKILL this loop's Ray processes until none is left (bounded); returns how many."""
    killed: set[int] = set()
    for _ in range(rounds):
        pids = ray_processes_in(temp_dir)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.25)
    return len(killed)


def cycle(index: int, args: argparse.Namespace, temp_dir: str, rng: random.Random) -> dict:
    """Start a cluster, hold it, stop it; returns what happened."""
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # every service on loopback
           "OPENBLAS_NUM_THREADS": "1"}
    env.pop("RAY_ADDRESS", None)
    t0 = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", CHILD, temp_dir, str(args.dashboard_port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    result = {"cycle": index, "up": False}
    try:
        line = _read_line(child, args.start_timeout)
        if not line.startswith("up"):
            result["error"] = (line.strip() or _last_line(child)) or "no answer"
            return result
        _, seconds, url = line.split()
        result.update(up=True, start_s=float(seconds), dashboard=url)
        held = rng.uniform(0.5, args.hold)
        time.sleep(held)
        result["held_s"] = round(held, 1)
        child.stdin.write("stop\n")
        child.stdin.flush()
        result["stopped"] = _read_line(child, args.start_timeout).startswith("down")
    finally:
        if child.poll() is None:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        result["left_killed"] = kill_leftovers(temp_dir)
        result["cycle_s"] = round(time.monotonic() - t0, 1)
    return result


def _read_line(child: subprocess.Popen, timeout: float) -> str:
    """The child's next stdout line, or '' after ``timeout`` s (then the child is killed)."""
    import selectors
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            child.kill()
            return ""
    return child.stdout.readline()


def _last_line(child: subprocess.Popen) -> str:
    if child.poll() is None:
        child.kill()
    child.wait()
    lines = [line for line in child.stderr.read().splitlines() if line.strip()]
    return lines[-1][:200] if lines else f"exit {child.returncode}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("ray_neighbour_loop: Linux only (finds its processes in /proc)", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    rng = random.Random(seed)
    own_dir = args.temp_dir is None
    temp_dir = tempfile.mkdtemp(prefix="rn-", dir="/tmp") if own_dir else args.temp_dir
    print(f"ray_neighbour_loop: up to {args.cycles} cycles in {args.seconds:g} s, temp dir "
          f"{temp_dir}, dashboard port {args.dashboard_port or 'Ray default'}, seed {seed}",
          flush=True)
    results, t0 = [], time.monotonic()
    # `kill PID` (how a script stops it when its tests end) cleans up as Ctrl-C does; the
    # default SIGTERM left the temp dir (195 MB after 110 cycles) and its summary unprinted
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        for index in range(args.cycles):
            if time.monotonic() - t0 > args.seconds:
                break
            result = cycle(index, args, temp_dir, rng)
            results.append(result)
            if result["up"]:
                print(f"cycle {index}: up in {result['start_s']} s ({result['dashboard']}), "
                      f"held {result.get('held_s')} s, stopped {result.get('stopped')}, "
                      f"{result['left_killed']} left killed, {result['cycle_s']} s", flush=True)
            else:
                print(f"cycle {index}: did not start ({result.get('error')}), "
                      f"{result['left_killed']} left killed", flush=True)
            time.sleep(rng.uniform(0, args.pause))
    except KeyboardInterrupt:
        print("ray_neighbour_loop: interrupted", flush=True)
    finally:
        left = kill_leftovers(temp_dir)
        if own_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)
    up = sum(r["up"] for r in results)
    print(f"ray_neighbour_loop: {len(results)} cycles, {up} started, "
          f"{len(results) - up} did not, {left} processes killed at the end, "
          f"{time.monotonic() - t0:.0f} s (seed {seed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
