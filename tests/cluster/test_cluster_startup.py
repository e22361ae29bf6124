"""Local clusters that start beside others on a shared machine, and die with their driver.

Several clusters start at once beside another (ports are bound by Ray's processes, never
probed first); a start that times out is tried again with longer waits, then fails in one
line; a SIGKILLed driver leaves no Ray process behind (counted); a job that cannot start its
cluster exits 2 with one line; and the session cluster's leak check names a leaked actor.
"""
import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from raymod.cluster import local  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: bounded waits of this file (s): a cluster's start on a loaded 2-core machine, and the
#: processes of a dead driver's cluster disappearing
START_S, GONE_S = 300, 30

# A driver: starts a cluster ("single", or "multi" with one added node), holds a CPU with an
# actor, says "ready <dashboard url>", answers "ping" until its stdin ends, then shuts down.
DRIVER = textwrap.dedent("""
    import logging, sys
    import ray
    import raymod as rm
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    kind, port = sys.argv[1], int(sys.argv[2])
    info = rm.cluster.init(num_cpus=1, multi_node=kind == "multi",
                           dashboard_port=port or None)
    if kind == "multi":
        rm.cluster.local_cluster().add_node(num_cpus=1)

    @ray.remote(num_cpus=1)
    class Holder:
        def pid(self):
            import os
            return os.getpid()

    holder = Holder.remote()
    ray.get(holder.pid.remote())
    print("ready", info["dashboard_url"], flush=True)
    for line in sys.stdin:
        if line.strip() != "ping":
            break
        print("pong", ray.get(holder.pid.remote()), flush=True)
    rm.cluster.shutdown()
    print("stopped", flush=True)
""")


