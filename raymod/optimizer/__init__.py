"""MXNet 1.x's optimizers: ``rm.optimizer.SGD``, ``rm.optimizer.create('adam')``.

Every optimizer updates numpy or CuPy weights in place. Names are registered
case-insensitively; :func:`register` adds your own subclass, which needs only
``create_state(index, weight)`` and ``update(index, weight, grad, state)``. Gradients may be
:class:`~raymod.sparse.RowSparseArray`: SGD and Adam (``lazy_update``), AdaGrad and Ftrl then
update only the gradient's rows, as MXNet's lazy/sparse updates; the others update densely.
"""
from .adam import FTML, Adam, Adamax, Nadam
from .adaptive import AdaDelta, AdaGrad, Ftrl, RMSProp
from .lamb import LAMB
from .optimizer import Optimizer, create, get_array_module, register
from .sgd import NAG, SGD, SGLD, Signum, Test
from .updater import Updater, get_updater

ccSGD = SGD  # MXNet's deprecated name

__all__ = ["Optimizer", "create", "register", "get_updater", "Updater", "get_array_module",
           "SGD", "ccSGD", "NAG", "Signum", "SGLD", "Test", "Adam", "Adamax", "Nadam", "FTML",
           "AdaGrad", "RMSProp", "AdaDelta", "Ftrl", "LAMB"]
