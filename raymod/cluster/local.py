"""Starting or joining the Ray cluster raymod runs on.

``init()`` with no address starts a single-node cluster bound to loopback only (nothing
listens on the machine's network address), which is what tests and laptop runs want.
``init(address='auto')`` joins the cluster of ``ray submit`` / ``ray job submit``.
``init(multi_node=True)`` starts a :class:`LocalCluster` instead: the same loopback head, to
which :meth:`LocalCluster.add_node` adds more raylets on this machine (tests of placement and
node loss), each with its own CPUs, custom resources and object store.

A local cluster shares a machine with others (other users' sessions, test runs): its ports are
bound by the processes that use them (Ray's dashboard tries 8265 and the ports after it; every
other port is the kernel's choice), never probed first and handed over later, and a start that
times out under load or loses a port to a neighbour is tried again (:data:`START_TRIES` tries,
each waiting longer), after which :class:`ClusterStartError` says in one line what failed.
Its processes die with the process that started it: a watchdog process kills them when that
process is gone, even SIGKILLed (Ray's own fate-sharing leaves the dashboard agent and the
runtime-env agent of every node running for a minute or more).
"""
from __future__ import annotations

import atexit
import contextlib
import inspect
import logging
import math
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..base import MXNetError

__all__ = ["init", "shutdown", "is_initialized", "LocalCluster", "local_cluster",
           "ClusterStartError"]

_LOG = logging.getLogger(__name__)
_T = TypeVar("_T")
_LOOPBACK = "127.0.0.1"
_started_here = {"local": True}  # whether init() started the cluster (vs joined one)
#: init(multi_node=True)'s cluster, and whether its exit hook is registered
_cluster: dict[str, Any] = {"multi_node": None, "exit_hook": False}
#: object store of the head and of each added node (bytes); pages are used only when filled
HEAD_OBJECT_STORE = 2 << 30
NODE_OBJECT_STORE = 100 << 20
#: Ray's dashboard port: the dashboard takes it when free, else one of the 50 after it
DASHBOARD_PORT = 8265
#: tries of a local cluster's start (or of an added node's) before ClusterStartError
START_TRIES = 3
#: how long the first try waits for the dashboard, the GCS and the nodes to come up (s);
#: try k waits k times as long (Ray's own waits are 30-60 s, too short on a loaded machine)
START_WAIT_S = 60.0
#: pause before try k+1: k times this, plus up to as much again at random, so that two
#: clusters that collided on a port do not collide again (s)
START_BACKOFF_S = 1.0
#: what to do when a local cluster does not start (ClusterStartError's advice)
#: niceness of the worker processes of a cluster raymod starts. Ray's default (15) leaves
#: its own daemons responsive, but a worker at 15 gets 1/28 of the share of any process at
#: 0: at load 13 on 2 cores a worker that starts in 0.7 s on a quiet machine took 70-95 s
#: (the digits job failed its start), and a busy neighbour halves a worker's training
#: speed. raymod's workers are the job, so they run at 0, as Ray's own job drivers do.
#: ``RAY_worker_niceness`` in the environment, or ``_system_config``, chooses another.
WORKER_NICENESS = 0
START_ADVICE = ("try again, start it without Ray's dashboard (include_dashboard=False, or "
                "RAYMOD_DASHBOARD=0), or join a running cluster (address='host:port')")


class ClusterStartError(MXNetError):
    """A local Ray cluster (or a node added to one) did not start.

    Raised after :data:`START_TRIES` tries of a start that timed out or lost a port to another
    cluster starting on the machine; the processes of every failed try are stopped.
    ``str(error)`` is one line: what failed, why, and what to do.

    Attributes
    ----------
    cause : str
        What failed and why, one line (e.g. ``the dashboard did not start: ...``).
    tries : int
        How many tries were made.
    """

    def __init__(self, cause: str, tries: int, advice: str = START_ADVICE):
        self.cause, self.tries = cause, tries
        plural = "try" if tries == 1 else "tries"
        super().__init__(f"could not start a local Ray cluster ({tries} {plural}): {cause}; "
                         f"{advice}")


def is_initialized() -> bool:
    """Whether this process is connected to a Ray cluster."""
    import ray
    return ray.is_initialized()


