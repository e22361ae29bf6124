"""Starting or joining the Ray cluster raymod runs on.

``init()`` with no address starts a single-node cluster bound to loopback only (nothing
listens on the machine's network address), which is what tests and laptop runs want.
``init(address='auto')`` joins the cluster of ``ray submit`` / ``ray job submit``.
``init(multi_node=True)`` starts a :class:`LocalCluster` instead: the same loopback head, to
which :meth:`LocalCluster.add_node` adds more raylets on this machine (tests of placement and
node loss), each with its own CPUs, custom resources and object store.
"""
from __future__ import annotations

import atexit
import logging
import math
import os
import socket
from typing import Any

from ..base import MXNetError

__all__ = ["init", "shutdown", "is_initialized", "LocalCluster", "local_cluster"]

_LOG = logging.getLogger(__name__)
_LOOPBACK = "127.0.0.1"
_started_here = {"local": True}  # whether init() started the cluster (vs joined one)
#: init(multi_node=True)'s cluster, and whether its exit hook is registered
_cluster: dict[str, Any] = {"multi_node": None, "exit_hook": False}
#: object store of the head and of each added node (bytes); pages are used only when filled
HEAD_OBJECT_STORE = 2 << 30
NODE_OBJECT_STORE = 100 << 20


def is_initialized() -> bool:
    """Whether this process is connected to a Ray cluster."""
    import ray
    return ray.is_initialized()


