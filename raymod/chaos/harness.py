"""Running a fault schedule on real actors and nodes, and saying how the fit ended.

:class:`Rig` owns loopback nodes of the session's multi-node cluster
(``rm.cluster.init(multi_node=True)``): :data:`WORKER_NODES` nodes of :data:`NODE_CPUS`
CPUs for workers and two zero-CPU nodes for the KVServer (one to move to). Each
:meth:`Rig.run` trains the same small MLP on ``Workers(2, 4)`` with a checkpoint every
:data:`CHECKPOINT_EVERY` steps (or, for a ``sparse`` schedule, the same MLP on csr
batches whose first layer is a row_sparse table on the KVServers), injects the schedule's faults when the driver reaches their
moments, and compares the final parameters with the same training in one process. A fit
that stops because too few workers are left must leave a checkpoint: the rig puts its
nodes back and resumes it, which must land on the trajectory too. A watchdog turns a fit
that outlives :data:`HANG_SECONDS` into a "hang" outcome, with every thread's stack.
"""
from __future__ import annotations

import _thread
import faulthandler
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import moments, waits
from ..cluster.recovery.node_drained import draining_nodes
from .schedules import Fault, Schedule

__all__ = ["Rig", "Outcome", "WORKER_NODES", "NODE_CPUS", "HANG_SECONDS"]

WORKER_NODES = 3
NODE_CPUS = 2
WORKER_RESOURCE = "chaos_worker"
SERVER_RESOURCE = "chaos_server"
#: the fit: EPOCHS x STEPS_PER_EPOCH steps of BATCH rows, a 20-32-4 MLP
EPOCHS, STEPS_PER_EPOCH, BATCH = 2, 20, 32
CHECKPOINT_EVERY = 15
#: a schedule's fit (and its resume) taking longer than this is a hang
HANG_SECONDS = 240.0
#: the relative tolerance of "on the trajectory"
TOLERANCE = 1e-5
#: seconds a missing worker is waited for before the fit stops short of workers
START_TIMEOUT = 60.0
#: at most this long a drain fault waits for the GCS to list the drained node
DRAIN_VISIBLE_SECONDS = 10.0


