"""``mxnet.module.executor_group``: raymod's ``DataParallelExecutorGroup`` itself.

One executor per context of one process, each batch split across them; what MXNet-era module
code builds in its own ``bind`` (see :mod:`raymod.parallel.executor_group`).
"""
from ....parallel.executor_group import DataParallelExecutorGroup

__all__ = ["DataParallelExecutorGroup"]
