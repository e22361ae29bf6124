"""The BLAS pool follows the cores this process may use and the cores others leave free."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from raymod import threads
from raymod.threads import CpuSampler, ThreadGovernor, choose_threads


@pytest.mark.parametrize("granted, cores, others, current, expected", [
    (2, 2, 0.0, None, 2),   # quiet: every granted core
    (2, 2, 1.0, None, 1),   # a neighbour spinning on one of two cores
    (2, 2, 2.0, None, 1),   # never below one thread
    (2, 2, 0.3, None, 2),   # a little background load keeps both
    (1, 8, 0.0, None, 1),   # Ray granted one CPU of eight
    (4, 8, 5.5, None, 3),   # 2.5 free of 8 rounds half up
    (4, 8, 6.6, None, 1),
    # hysteresis: from 2 threads, free must fall below 2 - 0.5 - MARGIN = 1.4 to drop to 1
    (2, 2, 0.55, 2, 2),
    (2, 2, 0.65, 2, 1),
    # ... and from 1 thread, rise above 1 + 0.5 + MARGIN = 1.6 to go back to 2
    (2, 2, 0.45, 1, 1),
    (2, 2, 0.35, 1, 2),
])
def test_choose_threads(granted, cores, others, current, expected):
    # reference: round(cores - others) half up, within [1, granted], with the margin
    assert choose_threads(granted, cores, others, current) == expected


def _proc_stat(ticks_by_core: dict[int, tuple]) -> str:
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]  # the aggregate line is ignored
    for core, (user, system, idle, steal) in ticks_by_core.items():
        lines.append(f"cpu{core} {user} 0 {system} {idle} 0 0 0 {steal} 0 0")
    lines.append("intr 12345")
    return "\n".join(lines) + "\n"


def _self_stat(utime: int, stime: int) -> str:
    # a process name with spaces and a ')' inside, as the kernel allows
    head = "4242 (python x) y) S 1 2 3 4 5 6 7 8 9 10"
    return f"{head} {utime} {stime} 0 0 20 0 3 0 100 200 300\n"


def test_cpu_sampler_subtracts_its_own_time():
    files = {}
    sampler = CpuSampler(read=lambda path: files[path])
    sampler.cores = [0, 1]
    files["/proc/stat"] = _proc_stat({0: (100, 0, 900, 0), 1: (50, 0, 950, 0), 2: (0, 0, 0, 0)})
    files["/proc/self/stat"] = _self_stat(100, 20)
    assert sampler.others() is None  # the first call only starts the window
    # 100 ticks pass on each core; both cores busy 80 of them (core 1: 10 of those stolen);
    # this process used 60 ticks in all
    files["/proc/stat"] = _proc_stat({0: (170, 10, 920, 0), 1: (110, 10, 970, 10),
                                      2: (999, 0, 0, 0)})  # a core outside the affinity set
    files["/proc/self/stat"] = _self_stat(150, 30)
    # reference: busy 80 + 80 = 160 ticks, less 60 of ours = 100 ticks over a 100-tick window
    assert sampler.others() == pytest.approx(1.0)


def test_cpu_sampler_on_this_machine_reads_something_sane():
    sampler = CpuSampler()
    sampler.others()
    time.sleep(0.2)
    others = sampler.others()
    assert others is not None and 0.0 <= others <= len(sampler.cores)


def test_cgroup_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads._cgroup_cores(str(tmp_path)) == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads._cgroup_cores(str(tmp_path)) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads._cgroup_cores(str(tmp_path)) == 3
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads._cgroup_cores(str(tmp_path)) is None


class _Pool:
    def __init__(self, size):
        self.size = size
        self.sizes = []

    def resize(self, n):
        self.size = n
        self.sizes.append(n)


class _Sampler:
    def __init__(self, loads):
        self.cores = [0, 1]
        self.loads = list(loads)
        self.calls = 0

    def others(self):
        self.calls += 1
        return self.loads.pop(0) if self.loads else None


def test_governor_samples_once_a_window_and_resizes():
    now = [0.0]
    pool, sampler = _Pool(2), _Sampler([None, None, 1.0, 1.0, 0.1])
    g = ThreadGovernor(sampler=sampler, pool=pool, clock=lambda: now[0], granted=2)
    assert sampler.calls == 1  # the first window starts at creation
    g.tick()                   # due at once: the first window's load is None (no change)
    now[0] = 0.5
    g.tick()                   # within the window: nothing read
    assert sampler.calls == 2 and pool.sizes == []
    now[0] = 1.0
    g.tick()
    assert pool.sizes == [1] and g.threads == 1
    now[0] = 2.0
    g.tick()                   # still busy: no resize
    now[0] = 3.0
    g.tick()                   # the neighbour left
    assert pool.sizes == [1, 2]
    assert [(c.others, c.threads) for c in g.history] == [(1.0, 1), (0.1, 2)]


def test_governor_fixed_size_never_samples():
    pool, sampler = _Pool(2), _Sampler([2.0])
    g = ThreadGovernor(fixed=1, sampler=sampler, pool=pool, clock=lambda: 10.0, granted=1)
    g.tick()
    assert pool.sizes == [1] and sampler.calls == 1


def test_blas_pool_resizes_numpys_openblas():
    from threadpoolctl import threadpool_info
    pool = threads.BlasPool()
    before = pool.size
    try:
        pool.resize(1)
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}
    finally:
        pool.resize(before)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to share")
def test_a_busy_neighbour_takes_the_pool_down_to_what_is_left():
    cores = len(os.sched_getaffinity(0))
    spin = "import time\nend = time.time() + 20\nwhile time.time() < end: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(cores - 1)]
    pool = threads.BlasPool()
    before = pool.size
    try:
        g = ThreadGovernor(pool=pool, granted=cores)
        a = np.random.default_rng(0).standard_normal((256, 256), dtype=np.float32)
        deadline = time.monotonic() + 10
        while g.threads > 1 and time.monotonic() < deadline:
            a @ a  # a step's work: this process's own time must not count as a neighbour
            g.tick()
        assert g.threads == 1, f"{cores - 1} spinners on {cores} cores; history {g.history}"
    finally:
        for p in spinners:
            p.kill()
            p.wait()
        pool.resize(before)


def test_governor_without_sampling_keeps_the_granted_cores():
    pool, sampler = _Pool(4), _Sampler([None, 2.0])
    g = ThreadGovernor(sampler=sampler, pool=pool, clock=lambda: 10.0, granted=2, sample=False)
    g.tick()
    assert pool.sizes == [2] and g.fixed == 2 and sampler.calls == 1


def test_a_ray_worker_keeps_a_fixed_pool_of_the_cpus_ray_assigned(ray_cluster):
    import ray

    @ray.remote(num_cpus=1)
    def pool():
        __import__("numpy")  # loads the BLAS the governor sizes
        g = threads.governor()
        return threads.granted_cores(), g.fixed, g.threads

    # fixed: a replayed slice must land on the bits the lost worker would have produced
    assert ray.get(pool.remote(), timeout=120) == (1, 1, 1)


def test_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setattr(threads, "_GOVERNOR", None)
    monkeypatch.setattr(threads, "_OFF", False)
    monkeypatch.setenv("RAYMOD_THREADS", "lots")
    with pytest.raises(ValueError, match="RAYMOD_THREADS.*'lots'"):
        threads.governor()
