"""Every wait of the driver on an actor has a deadline: the rule, checked on the source, and
the deadlines it derives from the step times seen."""
import pathlib
import re

import pytest

from raymod.cluster import waits

ROOT = pathlib.Path(waits.__file__).resolve().parents[1]
#: modules that run inside the actors (they wait on servers from a worker) or wait on plain
#: tasks, not actors
INSIDE_ACTORS = {"cluster/worker.py", "cluster/waits.py", "kvstore/server.py",
                 "kvstore/client.py", "io/base.py", "io/ray_dataset_iter.py"}
RAW_WAIT = re.compile(r"\bray\.(get|wait)\(")


def test_the_driver_waits_on_actors_only_through_waits():
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in INSIDE_ACTORS:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if RAW_WAIT.search(code) and "ray.get_" not in code:
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, "wait through raymod.cluster.waits (a deadline):\n" + \
        "\n".join(offenders)


def test_deadlines_follow_the_steps_seen():
    d = waits.Deadlines()
    assert d.step() == waits.FIRST_STEP_SECONDS and d.call() == waits.FIRST_STEP_SECONDS
    for _ in range(100):
        d.saw(0.3, steps=100)  # 3 ms steps
    assert d.step() == waits.STEP_FLOOR_SECONDS  # the floor, not 60 s
    assert d.step(3) == 3 * waits.STEP_FLOOR_SECONDS
    assert d.step(first=True) == pytest.approx(waits.FIRST_STEP_SECONDS + 0.03)
    assert d.call() == waits.CALL_FLOOR_SECONDS
    for _ in range(10):
        d.saw(2.0)  # slow steps raise it: 10 x the 99th percentile
    assert d.step() == pytest.approx(20.0, rel=0.05)
    fixed = waits.Deadlines(step_timeout=4.0)
    assert fixed.step() == 4.0 and fixed.step(2) == 8.0


def test_a_missed_deadline_names_what_was_awaited(ray_cluster):
    import ray

    @ray.remote(num_cpus=0)
    class Slow:
        def nap(self, s):
            import time
            time.sleep(s)
            return s

    slow = Slow.remote()
    try:
        assert waits.get(slow.nap.remote(0), 30, "warm-up") == 0
        with pytest.raises(waits.DeadlineMissed, match=r"a nap: no answer within 0.2 s "
                                                       r"from 1 call"):
            waits.get(slow.nap.remote(5), 0.2, "a nap")
    finally:
        ray.kill(slow)