def start_driver(kind, port=0):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return subprocess.Popen([sys.executable, "-c", DRIVER, kind, str(port)], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_ready(driver, name):
    """The driver's dashboard URL once its cluster is up (bounded by the test's timeout)."""
    line = driver.stdout.readline()
    if not line.startswith("ready"):
        driver.kill()
        pytest.fail(f"driver {name} did not start its cluster (exit {driver.wait()}): "
                    f"{line!r}\n{driver.stderr.read()[-3000:]}")
    return line.split()[1]


def ray_processes(driver_pid):
    """pid -> start time of the Ray processes of the sessions ``driver_pid`` started,
    orphans included (found by the session files they hold open)."""
    return {pid: info[0] for pid, info in local._ray_processes(driver_pid,
                                                                local._ray_dir()).items()}


def descendants(pid):
    return local._descendants(pid)


def alive(processes):
    """Those of ``processes`` (pid -> start time) still running (zombies are not)."""
    left = {}
    for pid, start in processes.items():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z" and int(fields[19]) == start:
            left[pid] = start
    return left


def wait_gone(processes, seconds=GONE_S):
    deadline = time.monotonic() + seconds
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(processes)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes in /proc")
@pytest.mark.timeout(900)
def test_two_clusters_start_together_beside_a_third_and_a_killed_driver_leaves_nothing():
    # C runs first; A and B then start at the same moment, B asking for a port that is
    # taken (it must give it up for another); A is SIGKILLed while its two nodes run
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    drivers = {}
    try:
        drivers["C"] = start_driver("single")
        urls = {"C": wait_ready(drivers["C"], "C")}
        drivers["A"] = start_driver("multi")
        drivers["B"] = start_driver("multi", taken.getsockname()[1])
        urls.update({name: wait_ready(drivers[name], name) for name in "AB"})
        assert len(set(urls.values())) == 3, urls  # three dashboards, three ports
        assert not urls["B"].endswith(f":{taken.getsockname()[1]}"), urls
        counts = {name: ray_processes(d.pid) for name, d in drivers.items()}
        trees = {name: descendants(d.pid) for name, d in drivers.items()}
        figures = {name: len(c) for name, c in counts.items()}
        # GCS, raylets, agents, dashboard and its modules, the actor: well over 5 each
        assert all(n >= 5 for n in figures.values()), figures

        t0 = time.monotonic()
        drivers["A"].kill()  # SIGKILL: no exit hook runs
        drivers["A"].wait()
        left = wait_gone({**counts["A"], **trees["A"]})
        gone_s = time.monotonic() - t0
        after = ray_processes(drivers["A"].pid)
        print(f"Ray processes of the SIGKILLed driver: {figures['A']} (+ "
              f"{len(trees['A'])} below it) before, {len(left)} + {len(after)} found "
              f"{gone_s:.1f} s after; the others: {figures['B']}, {figures['C']}")
        assert not left and not after, (
            f"left by the SIGKILLed driver after {gone_s:.1f} s: "
            f"{sorted(set(left) | set(after))}")

        # the neighbours did not notice
        for name in "BC":
            assert alive(counts[name]) == counts[name], name
            drivers[name].stdin.write("ping\n")
            drivers[name].stdin.flush()
            assert drivers[name].stdout.readline().startswith("pong"), name
        for name in "BC":  # stopped as a program stops them: everything goes
            drivers[name].stdin.close()
            out = drivers[name].stdout.read()
            assert drivers[name].wait(timeout=120) == 0 and "stopped" in out, \
                drivers[name].stderr.read()[-3000:]
            assert not wait_gone({**counts[name], **trees[name]}), name
            assert not ray_processes(drivers[name].pid), name
    finally:
        taken.close()
        for driver in drivers.values():
            if driver.poll() is None:
                driver.kill()
                driver.wait()


# ---- tries of a start, and the one-line error (no cluster started) ---------------------------
TIMEOUT = "The current node timed out during startup. This could happen because ..."
DASHBOARD_LOG = "\n".join(
    ["2026-01-01 INFO head.py: Starting dashboard"] * 18
    + ["Exception: Failed to find a valid port for dashboard after 0 retries: "
       "[Errno 98] error while attempting to bind on address ('127.0.0.1', 8265): "
       "address already in use", "2026-01-01 INFO head.py: exiting"])


@pytest.fixture
def quick(monkeypatch):
    """No pauses between tries, short waits."""
    monkeypatch.setattr(local, "START_BACKOFF_S", 0.0)
    monkeypatch.setattr(local, "START_WAIT_S", 5.0)


def test_a_start_that_times_out_is_tried_again_with_a_longer_wait(quick, caplog):
    from ray._private import ray_constants
    tries = []

    def start(attempt, wait_s):
        tries.append((attempt, wait_s, ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S,
                      os.environ.get("RAY_gcs_server_port_wait_time_s")))
        if attempt == 0:
            raise Exception(TIMEOUT)
        return "up"

    dashboard_wait = ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S
    gcs_wait = os.environ.get("RAY_gcs_server_port_wait_time_s")
    with caplog.at_level(logging.WARNING, logger="raymod.cluster.local"):
        assert local._retry_start(start) == "up"
    assert [t[:2] for t in tries] == [(0, 5.0), (1, 10.0)]
    # Ray's own waits: never shorter than Ray's, set for the tries only
    assert all(t[2] >= max(dashboard_wait, t[1]) for t in tries), tries
    assert ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S == dashboard_wait
    if gcs_wait is None:
        assert [t[3] for t in tries] == ["5", "10"], tries
    assert os.environ.get("RAY_gcs_server_port_wait_time_s") == gcs_wait
    retried = [r.getMessage() for r in caplog.records if "try 1 of 3 failed" in r.getMessage()]
    assert len(retried) == 1 and "timed out" in retried[0], caplog.text


def test_a_start_that_keeps_failing_ends_in_one_line_saying_what_to_do(quick):
    calls = []

    def start(attempt, wait_s):
        calls.append(attempt)
        raise Exception(DASHBOARD_LOG)

    with pytest.raises(local.ClusterStartError) as info:
        local._retry_start(start)
    message = str(info.value)
    assert calls == [0, 1, 2] and info.value.tries == 3
    assert "\n" not in message and len(message) < 600, message
    assert "address already in use" in info.value.cause, message
    assert "include_dashboard=False" in message and "address=" in message, message
    assert isinstance(info.value, local.MXNetError)


def test_an_error_no_try_cures_is_not_tried_again(quick):
    calls = []

    def missing(attempt, wait_s):
        calls.append(attempt)
        raise Exception("Cannot include dashboard with missing packages.")

    with pytest.raises(local.ClusterStartError) as info:
        local._retry_start(missing)
    assert calls == [0] and info.value.tries == 1

    def bad_argument(attempt, wait_s):
        calls.append(attempt)
        raise TypeError("init() got an unexpected keyword argument 'bogus'")

    with pytest.raises(TypeError):  # a caller's mistake stays what it is
        local._retry_start(bad_argument)
    assert calls == [0, 0]


def test_the_job_that_cannot_start_its_cluster_exits_2_with_one_line(tmp_path):
    # every start times out (ray.init patched in the job's process): three tries, then one
    # line naming the cause and the way out, exit status 2, no traceback
    script = textwrap.dedent(f"""
        import runpy, sys
        import ray
        import raymod.cluster.local as local
        local.START_BACKOFF_S = 0.0

        def timed_out(*args, **kwargs):
            raise Exception({TIMEOUT!r})

        ray.init = timed_out
        sys.argv = ["train_digits.py", "--epochs", "1", "--checkpoint", {str(tmp_path / "d")!r},
                    "--metrics", {str(tmp_path / "m.jsonl")!r},
                    "--checkpoint-dir", {str(tmp_path / "fit")!r}]
        runpy.run_path({str(ROOT / "jobs" / "train_digits.py")!r}, run_name="__main__")
    """)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT / "jobs", env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert len(lines) == 1, done.stderr[-3000:]
    assert "could not start a local Ray cluster (3 tries)" in lines[0], lines
    assert "timed out" in lines[0] and "--no-dashboard" in lines[0] and "--address" in lines[0]


# ---- the session cluster's leak check ---------------------------------------------------------
def test_the_leak_check_names_an_actor_that_holds_a_cpu(ray_cluster):
    conftest = sys.modules.get("conftest")
    if conftest is None or not hasattr(conftest, "held_beyond"):
        pytest.skip("tests/conftest.py is not importable as 'conftest' here")

    @ray.remote(num_cpus=1)
    class Leaky:
        def ready(self):
            return True

    before = conftest.cluster_held()
    actor = Leaky.options(name="leak-check-probe", namespace="leak-check").remote()
    try:
        ray.get(actor.ready.remote())
        beyond = conftest.held_beyond(before, 1.0)
        assert beyond.get("CPU") == 1.0, beyond
        named = conftest.live_actors()
        assert any("Leaky leak-check-probe" in line for line in named), named
    finally:
        ray.kill(actor, no_restart=True)
    t0 = time.monotonic()
    assert conftest.held_beyond(before, conftest.LEAK_WAIT_S) == {}
    assert time.monotonic() - t0 < conftest.LEAK_WAIT_S
    t0 = time.monotonic()  # nothing held: no wait at all
    assert conftest.held_beyond(before, conftest.LEAK_WAIT_S) == {}
    assert time.monotonic() - t0 < 1.0


# ---- workers' niceness ------------------------------------------------------------------------
def test_workers_of_a_cluster_raymod_starts_run_at_the_drivers_niceness(ray_cluster):
    # Ray's default (15) gives a worker 1/28 of the CPU share of a neighbour at 0: under
    # load the digits job's workers did not start within 2 minutes
    @ray.remote(num_cpus=1)
    class Probe:
        def niceness(self):
            return os.nice(0)

    actor = Probe.remote()
    try:
        assert ray.get(actor.niceness.remote()) == local.WORKER_NICENESS == 0
    finally:
        ray.kill(actor, no_restart=True)


def test_a_niceness_the_user_chose_is_kept(monkeypatch):
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    assert local._with_worker_niceness(None) == {"worker_niceness": 0}
    assert local._with_worker_niceness({"worker_niceness": 10, "x": 1}) == \
        {"worker_niceness": 10, "x": 1}
    monkeypatch.setenv("RAY_worker_niceness", "5")
    assert local._with_worker_niceness({"x": 1}) == {"x": 1}
