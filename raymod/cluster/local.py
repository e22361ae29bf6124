"""Starting or joining the Ray cluster raymod runs on.

``init()`` with no address starts a single-node cluster bound to loopback only (nothing
listens on the machine's network address), which is what tests and laptop runs want.
``init(address='auto')`` joins the cluster of ``ray submit`` / ``ray job submit``.
"""
from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["init", "shutdown", "is_initialized"]

_LOG = logging.getLogger(__name__)
_LOOPBACK = "127.0.0.1"
_started_here = {"local": True}  # whether init() started the cluster (vs joined one)


def is_initialized() -> bool:
    """Whether this process is connected to a Ray cluster."""
    import ray
    return ray.is_initialized()


def init(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None,
         **ray_kwargs: Any) -> dict:
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
    if local or _joins_loopback(address):
        # Ray reads this when imported: with it off, a single-node cluster uses loopback
        # for every service (the variable's name is historical); a driver joining such a
        # cluster needs it too, or Ray swaps 127.0.0.1 for the machine's network address
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        from ray._private import ray_constants
        ray_constants.ENABLE_RAY_CLUSTER = False  # in case ray was imported earlier
    import ray
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": True}
        kwargs.update(ray_kwargs)
        _started_here["local"] = local
        if local:
            # the dashboard (and the State API behind `ray list actors`) on loopback only
            kwargs.setdefault("include_dashboard", True)
            kwargs.setdefault("dashboard_host", _LOOPBACK)
            # address="local": always a new cluster, never one some `ray start` left running
            ray.init(address="local", num_cpus=num_cpus, num_gpus=num_gpus,
                     _node_ip_address=_LOOPBACK, **kwargs)
        else:
            ray.init(address=address, **kwargs)
        _LOG.info("Ray %s cluster at %s", "local" if local else "joined",
                  ray.get_runtime_context().gcs_address)
    return {"address": ray.get_runtime_context().gcs_address,
            "resources": ray.cluster_resources(), "local": local,
            "dashboard_url": _dashboard_url(), "metrics_export_port": _metrics_port()}


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


def shutdown() -> None:
    """Disconnect from Ray (and stop the local cluster if this process started it)."""
    import ray
    if ray.is_initialized():
        ray.shutdown()