@dataclass
class Outcome:
    """How one schedule ended.

    Attributes
    ----------
    result : str
        ``"trajectory"``, ``"resumed"`` (stopped short of workers, then resumed from its
        checkpoint onto the trajectory), ``"off"`` (parameters off the trajectory),
        ``"hang"`` or ``"error"`` (an exception out of ``fit``: a bug).
    error : str
        The exception or the stacks of a hang.
    max_error : float
        Largest relative parameter difference to the one-process run.
    fired : list of str
        The faults that struck (a moment a fit never reaches leaves its fault out).
    recovery_s : list of float
        Per fault that struck: seconds to the next completed step (None: none came).
    seconds : float
        Wall time of the schedule.
    events : list of str
        The membership events of the fit's worker pools (``"lost"``, ``"join"``,
        ``"leave: node draining"``, ...), in order.
    """

    schedule: Schedule
    result: str = "trajectory"
    error: str = ""
    max_error: float = 0.0
    fired: list = field(default_factory=list)
    recovery_s: list = field(default_factory=list)
    seconds: float = 0.0
    events: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Ended on the trajectory, directly or through a resume."""
        return self.result in ("trajectory", "resumed")

    def row(self) -> dict:
        """A JSON-able summary."""
        return {"index": self.schedule.index, "schedule": str(self.schedule),
                "result": self.result, "max_error": self.max_error, "fired": self.fired,
                "recovery_s": self.recovery_s, "seconds": round(self.seconds, 2),
                "error": self.error.splitlines()[0][:200] if self.error else "",
                "replay": self.schedule.replay}


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS_PER_EPOCH * BATCH, 20)).astype(np.float32)
    return x, x[:, :4].argmax(axis=1).astype(np.float32)


def _sparse_data() -> tuple[Any, np.ndarray]:
    """``_data()`` with its small values dropped (about 40 % of them kept), as csr."""
    from ..sparse import cast_storage
    x, y = _data()
    return cast_storage(np.where(np.abs(x) > 0.85, x, 0).astype(np.float32), "csr"), y


def _net(sparse: bool = False) -> Any:
    import raymod as rm
    if sparse:  # fc1 as a row_sparse table read by a csr dot: lazy updates of the rows hit
        table = rm.sym.Variable("fc1_weight", shape=(20, 32), stype="row_sparse")
        h = rm.sym.broadcast_add(rm.sym.dot(rm.sym.Variable("data", stype="csr"), table),
                                 rm.sym.Variable("fc1_bias", shape=(32,)))
    else:
        h = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=32, name="fc1")
    h = rm.sym.Activation(h, act_type="relu")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(h, num_hidden=4, name="fc2"),
                                name="softmax")


def train(workers: Any = None, kvstore: Any = "local", svrg: bool = False,
          checkpoint: str | None = None, resume: bool = False, on_batch: Any = None,
          keep: list | None = None, sparse: bool = False) -> dict:
    """The schedules' fit (in one process with ``workers=None``); its final parameters
    (dense arrays). ``keep`` receives the module as soon as it exists (to close it
    whatever happens)."""
    import raymod as rm
    x, y = _sparse_data() if sparse else _data()
    rm.random.seed(1)
    if svrg:
        mod = rm.mod.SVRGModule(_net(), update_freq=2, workers=workers)
    else:
        mod = rm.mod.Module(_net(sparse), workers=workers)
    if keep is not None:
        keep.append(mod)
    config = None if checkpoint is None else rm.CheckpointConfig(
        checkpoint, every_n_steps=CHECKPOINT_EVERY, every_n_epochs=1)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=2), num_epoch=EPOCHS,
            kvstore=kvstore, optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier(), batch_end_callback=on_batch, checkpoint=config,
            resume=resume)
    return {k: np.array(v.todense() if hasattr(v, "todense") else v)
            for k, v in mod.get_params()[0].items()}


def max_relative_error(a: dict, b: dict) -> float:
    """Largest ``|a - b| / max|a|`` over the parameters (inf if the names differ)."""
    if sorted(a) != sorted(b):
        return float("inf")
    return max(float(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-3)) for k in a)


class _Injector:
    """Listens to the driver's moments and strikes each fault at its occurrence."""

    def __init__(self, rig: "Rig", schedule: Schedule):
        self.rig, self.schedule = rig, schedule
        self.counts: dict[str, int] = {}
        self.pool: Any = None
        self.kv: Any = None
        self.modules: list = []  # the fit's module(s), as train() makes them
        self.stopped: list[int] = []  # pids to SIGKILL when the schedule ends
        self.fired: list[str] = []
        self.batches = 0  # batch-end callbacks so far (one per completed step, in order)
        #: per fault that struck: (perf_counter, the first step planned after it)
        self.struck: list[tuple[float, int]] = []
        self.next_step: list[float | None] = []

    def __call__(self, name: str, context: dict) -> None:
        self.pool = context.get("pool") or self.pool
        self.counts[name] = self.counts.get(name, 0) + 1
        for fault in self.schedule.faults:
            if fault.moment == name and fault.occurrence == self.counts[name]:
                if self._strike(fault, context):
                    self.fired.append(str(fault))
                    self.struck.append((time.perf_counter(), self._planned()))
                    self.next_step.append(None)

    def _planned(self) -> int:
        """Steps planned so far: a step with this index or later was computed after now
        (run-ahead steps already planned may have completed before the fault)."""
        group = getattr(self.modules[-1], "_exec_group", None) if self.modules else None
        state = getattr(group, "state", None)
        return self.batches if state is None else max(self.batches, state.step)

    def batch_end(self, param: Any) -> None:
        """Step ``self.batches`` completed: it ends the recovery of the faults struck
        before it was planned; then the ``batch_end`` moment."""
        now, step = time.perf_counter(), self.batches
        self.batches += 1
        self.next_step = [now - t if s is None and step >= first else s
                          for (t, first), s in zip(self.struck, self.next_step)]
        self("batch_end", {"pool": getattr(param.locals.get("self"), "pool", None)})

    def _strike(self, fault: Fault, context: dict) -> bool:
        pool = context.get("pool") or self.pool
        if fault.kind == "start_fail":
            handle = context.get("handle")
            if handle is None:
                return False
            import ray
            ray.kill(handle, no_restart=True)
            return True
        if fault.kind in ("server_kill", "server_node"):
            return self._strike_server(fault)
        if pool is None or not pool.workers:
            return False
        # the pool lists a worker until it notices the loss: one already gone (its process
        # or node struck by an earlier fault) passes the fault on to the next live one. In
        # join order: pick 0 is the longest-serving worker, past its first steps once a
        # batch ended (ranks are given at start, and on a loaded machine rank 0 may join
        # last: stopped in its first window, it has the first-step deadline, 60 s)
        ranks = list(pool.workers)
        for k in range(len(ranks)):
            rank = ranks[(fault.pick + k) % len(ranks)]
            if self._strike_worker(fault.kind, pool.info.get(rank, {})):
                return True
        return False

    def _strike_worker(self, kind: str, info: dict) -> bool:
        """Strike the worker ``info`` describes (its pid and node); False if it is gone."""
        if kind == "worker_node":
            return self.rig.remove_node(info.get("node"))
        if kind == "node_drain":
            return self.rig.drain_node(info.get("node"))
        sig = signal.SIGSTOP if kind == "worker_stop" else signal.SIGKILL
        try:
            os.kill(info["pid"], sig)
        except (KeyError, ProcessLookupError):
            return False
        if sig == signal.SIGSTOP:
            self.stopped.append(info["pid"])
        return True

    def _strike_server(self, fault: Fault) -> bool:
        if self.kv is None or not self.kv.servers:
            return False
        server = self.kv.servers[0]
        try:
            pid, node = waits.get(server.__ray_call__.remote(_where), 10, "server pid")
        except Exception:  # noqa: BLE001 - dead or busy already: nothing to strike
            return False
        if fault.kind == "server_node":
            return self.rig.remove_node(node)
        os.kill(pid, signal.SIGKILL)
        return True

    def cleanup(self) -> None:
        for pid in self.stopped:  # never leave a stopped process behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _where(_actor: Any) -> tuple[int, str]:
    import ray
    return os.getpid(), ray.get_runtime_context().get_node_id()


