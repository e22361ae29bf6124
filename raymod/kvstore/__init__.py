"""MXNet 1.x's key-value stores: ``rm.kv.create('local')``, ``'device'``, and the dist types.

A KVStore holds one array per key (int or str). Devices ``push`` gradients, which are summed
and either stored or handed to an optimizer running in the store; ``pull`` copies values
back out. The in-process stores live in :mod:`.local`; the Ray-backed dist stores register
themselves from ``raymod.kvstore.dist``.
"""
from .base import KVStoreBase, create, register
from .compression import GradientCompression
from .local import KVStore, LocalKVStore

__all__ = ["create", "register", "KVStore", "KVStoreBase", "LocalKVStore", "GradientCompression",
           "DistKVStore"]


def __getattr__(name: str):
    # the Ray-backed store is imported on first use: ``rm.kv.DistKVStore("dist_sync",
    # num_servers=2, standby=True)`` takes the options ``create`` has no room for
    if name == "DistKVStore":
        from .dist import DistKVStore
        return DistKVStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
