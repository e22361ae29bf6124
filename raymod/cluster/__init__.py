"""Ray: the local-cluster helper, the worker pool and the remote executor group.

``rm.cluster.init()`` starts a loopback-only local cluster (or joins one with
``address='auto'``); with ``multi_node=True`` it is a :class:`LocalCluster` whose loopback
nodes come and go (``rm.cluster.local_cluster()``). ``rm.Workers`` says how many worker
actors a module runs on; :mod:`.naming` names the actors, :mod:`.metrics` exports a fit's
figures as Ray metrics.
"""
from . import metrics, naming, pool
from .local import (LocalCluster, init, init_for_workers, is_initialized, local_cluster,
                    shutdown)
from .local import ClusterStartError  # noqa: F401 - one line, what failed and what to do
from .workers import Workers

__all__ = ["init", "init_for_workers", "shutdown", "is_initialized", "LocalCluster", "local_cluster", "Workers"]