def init(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None,
         multi_node: bool = False, **ray_kwargs: Any) -> dict:
    """Connect to Ray: start a loopback-only local cluster, or join an existing one.

    Calling it again while connected does nothing and returns the same information. A local
    cluster's start is tried up to :data:`START_TRIES` times when it times out (a loaded
    machine) or another cluster takes a port meanwhile; its processes stop with
    :func:`shutdown`, at exit, or (through a watchdog process) when this process is killed.

    Parameters
    ----------
    address : str, optional
        None starts a local single-node cluster bound to 127.0.0.1. ``'auto'`` (or a
        ``host:port``) joins a running cluster, e.g. inside ``ray submit``.
    num_cpus, num_gpus : int, optional
        Resources of the local cluster (default: what the machine has). Ignored when
        joining.
    multi_node : bool, default False
        Start the local cluster as a :class:`LocalCluster` (its head has these resources),
        so that raylets can be added and removed later (see :func:`local_cluster`). It stops
        with :func:`shutdown`, or when the process exits.
    **ray_kwargs
        Passed to ``ray.init``. A local cluster runs Ray's dashboard on 127.0.0.1 (port
        8265, or the next free one; ``dashboard_port`` asks for another, taken only while
        free), which serves the dashboard, the State API (``ray list actors``) and the
        metrics view; ``include_dashboard=False`` (or the environment's
        ``RAYMOD_DASHBOARD=0``) leaves it out (its processes hold about 1 GB of resident
        memory).

    Returns
    -------
    dict
        ``address`` (the GCS address), ``resources`` (the cluster's total resources),
        ``local`` (whether this call's cluster is the loopback one), ``dashboard_url``
        (None without a dashboard) and ``metrics_export_port`` (where this node serves
        Prometheus metrics, raymod's ``raymod_*`` figures included).

    Raises
    ------
    ClusterStartError
        When the local cluster did not start (one line: what failed and what to do).

    Examples
    --------
    >>> info = rm.cluster.init(num_cpus=4)
    >>> mod = rm.mod.Module(net, workers=2)
    """
    local = address is None
    if multi_node and not local:
        raise ValueError(f"init(multi_node=True) starts a local cluster: it takes no address, "
                         f"got address={address!r}")
    if local or _joins_loopback(address):
        _use_loopback()
    import ray
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
        kwargs.update(ray_kwargs)
        _started_here["local"] = local
        if local:
            _start_watchdog()
        if multi_node:
            cluster = LocalCluster(num_cpus=num_cpus, num_gpus=num_gpus,
                                   include_dashboard=kwargs.pop("include_dashboard", None),
                                   dashboard_port=kwargs.pop("dashboard_port", None))
            try:
                ray.init(address=cluster.address, **kwargs)
            except BaseException as err:
                ray.shutdown()
                cluster.shutdown()
                if isinstance(err, Exception) and not isinstance(err, (TypeError, ValueError)) \
                        and _transient(err, []):
                    raise ClusterStartError(f"this process could not connect to it: "
                                            f"{_cause(err, [], START_WAIT_S)}", 1) from err
                raise
            _cluster["multi_node"] = cluster
            if not _cluster["exit_hook"]:
                # registered after Ray's own exit hook (ray.init's), so it runs first: left
                # to Ray's, a script that fitted on workers and ran to its end exited with
                # status 1
                atexit.register(shutdown)
                _cluster["exit_hook"] = True
        elif local:
            # the dashboard (and the State API behind `ray list actors`) on loopback only
            include = kwargs.pop("include_dashboard", None)
            kwargs["include_dashboard"] = _dashboard_wanted() if include is None else include
            kwargs.setdefault("dashboard_host", _LOOPBACK)
            asked = kwargs.pop("dashboard_port", None)
            kwargs["_system_config"] = _with_worker_niceness(kwargs.get("_system_config"))

            def start_once(attempt: int, wait_s: float) -> None:
                # Ray's dashboard binds the port itself (8265, else the next free one of
                # 50): nothing is probed here and bound there later. A port asked for is
                # tried once; another try lets Ray choose.
                port = asked if attempt == 0 else None
                try:
                    # address="local": always a new cluster, never one `ray start` left
                    ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus,
                             _node_ip_address=_LOOPBACK, dashboard_port=port, **kwargs)
                except BaseException:
                    ray.shutdown()
                    raise

            _retry_start(start_once, new_session=True)
        else:
            ray.init(address=address, **kwargs)
        _LOG.info("Ray %s cluster at %s", "local" if local else "joined",
                  ray.get_runtime_context().gcs_address)
    return {"address": ray.get_runtime_context().gcs_address,
            "resources": ray.cluster_resources(), "local": local,
            "dashboard_url": _dashboard_url(), "metrics_export_port": _metrics_port()}


def _with_worker_niceness(config: dict | None) -> dict:
    """``config`` (a cluster's ``_system_config``) with :data:`WORKER_NICENESS` unless it, or
    the environment's ``RAY_worker_niceness``, sets the workers' niceness already."""
    config = dict(config or {})
    if "RAY_worker_niceness" not in os.environ:
        config.setdefault("worker_niceness", WORKER_NICENESS)
    return config


def _dashboard_wanted() -> bool:
    """Whether a local cluster runs Ray's dashboard when not told: yes, unless the
    environment says ``RAYMOD_DASHBOARD=0`` (a job's ``--no-dashboard``)."""
    return os.environ.get("RAYMOD_DASHBOARD", "1").strip().lower() not in (
        "0", "false", "no", "off")


