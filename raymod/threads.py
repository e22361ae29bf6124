"""BLAS threads sized to the cores this process really has, now.

numpy's OpenBLAS starts one thread per core of the machine and splits every large GEMM
evenly among them. When another process holds one of those cores, the thread that shares it
gets a time slice now and then, and every GEMM waits for it: on a 2-core machine with one
busy neighbour a LeNet step took three times as long with 2 threads as with 1. MXNet's
OpenMP pool loses about 10 % there.

So raymod sizes the BLAS pool itself, at step boundaries:

- **granted** cores: the process's CPU affinity, its cgroup quota, the CPUs Ray assigned to
  the actor, and the pool size the user asked for (``OMP_NUM_THREADS`` and the like, read from
  the pool when raymod first sees it), whichever is smallest;
- **free** cores: of the cores in the affinity set, those that other processes did not use
  over the last second (``/proc/stat`` minus this process's own ``/proc/self/stat`` time);
- the pool gets ``min(granted, round(free))`` threads, at least one, with a margin so that
  a neighbour near half a core does not flip it at every sample.

Deciding (:func:`choose_threads`) is apart from measuring (:class:`CpuSampler`) and from doing
(:class:`BlasPool`); :class:`ThreadGovernor` ties them and is what the executor group calls
(:func:`tick`) before each forward.

The pool's size changes the last bits of some products (OpenBLAS splits them differently), so
a run sized by load is not bit-reproducible from one run to the next. Ray's worker actors
therefore keep a fixed pool of their granted CPUs unless told otherwise: elastic recovery
replays a lost slice on another worker and must land on the same bits. ``RAYMOD_THREADS``
chooses: ``auto`` (the default in a driver or script), ``fixed`` (the granted cores; the
default in a Ray actor), ``N`` (at most N threads, never resized) or ``off`` (raymod leaves
the pool alone).
"""
from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["choose_threads", "granted_cores", "CpuSampler", "BlasPool", "ThreadGovernor",
           "tick", "governor"]

SAMPLE_SECONDS = 1.0  # a window long enough to span several scheduler slices
MARGIN = 0.1  # of a core: how far past the rounding point the load must move to change the pool


def choose_threads(granted: int, cores: int, others: float, current: int | None = None) -> int:
    """The pool size for ``granted`` cores when other processes use ``others`` of ``cores``.

    Parameters
    ----------
    granted : int
        The most threads this process may run (affinity, quota, Ray's assignment, the user).
    cores : int
        Cores in the process's affinity set, which the others' use is measured over.
    others : float
        Cores' worth of time other processes used in the window (0 to ``cores``).
    current : int, optional
        The pool's size now: a change needs the load to move ``MARGIN`` past the rounding
        point, so a neighbour hovering there does not flip the pool at every sample.

    Returns
    -------
    int
        Between 1 and ``granted``.
    """
    free = cores - max(0.0, others)
    target = math.floor(free + 0.5)
    if current is not None and target != current:
        # move only when the free cores are clearly on the other side of current +- 0.5
        if abs(free - current) < 0.5 + MARGIN:
            target = current
    return max(1, min(granted, target))


def _cgroup_cores(root: str = "/sys/fs/cgroup") -> int | None:
    """Cores allowed by the cgroup's CPU quota (v2 ``cpu.max`` or v1 ``cfs_quota_us``)."""
    try:
        with open(os.path.join(root, "cpu.max")) as f:
            quota, period = f.read().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us")) as f:
            period = int(f.read())
        return None if quota <= 0 else max(1, math.ceil(quota / period))
    except (OSError, ValueError):
        return None


def _ray_cpus() -> int | None:
    """CPUs Ray assigned to this actor or task, when this process is one."""
    import sys
    ray = sys.modules.get("ray")  # never import Ray just to ask
    if ray is None or not ray.is_initialized():
        return None
    try:
        ctx = ray.get_runtime_context()
        if ctx.worker.mode != ray.WORKER_MODE:  # the driver: no assignment applies
            return None
        cpus = ctx.get_assigned_resources().get("CPU")
    except Exception:  # an older Ray without these: fall back on the other limits
        return None
    return max(1, math.ceil(cpus)) if cpus else None


def granted_cores(requested: int | None = None) -> int:
    """The most cores this process may use: affinity, cgroup quota, Ray's assignment and
    ``requested`` (the user's pool size), whichever is smallest."""
    limits = [len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else (os.cpu_count() or 1)]
    for limit in (_cgroup_cores(), _ray_cpus(), requested):
        if limit:
            limits.append(limit)
    return max(1, min(limits))