def init(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None,
         multi_node: bool = False, **ray_kwargs: Any) -> dict:
    """Connect to Ray: start a loopback-only local cluster, or join an existing one.

    Calling it again while connected does nothing and returns the same information.

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
        8265 unless ``dashboard_port`` says otherwise), which serves the dashboard, the
        State API (``ray list actors``) and the metrics view; ``include_dashboard=False``
        leaves it out (its processes hold about 1 GB of resident memory).

    Returns
    -------
    dict
        ``address`` (the GCS address), ``resources`` (the cluster's total resources),
        ``local`` (whether this call's cluster is the loopback one), ``dashboard_url``
        (None without a dashboard) and ``metrics_export_port`` (where this node serves
        Prometheus metrics, raymod's ``raymod_*`` figures included).

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
        if multi_node:
            cluster = LocalCluster(num_cpus=num_cpus, num_gpus=num_gpus,
                                   include_dashboard=kwargs.pop("include_dashboard", True),
                                   dashboard_port=kwargs.pop("dashboard_port", None))
            try:
                ray.init(address=cluster.address, **kwargs)
            except BaseException:
                cluster.shutdown()
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
            kwargs.setdefault("include_dashboard", True)
            kwargs.setdefault("dashboard_host", _LOOPBACK)
            chosen = "dashboard_port" not in kwargs
            kwargs.setdefault("dashboard_port", _dashboard_port())
            for attempt in range(DASHBOARD_TRIES):
                try:
                    # address="local": always a new cluster, never one `ray start` left
                    ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus,
                             _node_ip_address=_LOOPBACK, **kwargs)
                    break
                except Exception as err:
                    # another cluster starting on this machine took the free port first
                    port = kwargs["dashboard_port"]
                    if not chosen or attempt + 1 == DASHBOARD_TRIES or not (
                            "valid port for dashboard" in str(err) or f":{port} " in str(err)):
                        raise
                    ray.shutdown()
                    kwargs["dashboard_port"] = _dashboard_port(0)
        else:
            ray.init(address=address, **kwargs)
        _LOG.info("Ray %s cluster at %s", "local" if local else "joined",
                  ray.get_runtime_context().gcs_address)
    return {"address": ray.get_runtime_context().gcs_address,
            "resources": ray.cluster_resources(), "local": local,
            "dashboard_url": _dashboard_url(), "metrics_export_port": _metrics_port()}


#: Ray's dashboard port, used when free
DASHBOARD_PORT = 8265
#: starts of a local cluster when the dashboard's port is taken meanwhile (then another one)
DASHBOARD_TRIES = 3


def _dashboard_port(preferred: int = DASHBOARD_PORT) -> int:
    """``preferred`` (Ray's usual dashboard port), or a free loopback port when another
    cluster on this machine (another user's session, a test run) holds it: Ray would refuse
    to start."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((_LOOPBACK, port))
            except OSError:
                continue
            return probe.getsockname()[1]
    return DASHBOARD_PORT


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
    """Disconnect from Ray (and stop the local cluster if this process started it)."""
    import ray
    if ray.is_initialized():
        ray.shutdown()
    cluster, _cluster["multi_node"] = _cluster["multi_node"], None
    if cluster is not None:
        cluster.shutdown()


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

    Parameters
    ----------
    num_cpus, num_gpus : int, optional
        Resources of the head (default: the machine's CPUs and CUDA devices).
    resources : dict, optional
        Custom resources of the head.
    object_store_memory : int, default HEAD_OBJECT_STORE
        Bytes of the head's object store.
    include_dashboard : bool, default True
        Run Ray's dashboard (and the State API) on the head, bound to 127.0.0.1.
    dashboard_port : int, optional
        The dashboard's port if free (default Ray's 8265), else any free one.

    Examples
    --------
    >>> rm.cluster.init(num_cpus=4, multi_node=True)
    >>> nodes = rm.cluster.local_cluster()
    >>> node = nodes.add_node(num_cpus=1, resources={"trainer": 1})
    >>> nodes.remove_node(node)  # its actors die, its objects are lost
    """

    def __init__(self, num_cpus: int | None = None, num_gpus: int | None = None,
                 resources: dict | None = None, object_store_memory: int = HEAD_OBJECT_STORE,
                 include_dashboard: bool = True, dashboard_port: int | None = None):
        _use_loopback()
        from ray.cluster_utils import Cluster
        if num_gpus is None:
            from ..context import num_gpus as visible_gpus
            try:
                num_gpus = visible_gpus()
            except Exception:  # noqa: BLE001 - no CuPy: no GPUs for the head
                num_gpus = 0
        head = self._node_args(os.cpu_count() if num_cpus is None else num_cpus, num_gpus,
                               resources, object_store_memory)
        # Cluster writes the head's address to the machine's "latest cluster" file, which
        # every address='auto' on this machine then joins; ray.init() of a local cluster
        # does not, and neither may a test cluster on a shared machine
        import ray._private.utils as ray_utils
        write, ray_utils.write_ray_address = ray_utils.write_ray_address, _no_address_file
        try:
            self._cluster = Cluster(initialize_head=True,
                                    head_node_args={**head,
                                                    "include_dashboard": include_dashboard,
                                                    "dashboard_host": _LOOPBACK,
                                                    "dashboard_port": _dashboard_port(
                                                        dashboard_port or DASHBOARD_PORT)})
        finally:
            ray_utils.write_ray_address = write
        self.nodes: list = []  # added nodes, oldest first

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

    def add_node(self, num_cpus: float = 1, num_gpus: int = 0, resources: dict | None = None,
                 object_store_memory: int = NODE_OBJECT_STORE) -> Any:
        """Start one more raylet on loopback and wait until the cluster sees it.

        Returns
        -------
        ray._private.node.Node
            The node; its ``node_id`` is what ``ray.get_runtime_context().get_node_id()``
            says inside its actors.
        """
        node = self._cluster.add_node(**self._node_args(num_cpus, num_gpus, resources,
                                                        object_store_memory))
        self.nodes.append(node)
        return node

    def remove_node(self, node: Any) -> None:
        """Stop a node added by :meth:`add_node`: its raylet, actors and object store.

        The raylet is terminated (not killed) so that it tells the cluster at once: its
        actors' callers see them dead now instead of after the health-check timeout.
        """
        if node not in self.nodes:
            raise ValueError(f"remove_node: {node!r} is not a node added to this cluster "
                             f"(the head cannot be removed)")
        self._cluster.remove_node(node, allow_graceful=True)
        self.nodes.remove(node)

    def shutdown(self) -> None:
        """Stop every node, the head last."""
        for node in list(self.nodes):
            self.remove_node(node)
        if self._cluster.head_node is not None:
            # not Cluster.shutdown: it also deletes the machine's "latest cluster" file,
            # which may name someone else's cluster
            self._cluster.remove_node(self._cluster.head_node)
            from ray.experimental import internal_kv
            internal_kv._internal_kv_reset()  # its GCS is gone


def _no_address_file(*args: Any, **kwargs: Any) -> None:
    """Stands in for Ray's address-file writer while a :class:`LocalCluster` starts."""