# ---- start-up: tries, waits, the one-line error ---------------------------------------------
#: words of an error that another try may cure: a port lost to a neighbour, a wait run out
_TRANSIENT_SIGNS = ("address already in use", "already occupied", "valid port", "failed to bind",
                    "errno 98", "timed out", "timeout", "deadline exceeded", "failed to start",
                    "failed to connect", "failed to get node info", "unavailable")
#: words of an error that no other try cures
_PERMANENT_SIGNS = ("missing packages", "dependencies failed", "permission denied",
                    "no space left")
#: Ray's functions that start a part of a cluster, and the part's name for the one-line error
_PARTS = (("start_api_server", "the dashboard"), ("start_gcs_server", "the GCS"),
          ("_wait_for_node", "a node"), ("start_raylet", "a raylet"),
          ("start_ray_processes", "a node"), ("start_head_processes", "the head"))


def _retry_start(start: Callable[[int, float], _T], tries: int | None = None,
                 new_session: bool = False) -> _T:
    """Run ``start(attempt, wait_s)`` until it returns, at most ``tries`` times.

    A try that fails for a cause another try may cure (a timeout, a port lost to another
    cluster, the dashboard not coming up) is followed by one with longer waits, after a
    pause; the processes the failed try left running are killed first. Ray's complaints
    during a try (20 lines of a dashboard log) are held back: logged at DEBUG if the try
    failed, passed on if it succeeded.

    Parameters
    ----------
    start : callable
        One try: ``attempt`` counts from 0, ``wait_s`` is how long it may wait for each
        part (the dashboard's, the GCS's and the nodes' waits are set to it meanwhile).
        It undoes what it can of itself when it fails (``ray.shutdown()``).
    tries : int, optional
        Default :data:`START_TRIES`.
    new_session : bool
        Whether each try starts a cluster of its own (a Ray session): then everything of a
        failed try's session is killed; else only the Ray processes this process started
        during the try, with their children.

    Raises
    ------
    ClusterStartError
        After the last try, or at the first that failed for a cause no try cures: one
        line, chained to Ray's error. A ``TypeError`` or ``ValueError`` (an argument Ray
        refuses) is raised as it is.
    """
    tries = START_TRIES if tries is None else tries
    for attempt in range(tries):
        wait_s = START_WAIT_S * (attempt + 1)
        before = _before_try()
        held: list[logging.LogRecord] = []
        try:
            with _held_ray_logs(held), _start_waits(wait_s):
                result = start(attempt, wait_s)
        except Exception as err:  # noqa: BLE001 - classified below, re-raised as one line
            stopped = _stop_failed_try(before, new_session)
            for record in held:
                _LOG.debug("Ray, during the failed start: %s", record.getMessage())
            if isinstance(err, (TypeError, AssertionError)) or (
                    isinstance(err, ValueError) and not _transient(err, held)):
                raise  # a caller's mistake (an argument Ray refuses), not a failed start
            cause = _cause(err, held, wait_s)
            if not _transient(err, held):
                raise ClusterStartError(cause, attempt + 1) from err
            if attempt + 1 == tries:
                raise ClusterStartError(cause, tries) from err
            pause = START_BACKOFF_S * (attempt + 1) * (1 + random.random())
            _LOG.warning("local Ray cluster: try %d of %d failed (%s; %d of its processes "
                         "stopped); trying again in %.1f s, waiting up to %.0f s", attempt + 1,
                         tries, cause, stopped, pause, START_WAIT_S * (attempt + 2))
            time.sleep(pause)
        else:
            for record in held:  # a try that worked: Ray's warnings are worth seeing
                logging.getLogger(record.name).handle(record)
            if attempt:
                _LOG.warning("local Ray cluster started at try %d of %d", attempt + 1, tries)
            return result
    raise AssertionError("unreachable")  # the loop returns or raises


def _transient(err: BaseException, held: list[logging.LogRecord]) -> bool:
    """Whether another try may cure ``err``: a timeout, a lost port, the dashboard (whose
    error is the tail of its log, whatever went wrong) or a GCS that did not come up."""
    text = _error_text(err).lower()
    if any(sign in text for sign in _PERMANENT_SIGNS):
        return False
    if isinstance(err, (TimeoutError, ConnectionError)) or any(
            sign in text for sign in _TRANSIENT_SIGNS):
        return True
    return _failed_part(err) in ("the dashboard", "the GCS") or any(
        "failed to start the dashboard" in r.getMessage().lower() for r in held)


def _error_text(err: BaseException) -> str:
    """``err`` and the errors it was raised from, as text."""
    parts, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        parts.append(f"{type(err).__name__}: {err}")
        err = err.__cause__ or err.__context__
    return "\n".join(parts)


def _failed_part(err: BaseException) -> str | None:
    """Which part of the cluster was starting when ``err`` was raised (from its traceback)."""
    names = []
    tb = err.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    for function, part in _PARTS:
        if function in names:
            return part
    return None