class CpuSampler:
    """Cores' worth of CPU time that other processes used on this process's cores.

    Reads ``/proc/stat`` (per-core busy and total time, for the cores of the affinity set)
    and ``/proc/self/stat`` (this process's time, all threads), both in the kernel's clock
    ticks; the others' use over a window is the cores' busy time less this process's,
    divided by the window's length. Steal time counts as busy: a hypervisor's other guests
    hold the core then.
    """

    def __init__(self, read: Callable[[str], str] | None = None) -> None:
        self._read = read or _read_text
        self.cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else list(range(os.cpu_count() or 1))
        self._last: tuple[float, float, float] | None = None

    def _totals(self) -> tuple[float, float, float] | None:
        """(busy ticks on our cores, all ticks on our cores, this process's ticks)."""
        try:
            stat = self._read("/proc/stat")
            own = self._read("/proc/self/stat")
        except OSError:
            return None
        wanted = {f"cpu{c}" for c in self.cores}
        busy = total = 0.0
        for line in stat.splitlines():
            name, _, rest = line.partition(" ")
            if name not in wanted:
                continue
            # user nice system idle iowait irq softirq steal [guest guest_nice: inside user]
            ticks = [float(v) for v in rest.split()[:8]]
            total += sum(ticks)
            busy += sum(ticks) - ticks[3] - ticks[4]
        # the process's name may hold spaces: fields 14 and 15 count from after its ')'
        fields = own[own.rindex(")") + 2:].split()
        mine = float(fields[11]) + float(fields[12])
        return busy, total, mine

    def others(self) -> float | None:
        """Cores used by other processes since the previous call (None on the first call
        or where ``/proc`` is missing)."""
        now = self._totals()
        if now is None:
            return None
        last, self._last = self._last, now
        if last is None or now[1] <= last[1]:
            return None
        window = (now[1] - last[1]) / len(self.cores)  # ticks that passed on each core
        used = (now[0] - last[0]) - (now[2] - last[2])
        return min(float(len(self.cores)), max(0.0, used / window))


def _read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


class BlasPool:
    """The BLAS libraries loaded in this process (numpy's and scipy's OpenBLAS, MKL), sized
    together through threadpoolctl."""

    def __init__(self) -> None:
        from threadpoolctl import ThreadpoolController
        self._libs = ThreadpoolController().select(user_api="blas").lib_controllers
        self.size = max((lib.num_threads for lib in self._libs), default=1)

    def resize(self, threads: int) -> None:
        """Give every BLAS pool ``threads`` threads."""
        for lib in self._libs:
            lib.set_num_threads(threads)
        self.size = threads


@dataclass
class Choice:
    """One decision of the governor, kept for the benchmarks and the log."""
    at: float
    others: float
    threads: int


class ThreadGovernor:
    """Resizes the BLAS pool to the free cores, at most once per ``SAMPLE_SECONDS``.

    Parameters
    ----------
    fixed : int, optional
        Keep the pool at this size and never sample (``RAYMOD_THREADS=N``).
    sample : bool, default True
        False keeps the pool at the granted cores (``RAYMOD_THREADS=fixed``).
    sampler, pool
        Test seams: a :class:`CpuSampler` and a :class:`BlasPool` (or objects like them).
    clock : callable
        Seconds, monotonic.
    """

    def __init__(self, fixed: int | None = None, sampler: CpuSampler | None = None,
                 pool: BlasPool | None = None, clock: Callable[[], float] = time.monotonic,
                 granted: int | None = None, sample: bool = True) -> None:
        self.pool = pool or BlasPool()
        self.granted = granted or granted_cores(fixed or self.pool.size)
        self.fixed = fixed if fixed is not None or sample else self.granted
        self.sampler = sampler or CpuSampler()
        self._clock = clock
        self._due = clock()
        self._lock = threading.Lock()
        self.history: list[Choice] = []
        if self.fixed is not None or self.pool.size > self.granted:
            self.pool.resize(min(self.granted, self.fixed or self.granted))
        self.sampler.others()  # the first window starts now

    @property
    def threads(self) -> int:
        return self.pool.size

    def tick(self) -> None:
        """Resize the pool if a window has passed; cheap otherwise (one clock read)."""
        now = self._clock()
        if self.fixed is not None or now < self._due or not self._lock.acquire(blocking=False):
            return
        try:
            self._due = now + SAMPLE_SECONDS
            others = self.sampler.others()
            if others is None:
                return
            threads = choose_threads(self.granted, len(self.sampler.cores), others,
                                     self.pool.size)
            if threads != self.pool.size:
                self.pool.resize(threads)
                self.history.append(Choice(now, others, threads))
                del self.history[:-100]
        finally:
            self._lock.release()


_GOVERNOR: ThreadGovernor | None = None
_OFF = False


def governor() -> ThreadGovernor | None:
    """This process's governor, made on first use (None under ``RAYMOD_THREADS=off``, or
    where no BLAS library is loaded or threadpoolctl cannot reach it).

    Raises
    ------
    ValueError
        ``RAYMOD_THREADS`` is none of ``auto``, ``fixed``, ``off`` or a positive int.
    """
    global _GOVERNOR, _OFF
    if _GOVERNOR is None and not _OFF:
        setting = os.environ.get("RAYMOD_THREADS", "").strip().lower()
        if not setting:
            setting = "fixed" if _ray_cpus() is not None else "auto"
        if setting == "off":
            _OFF = True
            return None
        if setting in ("auto", "fixed"):
            fixed = None
        else:
            try:
                fixed = int(setting)
                if fixed < 1:
                    raise ValueError
            except ValueError:
                raise ValueError(f"RAYMOD_THREADS: expected 'auto', 'fixed', 'off' or a "
                                 f"positive int, got {setting!r}") from None
        try:
            _GOVERNOR = ThreadGovernor(fixed=fixed, sample=setting == "auto")
        except Exception:  # threadpoolctl missing or no BLAS it knows: leave threads alone
            _OFF = True
            return None
    return _GOVERNOR


def tick() -> None:
    """Called before each forward: resize the BLAS pool to the free cores when due."""
    if _OFF:
        return
    g = _GOVERNOR if _GOVERNOR is not None else governor()
    if g is not None:
        g.tick()
