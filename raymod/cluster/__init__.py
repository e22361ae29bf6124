"""Ray: the local-cluster helper, the worker pool and the remote executor group.

``rm.cluster.init()`` starts a loopback-only local cluster (or joins one with
``address='auto'``); ``rm.Workers`` says how many worker actors a module runs on;
:mod:`.naming` names the actors, :mod:`.metrics` exports a fit's figures as Ray metrics.
"""
from . import metrics, naming, pool
from .local import init, is_initialized, shutdown
from .workers import Workers

__all__ = ["init", "shutdown", "is_initialized", "Workers"]