def _cause(err: BaseException, held: list[logging.LogRecord], wait_s: float) -> str:
    """One line: which part failed, and the line of Ray's error that says why (Ray's error
    may be the 20 last lines of the dashboard's log, which then names the log)."""
    text = _error_text(err)
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    lines = [line[len("Exception: "):] if line.startswith("Exception: ") else line
             for line in lines]  # Ray raises bare Exceptions: the name says nothing
    why = None
    for sign in ("address already in use", "valid port", "already occupied", "timed out",
                 "timeout", "error", "failed"):
        why = next((line for line in lines if sign in line.lower()
                    and not line.startswith("The last ")), None)  # Ray's header of the log
        if why:
            break
    log = re.search(r"(/\S+/logs/dashboard\.(?:log|err))", text)
    if why is None:
        why = f"see {log.group(1)}" if log else (lines[0] if lines else type(err).__name__)
    if len(why) > 200:
        why = why[:197] + "..."
    part = _failed_part(err)
    if part == "the dashboard" or any("failed to start the dashboard" in r.getMessage().lower()
                                      for r in held):
        return f"Ray's dashboard did not start within {wait_s:.0f} s ({why})"
    return f"{part} did not start within {wait_s:.0f} s ({why})" if part else why


@contextlib.contextmanager
def _held_ray_logs(held: list[logging.LogRecord]) -> Iterator[None]:
    """Hold back the warnings and errors Ray's start-up code logs, into ``held``."""

    class Hold(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            if record.levelno >= logging.WARNING:
                held.append(record)
                return False
            return True

    hold = Hold()
    loggers = [logging.getLogger(name) for name in (
        "ray._private.services", "ray._private.node", "ray.cluster_utils",
        "ray._private.worker")]
    for logger in loggers:
        logger.addFilter(hold)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(hold)


@contextlib.contextmanager
def _start_waits(wait_s: float) -> Iterator[None]:
    """Let Ray wait ``wait_s`` seconds for the dashboard and the GCS to come up (its own
    waits, 60 and 30 s, ran out on a machine at load 40). A wait set in the environment
    (``RAY_gcs_server_port_wait_time_s``) is left alone."""
    from ray._private import ray_constants
    dashboard = ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S
    ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S = max(dashboard, int(wait_s))
    gcs_var = "RAY_gcs_server_port_wait_time_s"
    set_gcs = gcs_var not in os.environ
    if set_gcs:
        os.environ[gcs_var] = str(int(wait_s))
    try:
        yield
    finally:
        ray_constants.RAY_DASHBOARD_STARTUP_TIMEOUT_S = dashboard
        if set_gcs:
            os.environ.pop(gcs_var, None)


def _stop_failed_try(before: tuple[dict, dict], new_session: bool) -> int:
    """Kill what a failed try left running; returns how many processes.

    ``before`` is :func:`_before_try`'s picture. Killed: the Ray processes this process
    started during the try (found by name or command line: one still importing Python has
    no session file open yet, and would start the dashboard's modules later), with all
    below them; with ``new_session`` also every Ray process of a session nobody held before
    the try (its orphans included).
    """
    ray_dir = _ray_dir()
    if ray_dir is None or not os.path.isdir("/proc"):
        return 0
    ray_before, children_before = before
    old_sessions = set().union(*(held for _, _, held in ray_before.values()))
    me, marker = os.getpid(), ray_dir.encode()
    watchdog = getattr(_watchdog["process"], "pid", None)  # its command line names Ray too

    def is_ray(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                comm = f.read().strip()
            if comm.startswith(b"ray") or comm == b"gcs_server":
                return True
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return marker in f.read()
        except OSError:
            return False

    def chosen(found: dict) -> dict:
        picked = {pid: (start, parent, frozenset())
                  for pid, (parent, start) in _process_table().items()
                  if parent == me and children_before.get(pid) != start and pid != watchdog
                  and is_ray(pid)}
        if new_session:
            picked.update({pid: info for pid, info in found.items()
                           if ray_before.get(pid, (None,))[0] != info[0]
                           and not info[2] & old_sessions})
        return picked

    return _sweep(me, ray_dir, chosen, rounds=20, pause=0.2)


def _before_try() -> tuple[dict, dict]:
    """What runs before a try: this process's Ray processes and its children (pid -> start)."""
    if not os.path.isdir("/proc"):
        return {}, {}
    me = os.getpid()
    return _ray_processes_here(), {pid: start for pid, (parent, start)
                                   in _process_table().items() if parent == me}


# ---- fate-sharing: Ray's processes die with the process that started them ---------------------
# The functions below up to _watch_driver use the standard library only, imported inside:
# the watchdog process runs their source (python -I -S), without raymod, numpy or Ray.
def _ray_processes(owner_pid: int, ray_dir: str) -> dict[int, tuple[int, int, frozenset]]:
    """Ray's processes on this machine that hold files of a Ray session that process
    ``owner_pid`` started (a session directory ``.../session_<date>_<owner_pid>``).

    Ray's processes are told by their name (``ray::...``, ``raylet``, ``gcs_server``,
    ``ray-dashboard-...``) or a command line that runs a file of ``ray_dir`` (Ray's package
    directory); a user's ``tail -f`` of a session's logs is neither. Every process of a Ray
    node holds its log files open, even once its parent died and init adopted it.

    Returns
    -------
    dict
        pid -> (start time in clock ticks, parent pid, the session directories it holds).
    """
    import os
    import re
    session = re.compile(r"^(.*/session_[^/]+_%d)(?:/|$)" % owner_pid)
    marker, me, found = ray_dir.encode(), os.getpid(), {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        proc = "/proc/" + name
        try:
            with open(proc + "/comm", "rb") as f:
                comm = f.read().strip()
            if not (comm.startswith(b"ray") or comm == b"gcs_server"):
                with open(proc + "/cmdline", "rb") as f:
                    if marker not in f.read():
                        continue
            held = set()
            for fd in os.listdir(proc + "/fd"):
                try:
                    match = session.match(os.readlink(proc + "/fd/" + fd))
                except OSError:
                    continue
                if match:
                    held.add(match.group(1))
            if held:
                with open(proc + "/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                found[int(name)] = (int(fields[19]), int(fields[1]), frozenset(held))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def _kill_processes(targets: dict) -> list[int]:
    """SIGKILL each pid of ``targets`` (from :func:`_ray_processes`) that is still the process
    found (same start time: a pid may be reused); returns the pids signalled."""
    import os
    import signal
    killed = []
    for pid, info in targets.items():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[19]) != info[0]:
                    continue
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (OSError, IndexError, ValueError):
            continue
    return killed


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time in clock ticks) of every process (read from /proc)."""
    import os
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[int(name)] = (int(fields[1]), int(fields[19]))
        except (OSError, IndexError, ValueError):
            continue
    return table


def _sweep(owner_pid: int, ray_dir: str, choose: Any = None, rounds: int = 40,
           pause: float = 0.25, quiet: int = 2) -> int:
    """Kill Ray's processes of the sessions process ``owner_pid`` started (those that
    ``choose`` picks, if given: a function of :func:`_ray_processes`' dict returning part of
    it), with every process below them, until ``quiet`` rounds in a row find none (a
    dashboard's forkserver may fork a module a moment later); at most ``rounds`` rounds.
    Returns how many processes were killed."""
    import os
    import time
    killed: set = set()
    calm = 0
    for _ in range(rounds):
        found = _ray_processes(owner_pid, ray_dir)
        targets = dict(choose(found) if choose is not None else found)
        if targets:
            calm = 0
            # and what they started (the dashboard's forkserver, a worker's subprocess),
            # taken now: once its parent is killed, init adopts it and the link is lost
            table, grew = _process_table(), True
            while grew:
                grew = False
                for pid, (parent, start) in table.items():
                    if parent in targets and pid not in targets:
                        targets[pid], grew = (start, parent, frozenset()), True
            targets.pop(os.getpid(), None)  # never the caller itself (a job's driver)
            killed.update(_kill_processes(targets))
        else:
            calm += 1
            if calm >= quiet:
                break
        time.sleep(pause)
    return len(killed)


def _watch_driver(driver_pid: int, ray_dir: str) -> None:
    """The watchdog's body: wait until process ``driver_pid`` (its parent) is gone, then kill
    the Ray processes of every session it started, and end.

    It waits on a pidfd (Linux >= 5.3: woken the moment the driver dies, no polling), else it
    checks twice a second whether init (or a subreaper) has adopted it.
    """
    import os
    import select
    import time
    try:
        handle = os.pidfd_open(driver_pid)
    except (AttributeError, OSError):
        handle = None
    if handle is not None and os.getppid() == driver_pid:
        select.select([handle], [], [])
    else:
        while os.getppid() == driver_pid:
            time.sleep(0.5)
    _sweep(driver_pid, ray_dir)


_watchdog: dict[str, Any] = {"process": None, "for": None}


def _start_watchdog() -> None:
    """Start this process's watchdog (one per process, for all its local clusters), which
    kills the clusters' processes once this process is gone, however it ended.

    Why not Ray's own fate-sharing: it sets PR_SET_PDEATHSIG on the processes it starts
    itself (GCS, raylets, dashboard), but the agents a raylet starts outlive it by a minute
    or more (they report the raylet's death to the dead GCS first). Measured: 4 to 12 Ray
    processes left after SIGKILL of a driver with a two-node cluster, none with the watchdog.
    """
    process = _watchdog["process"]
    if (not sys.platform.startswith("linux") or _watchdog["for"] == os.getpid()
            and process is not None and process.poll() is None):
        return
    ray_dir = _ray_dir()
    try:
        source = "\n\n".join(inspect.getsource(f) for f in (
            _ray_processes, _kill_processes, _process_table, _sweep, _watch_driver))
        source = source.replace("choose: Any", "choose")  # no typing in there
        code = (f"from __future__ import annotations\n{source}\n"
                f"_watch_driver({os.getpid()}, {ray_dir!r})\n")
        # its own session: a Ctrl-C meant for the driver must not end it first; no pipes of
        # ours, or a caller reading the driver's output to its end would wait for it too
        _watchdog["process"] = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", code], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
            start_new_session=True)
        _watchdog["for"] = os.getpid()
    except (OSError, TypeError, ValueError) as err:
        _LOG.warning("no watchdog for the local Ray cluster (%s): if this process is killed, "
                     "Ray processes may be left running", err)


def _ray_dir() -> str | None:
    """Ray's package directory (what the command lines of its Python processes name)."""
    try:
        import ray
    except ImportError:
        return None
    return os.path.dirname(os.path.realpath(ray.__file__))


def _ray_processes_here() -> dict:
    """:func:`_ray_processes` of the sessions this process started ({} off Linux)."""
    ray_dir = _ray_dir()
    if ray_dir is None or not os.path.isdir("/proc"):
        return {}
    return _ray_processes(os.getpid(), ray_dir)


def _sweep_session(session_dir: str | None) -> int:
    """Kill what is left of a session this process started and has just stopped (Ray's stop
    waits for the processes it started, not for those its raylets started)."""
    ray_dir = _ray_dir()
    if not session_dir or ray_dir is None or not os.path.isdir("/proc"):
        return 0
    session = os.path.realpath(session_dir)
    left = _sweep(os.getpid(), ray_dir, lambda found: {
        pid: info for pid, info in found.items() if session in info[2]}, rounds=20, pause=0.2)
    if left:
        _LOG.debug("stopped %d Ray processes left by session %s", left, session_dir)
    return left


def _kill_tree_left(before: dict[int, int]) -> int:
    """SIGKILL the processes of ``before`` (pid -> start time) still running."""
    if not before:
        return 0
    return len(_kill_processes({pid: (start, 0, frozenset()) for pid, start in before.items()}))


def _descendants(pid: int | None) -> dict[int, int]:
    """pid -> start time of every process below ``pid`` (read from /proc; {} elsewhere)."""
    if pid is None or not os.path.isdir("/proc"):
        return {}
    table = _process_table()
    below, grew = {}, True
    while grew:
        grew = False
        for child, (parent, start) in table.items():
            if child not in below and (parent == pid or parent in below):
                below[child], grew = start, True
    return below


# ---- the connected cluster ------------------------------------------------------------------
def _dashboard_url() -> str | None:
    """``http://host:port`` of the connected cluster's dashboard, or None without one."""
    from ray._private.worker import global_worker
    url = getattr(getattr(global_worker, "node", None), "webui_url", None) or \
        getattr(global_worker, "_webui_url", None)  # noqa: SLF001
    if not url:
        return None
    return url if "://" in url else f"http://{url}"


def _metrics_port() -> int | None:
    """This node's Prometheus metrics export port (None if Ray does not say)."""
    import ray
    node_id = ray.get_runtime_context().get_node_id()
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return node.get("MetricsExportPort")
    return None


def _session_dir() -> str | None:
    """The session directory of the connected cluster (None if Ray does not say)."""
    from ray._private.worker import global_worker
    node = getattr(global_worker, "node", None)
    try:
        return node.get_session_dir_path() if node is not None else None
    except Exception:  # noqa: BLE001 - a node half torn down
        return None


def _use_loopback() -> None:
    """Keep every Ray service of this process's clusters on 127.0.0.1."""
    # Ray reads this when imported: with it off, a single-node cluster uses loopback for
    # every service (the variable's name is historical); a driver joining such a cluster
    # needs it too, or Ray swaps 127.0.0.1 for the machine's network address
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants
    ray_constants.ENABLE_RAY_CLUSTER = False  # in case ray was imported earlier


def _joins_loopback(address: str) -> bool:
    """Whether ``address`` ('auto' included: RAY_ADDRESS, then the last ``ray start``) is a
    cluster bound to loopback, such as cluster-local.yaml's head."""
    try:
        from ray._private.services import get_ray_address_from_environment
        resolved = get_ray_address_from_environment(address, None)
    except Exception:  # noqa: BLE001 - nothing found: ray.init reports it better
        return False
    host = str(resolved).split("://")[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def is_local() -> bool:
    """Whether the connected cluster is a loopback one started by :func:`init`."""
    return _started_here["local"]


def init_for_workers(workers: Any, address: str | None = None, modules: int = 1) -> dict:
    """:func:`init` for a fit on ``workers`` (an ``rm.Workers``): a local cluster gets at
    least the CPUs that ``modules`` modules' ``workers.min_workers`` ask for, so that they
    start on a small machine (sharing its cores); ``address`` joins a running cluster as
    :func:`init` does.

    ``modules`` is how many modules on such workers may be alive at once: a script run by
    ``raymod run --workers`` may keep several (a ``SequentialModule``'s members, a module
    loaded beside the one that trained), and each holds its own workers.

    Raises
    ------
    MXNetError
        When the local cluster has fewer GPUs than ``min_workers`` need (rather than
        waiting for workers that cannot start); a cluster this call started is shut down.
    ClusterStartError
        When the local cluster did not start.
    """
    num_cpus = None
    if address is None:
        need = math.ceil(modules * workers.min_workers * workers.cpus_per_worker)
        num_cpus = max(os.cpu_count() or 1, need)
    started = not is_initialized()
    info = init(address=address, num_cpus=num_cpus)
    gpus = info["resources"].get("GPU", 0)
    if info["local"] and workers.min_workers * workers.gpus_per_worker > gpus:
        if started:
            shutdown()
        raise MXNetError(f"{workers.min_workers} workers with {workers.gpus_per_worker} "
                         f"GPU(s) each need {workers.min_workers * workers.gpus_per_worker}"
                         f" GPUs; the local Ray cluster has {gpus:g}")
    return info


def shutdown() -> None:
    """Disconnect from Ray, and stop the local cluster if this process started it (with
    every process of it, those its raylets started included)."""
    import ray
    session = None
    if ray.is_initialized():
        if _started_here["local"]:
            session = _session_dir()
        ray.shutdown()
    cluster, _cluster["multi_node"] = _cluster["multi_node"], None
    if cluster is not None:
        cluster.shutdown()  # sweeps its session itself
    else:
        _sweep_session(session)


def local_cluster() -> "LocalCluster | None":
    """The :class:`LocalCluster` that ``init(multi_node=True)`` started (None otherwise)."""
    return _cluster["multi_node"]


class LocalCluster:
    """Several Ray nodes (raylets) on this machine, every one bound to 127.0.0.1.

    A thin layer over ``ray.cluster_utils.Cluster``: the head starts at construction; nodes
    come and go with :meth:`add_node` and :meth:`remove_node`. Custom resources on a node
    place actors there (``rm.Workers(resources=...)``, ``DistKVStore(server_resources=...)``).
    The nodes share the machine's ``/dev/shm``, so workers still reach a server's shared
    memory across them; ``DistKVStore(shared_memory=False)`` makes every byte cross nodes
    through Ray's object stores, as between machines.

    Every port is bound by the process that serves it (the kernel's choice, or the
    dashboard's 8265 and the ports after it). The head's start and each :meth:`add_node` are
    tried up to ``start_tries`` times when they time out or lose a port to another cluster
    starting on the machine. The processes die with this process, even if it is SIGKILLed
    (a watchdog process kills them).

    Parameters
    ----------
    num_cpus, num_gpus : int, optional
        Resources of the head (default: the machine's CPUs and CUDA devices).
    resources : dict, optional
        Custom resources of the head.
    object_store_memory : int, default HEAD_OBJECT_STORE
        Bytes of the head's object store.
    include_dashboard : bool, optional
        Run Ray's dashboard (and the State API) on the head, bound to 127.0.0.1 (default:
        yes, unless the environment says ``RAYMOD_DASHBOARD=0``).
    dashboard_port : int, optional
        The dashboard's port, taken if free at the first try (default: 8265 or the next
        free one, which the dashboard finds itself).
    start_tries : int, default START_TRIES
        Tries of the head's start, and of each added node's.

    Raises
    ------
    ClusterStartError
        When the head did not start.

    Examples
    --------
    >>> rm.cluster.init(num_cpus=4, multi_node=True)
    >>> nodes = rm.cluster.local_cluster()
    >>> node = nodes.add_node(num_cpus=1, resources={"trainer": 1})
    >>> nodes.remove_node(node)  # its actors die, its objects are lost
    """

    def __init__(self, num_cpus: int | None = None, num_gpus: int | None = None,
                 resources: dict | None = None, object_store_memory: int = HEAD_OBJECT_STORE,
                 include_dashboard: bool | None = None, dashboard_port: int | None = None,
                 start_tries: int = START_TRIES):
        _use_loopback()
        if num_gpus is None:
            from ..context import num_gpus as visible_gpus
            try:
                num_gpus = visible_gpus()
            except Exception:  # noqa: BLE001 - no CuPy: no GPUs for the head
                num_gpus = 0
        head = self._node_args(os.cpu_count() if num_cpus is None else num_cpus, num_gpus,
                               resources, object_store_memory)
        self._head_args = {**head, "include_dashboard": _dashboard_wanted()
                           if include_dashboard is None else include_dashboard,
                           "dashboard_host": _LOOPBACK,
                           # the head's agent binds a port of the kernel's choice, not Ray's
                           # 52365, which the head of any other cluster here wants too
                           "dashboard_agent_listen_port": 0,
                           "_system_config": _with_worker_niceness(None)}
        self._dashboard_port = dashboard_port
        self.start_tries = start_tries
        self.nodes: list = []  # added nodes, oldest first
        _start_watchdog()
        self._cluster = _retry_start(self._start_head, start_tries, new_session=True)

    def _start_head(self, attempt: int, wait_s: float) -> Any:
        """One try of the head: start it, wait up to ``wait_s`` for it to register."""
        from ray.cluster_utils import Cluster
        from ray.experimental import internal_kv
        # Ray's dashboard binds its port itself (8265, else one of the 50 after it): a port
        # probed here could be taken by another cluster before Ray binds it
        port = self._dashboard_port if attempt == 0 else None
        cluster = Cluster(initialize_head=False)
        # Cluster writes the head's address to the machine's "latest cluster" file, which
        # every address='auto' on this machine then joins; ray.init() of a local cluster
        # does not, and neither may a test cluster on a shared machine
        import ray._private.utils as ray_utils
        write, ray_utils.write_ray_address = ray_utils.write_ray_address, _no_address_file
        try:
            head = cluster.add_node(wait=False, **self._head_args, dashboard_port=port)
        except BaseException:
            internal_kv._internal_kv_reset()  # the try's GCS is gone
            raise
        finally:
            ray_utils.write_ray_address = write
        try:
            cluster._wait_for_node(head, timeout=wait_s)  # noqa: SLF001
        except BaseException:
            with contextlib.suppress(Exception):
                cluster.remove_node(head, allow_graceful=False)
            internal_kv._internal_kv_reset()
            raise
        return cluster

    @staticmethod
    def _node_args(num_cpus: float, num_gpus: int, resources: dict | None,
                   object_store_memory: int) -> dict:
        for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LocalCluster: {name} must be a number >= 0, got {value!r}")
        for key, value in (resources or {}).items():
            if not isinstance(key, str) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"LocalCluster: resources must map names to amounts >= 0, "
                                 f"got {key!r}: {value!r}")
        return {"node_ip_address": _LOOPBACK, "num_cpus": num_cpus, "num_gpus": num_gpus,
                "resources": dict(resources or {}), "object_store_memory": object_store_memory}

    @property
    def address(self) -> str:
        """The head's GCS address (``127.0.0.1:port``)."""
        return self._cluster.address

    @property
    def session_dir(self) -> str | None:
        """The Ray session directory of this cluster (its logs are under it)."""
        head = self._cluster.head_node
        return head.get_session_dir_path() if head is not None else None

    def add_node(self, num_cpus: float = 1, num_gpus: int = 0, resources: dict | None = None,
                 object_store_memory: int = NODE_OBJECT_STORE) -> Any:
        """Start one more raylet on loopback and wait until the cluster sees it.

        Tried up to ``start_tries`` times when the node does not come up in time; the
        processes of a try that failed are stopped.

        Returns
        -------
        ray._private.node.Node
            The node; its ``node_id`` is what ``ray.get_runtime_context().get_node_id()``
            says inside its actors.

        Raises
        ------
        ClusterStartError
            When the node did not start.
        """
        args = self._node_args(num_cpus, num_gpus, resources, object_store_memory)

        def start_once(attempt: int, wait_s: float) -> Any:
            node = self._cluster.add_node(wait=False, **args)
            try:
                self._cluster._wait_for_node(node, timeout=wait_s)  # noqa: SLF001
            except BaseException:
                with contextlib.suppress(Exception):
                    self._cluster.remove_node(node, allow_graceful=False)
                raise
            return node

        node = _retry_start(start_once, self.start_tries)
        self.nodes.append(node)
        return node

    def remove_node(self, node: Any) -> None:
        """Stop a node added by :meth:`add_node`: its raylet, actors and object store.

        The raylet is terminated (not killed) so that it tells the cluster at once: its
        actors' callers see them dead now instead of after the health-check timeout.
        Processes the raylet started that outlive it (its agents) are killed.
        """
        if node not in self.nodes:
            raise ValueError(f"remove_node: {node!r} is not a node added to this cluster "
                             f"(the head cannot be removed)")
        below = _descendants(_raylet_pid(node))
        self._cluster.remove_node(node, allow_graceful=True)
        self.nodes.remove(node)
        _kill_tree_left(below)

    def shutdown(self) -> None:
        """Stop every node, the head last, with every process they started."""
        for node in list(self.nodes):
            self.remove_node(node)
        if self._cluster.head_node is not None:
            session = self.session_dir
            # not Cluster.shutdown: it also deletes the machine's "latest cluster" file,
            # which may name someone else's cluster
            self._cluster.remove_node(self._cluster.head_node)
            from ray.experimental import internal_kv
            internal_kv._internal_kv_reset()  # its GCS is gone
            _sweep_session(session)


def _raylet_pid(node: Any) -> int | None:
    """The pid of ``node``'s raylet (None if Ray does not say)."""
    try:
        return node.all_processes["raylet"][0].process.pid
    except (AttributeError, KeyError, IndexError, TypeError):
        return None


def _no_address_file(*args: Any, **kwargs: Any) -> None:
    """Stands in for Ray's address-file writer while a :class:`LocalCluster` starts."""