class Rig:
    """Nodes for fault schedules on the session's loopback multi-node cluster.

    Examples
    --------
    >>> rm.cluster.init(num_cpus=4, multi_node=True)
    >>> rig = Rig()
    >>> outcome = rig.run(Schedule((Fault("batch_end", 1, "worker_node"),)))
    >>> outcome.result
    'trajectory'
    """

    def __init__(self) -> None:
        from ..cluster import local_cluster
        self.cluster = local_cluster()
        if self.cluster is None:
            raise RuntimeError("Rig needs rm.cluster.init(multi_node=True) first (a "
                               "LocalCluster whose nodes it can add and remove)")
        self.worker_nodes: list = []
        self.server_nodes: list = []
        self.drained: set = set()  # node ids drained: replaced before the next schedule
        self._references: dict[tuple, dict] = {}

    def reference(self, svrg: bool = False, sparse: bool = False) -> dict:
        """The parameters of the failure-free fit in one process."""
        if (svrg, sparse) not in self._references:
            self._references[svrg, sparse] = train(svrg=svrg, sparse=sparse)
        return self._references[svrg, sparse]

    def prepare(self) -> None:
        """Put back the nodes the last schedule removed."""
        for node in [n for n in self.worker_nodes if n.node_id in self.drained]:
            self.remove_node(node.node_id)
        self.drained.clear()
        alive = {n["NodeID"] for n in _nodes() if n["Alive"]}
        self.worker_nodes = [n for n in self.worker_nodes if n.node_id in alive]
        self.server_nodes = [n for n in self.server_nodes if n.node_id in alive]
        while len(self.worker_nodes) < WORKER_NODES:
            self.worker_nodes.append(self.cluster.add_node(
                num_cpus=NODE_CPUS, resources={WORKER_RESOURCE: NODE_CPUS}))
        while len(self.server_nodes) < 2:
            self.server_nodes.append(self.cluster.add_node(
                num_cpus=0, resources={SERVER_RESOURCE: 1}))

    def remove_node(self, node_id: str | None) -> bool:
        """Remove the rig's node ``node_id`` (its raylet and processes killed). A server
        node is replaced at once, as a cluster's autoscaler would: a KVServer must find a
        place again (a lost worker node is not: the fit goes on with fewer workers, or stops
        below ``min_workers`` and resumes later)."""
        for nodes in (self.worker_nodes, self.server_nodes):
            for node in nodes:
                if node.node_id == node_id:
                    nodes.remove(node)
                    self.cluster.remove_node(node)
                    if nodes is self.server_nodes:
                        self.server_nodes.append(self.cluster.add_node(
                            num_cpus=0, resources={SERVER_RESOURCE: 1}))
                    return True
        return False

    def drain_node(self, node_id: str | None) -> bool:
        """Ask Ray's GCS to drain the rig's worker node ``node_id`` (a preemption notice
        with a minute's deadline, as ``ray drain-node`` or a cloud's spot notice gives)."""
        if node_id not in {n.node_id for n in self.worker_nodes}:
            return False
        import ray
        from ray.core.generated import autoscaler_pb2
        gcs = ray._raylet.GcsClient(address=self.cluster.address)
        accepted, _ = gcs.drain_node(
            node_id, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
            "raymod.chaos", int(time.time() * 1000) + 60_000)
        if not accepted:
            return False
        self.drained.add(node_id)
        # the fault has struck once the pool can see it: the GCS lists a drain a moment after
        # accepting it, and a short fit could end in between (a drain that never shows)
        deadline = time.monotonic() + DRAIN_VISIBLE_SECONDS
        while node_id not in draining_nodes(ray) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def close(self) -> None:
        """Remove every node of the rig."""
        for node in self.worker_nodes + self.server_nodes:
            if node in self.cluster.nodes:
                self.cluster.remove_node(node)
        self.worker_nodes, self.server_nodes = [], []

    def run(self, schedule: Schedule) -> Outcome:
        """Train under ``schedule`` and say how it ended (see :class:`Outcome`)."""
        import raymod as rm
        from ..cluster.pool import WorkersUnavailable
        from ..kvstore.dist import DistKVStore
        reference = self.reference(schedule.svrg, schedule.sparse)
        self.prepare()
        outcome, t0 = Outcome(schedule), time.perf_counter()
        injector = _Injector(self, schedule)
        workers = rm.Workers(2, 4, resources={WORKER_RESOURCE: 1}, spares=schedule.spares,
                             run_ahead=schedule.run_ahead, start_timeout=START_TIMEOUT)
        stores: list = []
        watchdog = _Watchdog(HANG_SECONDS)
        from ..cluster.recovery import node_drained
        drain_check, node_drained.DRAIN_CHECK_SECONDS = node_drained.DRAIN_CHECK_SECONDS, 0.2
        with tempfile.TemporaryDirectory(prefix="raymod-chaos-") as folder:
            previous = moments.listen(injector)
            try:
                with watchdog:
                    stores.append(DistKVStore("dist_sync",
                                              server_resources={SERVER_RESOURCE: 1}))
                    injector.kv = stores[-1]
                    try:
                        got = train(workers, stores[-1], schedule.svrg, folder,
                                    on_batch=injector.batch_end, keep=injector.modules,
                                    sparse=schedule.sparse)
                    except WorkersUnavailable as err:
                        # too few workers: it says which checkpoint resumes (the last step's,
                        # else an older one), and resuming must land on the trajectory
                        if "resume=True" not in str(err):
                            raise
                        outcome.result, outcome.error = "stopped", str(err)
                        moments.listen(previous)  # the resume runs without faults
                        self.prepare()
                        stores.append(DistKVStore("dist_sync",
                                                  server_resources={SERVER_RESOURCE: 1}))
                        got = train(workers, stores[-1], schedule.svrg, folder,
                                    resume=True, keep=injector.modules,
                                    sparse=schedule.sparse)
                    outcome.events = _events(injector.modules)
                    for mod in injector.modules:  # close (a moment too) while faults may strike
                        mod.close()
                outcome.max_error = max_relative_error(reference, got)
                if outcome.max_error > TOLERANCE:
                    outcome.result = "off"
                elif outcome.result == "stopped":
                    outcome.result, outcome.error = "resumed", ""
            except KeyboardInterrupt:
                if not watchdog.fired:
                    raise
                outcome.result, outcome.error = "hang", watchdog.stacks
            except Exception as err:  # noqa: BLE001 - the outcome reports it
                import traceback
                outcome.result = "error"
                outcome.error = "".join(traceback.format_exception(err))
            finally:
                node_drained.DRAIN_CHECK_SECONDS = drain_check  # (the fits are seconds long)
                moments.listen(previous)
                injector.cleanup()
                for mod in injector.modules:
                    _quietly(mod.close)
                for kv in stores:
                    _quietly(kv.close)
        outcome.fired = injector.fired
        outcome.recovery_s = [None if s is None else round(s, 3) for s in injector.next_step]
        outcome.seconds = time.perf_counter() - t0
        return outcome


def _events(modules: list) -> list[str]:
    """The membership events of the modules' pools, as ``"kind"`` or ``"kind: reason"``."""
    return [e["event"] + (f": {e['reason']}" if "reason" in e else "")
            for mod in modules if getattr(mod, "pool", None) is not None
            for e in mod.pool.events]


def _nodes() -> list:
    import ray
    return ray.nodes()


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - clean-up after a failed schedule
        pass


class _Watchdog:
    """Interrupts the main thread (a KeyboardInterrupt) once ``seconds`` pass, keeping
    every thread's stack from that moment."""

    def __init__(self, seconds: float):
        self.seconds, self.fired, self.stacks = seconds, False, ""
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        self.fired = True
        with tempfile.TemporaryFile("w+") as out:
            faulthandler.dump_traceback(out, all_threads=True)
            out.seek(0)
            self.stacks = f"no end after {self.seconds:.0f} s\n" + out.read()
        _thread.interrupt_main()

    def __enter__(self) -> "_Watchdog":
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()

