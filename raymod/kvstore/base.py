"""The KVStore interface, the registry of store types, and :func:`create`.

Every store (the in-process ``'local'``/``'device'`` stores here, the Ray-backed dist stores
in ``raymod.kvstore.dist``) subclasses :class:`KVStoreBase` and is registered under the type
names :func:`create` accepts. A class that serves several names (``'dist_sync'``,
``'dist_async'``, ...) overrides :meth:`KVStoreBase._from_name` to learn which one was asked for.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from ..base import MXNetError, bytes_via_file, file_from_bytes
from ..registry import Registry
from ..sparse import RowSparseArray, is_sparse, stype_of
from ..sparse.table_init import TableInit
from .rows import checked_row_ids

__all__ = ["KVStoreBase", "create", "register"]

_REGISTRY: Registry["KVStoreBase"] = Registry("kvstore")
_DIST_MODULE = ".dist"


class KVStoreBase:
    """Base class of key-value stores: the API the Module and user code call.

    A store maps int or str keys (one kind per store) to arrays. Workers ``push`` values
    (gradients), which are summed over devices and either replace the stored value or go
    through an updater (an optimizer); ``pull`` copies stored values out. Register a
    subclass with :meth:`register` to make it available to :func:`create` by its
    lower-cased class name.
    """

    #: the capability :meth:`is_capable` is asked about before ``set_optimizer``
    OPTIMIZER = "optimizer"
    #: the registry behind :func:`create` (MXNet keeps a dict under this name)
    kv_registry = _REGISTRY

    @staticmethod
    def register(klass: type) -> type:
        """Register a store class under its lower-cased class name; usable as a decorator.

        Registering a name again warns and replaces the earlier class.

        Parameters
        ----------
        klass : type
            A subclass of :class:`KVStoreBase`.

        Returns
        -------
        type
            ``klass``, unchanged.
        """
        return register(klass)

    @classmethod
    def _from_name(cls, name: str) -> "KVStoreBase":
        """The store :func:`create` returns for type ``name``; plain construction by default."""
        return cls()

    # ---- data movement -------------------------------------------------------------------

    def init(self, key: Any, value: Any) -> None:
        """Set the initial value of one key or of each key in a list."""
        raise NotImplementedError(f"{type(self).__name__} does not implement init")

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Send values for keys; several values for one key are summed."""
        raise NotImplementedError(f"{type(self).__name__} does not implement push")

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy stored values into ``out``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement pull")

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Push ``value`` then pull the result into ``out`` (into ``value`` when omitted)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement pushpull")

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Initialise keys with ``value`` and pull it into ``out``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement broadcast")

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Pull selected rows of row_sparse values (not supported by raymod's stores)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement row_sparse_pull")

    # ---- optimizer and compression -------------------------------------------------------

    def set_gradient_compression(self, compression_params: dict) -> None:
        """Compress pushed gradients, e.g. ``{'type': '2bit', 'threshold': 0.5}``."""
        raise NotImplementedError(f"{type(self).__name__} does not support gradient compression")

    def set_optimizer(self, optimizer: Any) -> None:
        """Run ``optimizer`` in the store on every push."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_optimizer")

    def is_capable(self, capability: str) -> bool:
        """Whether the store supports ``capability`` (e.g. :attr:`OPTIMIZER`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement is_capable")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the optimizer states held by the store to ``fname``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  "save_optimizer_states")

    def load_optimizer_states(self, fname: str) -> None:
        """Read optimizer states written by :meth:`save_optimizer_states`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  "load_optimizer_states")

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The bytes :meth:`save_optimizer_states` writes (through a temporary file)."""
        return bytes_via_file(lambda fname: self.save_optimizer_states(fname, dump_optimizer))

    def set_optimizer_states(self, states: bytes) -> None:
        """Load optimizer states given as bytes (through a temporary file)."""
        file_from_bytes(states, self.load_optimizer_states)

    # ---- identity and synchronisation ----------------------------------------------------

    @property
    def type(self) -> str:
        """The store's type name, e.g. ``'local'``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement type")

    @property
    def rank(self) -> int:
        """This worker's rank among ``num_workers``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rank")

    @property
    def num_workers(self) -> int:
        """How many workers share the store."""
        raise NotImplementedError(f"{type(self).__name__} does not implement num_workers")

    def barrier(self) -> None:
        """Wait until every worker reaches this point; in-process stores return at once."""
        self._barrier()

    def _barrier(self) -> None:
        """MXNet's name for :meth:`barrier`."""

    # ---- keys and values, shared by every store ------------------------------------------

    _key_kind: type | None = None

    def _grouped(self, key: Any, value: Any, what: str) -> dict:
        """Key -> list of arrays, from any of MXNet's key/value forms.

        ``key`` is one key or a list of keys; for one key, ``value`` is an array or a list
        of arrays (one per device); for a list of keys, a list with one such entry per key.
        Repeated keys gather their arrays in one list. Also enforces one key type per store.
        """
        pairs = _pairs(key, value, what)
        self._check_kind([k for k, _ in pairs], what)
        grouped: dict = {}
        for k, v in pairs:
            grouped.setdefault(k, []).append(v)
        return grouped

    def _row_pulls(self, key: Any, out: Any, row_ids: Any,
                   check: Callable[[Any, Any], Any]) -> list[tuple]:
        """``[(key, out array, sorted unique row ids)]`` for ``row_sparse_pull``, every
        argument checked (``check(key, out)`` for the store's own checks) before any row
        is copied."""
        if out is None or row_ids is None:
            raise ValueError("row_sparse_pull needs out= (row_sparse arrays) and row_ids=")
        outs = [(k, o) for k, group in self._grouped(key, out, "row_sparse_pull").items()
                for o in group]
        ids = row_ids if isinstance(row_ids, (list, tuple)) else [row_ids] * len(outs)
        if len(ids) != len(outs):
            raise ValueError(f"row_sparse_pull: {len(ids)} row_ids for {len(outs)} out arrays")
        plan = []
        for (k, o), wanted in zip(outs, ids):
            if not isinstance(o, RowSparseArray):
                raise TypeError(f"row_sparse_pull: out for key {k!r} must be a row_sparse "
                                f"array, got {stype_of(o)} storage (use pull)")
            check(k, o)
            plan.append((k, o, checked_row_ids(wanted, o.shape[0], k)))
        return plan

    def _one_value_each(self, key: Any, value: Any) -> dict:
        """Key -> its single init value; MXNetError for a key given several."""
        grouped = self._grouped(key, value, "init")
        for k, vals in grouped.items():
            if len(vals) != 1:
                raise MXNetError(f"init: key {k!r} got {len(vals)} values; init takes one "
                                 "value per key")
        return {k: vals[0] for k, vals in grouped.items()}

    def _check_keys(self, key: Any, what: str) -> None:
        """Enforce the store's key type for ``key`` (one key or a list), without values."""
        keys = key if isinstance(key, (list, tuple)) else [key]
        self._check_kind([_norm_key(k, what) for k in keys], what)

    def _check_kind(self, keys: list, what: str) -> None:
        """MXNetError unless ``keys`` are all of the store's key type (set by the first use)."""
        if not keys:
            return
        expected = self._key_kind or type(keys[0])
        for k in keys:
            if type(k) is not expected:
                raise MXNetError(f"{what}: a kvstore cannot mix int and str keys; this store "
                                 f"uses {expected.__name__} keys, got {type(k).__name__} "
                                 f"key {k!r}")
        self._key_kind = expected


def _norm_key(key: Any, what: str) -> int | str:
    """``key`` as a plain int or str."""
    if type(key) is int or type(key) is str:
        return key
    if isinstance(key, str):
        return str(key)
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        return int(key)
    raise TypeError(f"{what}: kvstore keys must be int or str, got {key!r} "
                    f"({type(key).__name__})")


def _norm_array(value: Any, key: Any, what: str) -> Any:
    """``value`` if it is a numpy or cupy array (numpy scalars become 0-d arrays)."""
    if type(value) is np.ndarray or is_sparse(value):
        return value
    if what == "init" and isinstance(value, TableInit):  # a table its servers fill
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "__setitem__"):
        return value
    raise TypeError(f"{what}: the value for key {key!r} must be a numpy or cupy array "
                    f"(or a list of them), got {type(value).__name__}")


def _pairs(key: Any, value: Any, what: str) -> list:
    """Flat ``(key, array)`` pairs from one key or a list of keys and matching values."""
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            got = f"{len(value)} values" if isinstance(value, (list, tuple)) else "one array"
            raise ValueError(f"{what}: {len(key)} keys need a list of {len(key)} values, "
                             f"got {got}")
        pairs = []
        for k, v in zip(key, value):
            if isinstance(k, (list, tuple)):
                raise TypeError(f"{what}: kvstore keys must be int or str, got a nested list")
            pairs.extend(_pairs(k, v, what))
        return pairs
    k = _norm_key(key, what)
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"{what}: empty list of values for key {k!r}")
        return [(k, _norm_array(v, k, what)) for v in value]
    return [(k, _norm_array(value, k, what))]


def register(klass: type | None = None, *, name: str | None = None):
    """Register a :class:`KVStoreBase` subclass for :func:`create`.

    Parameters
    ----------
    klass : type, optional
        The store class. Omit it to use ``register(name=...)`` as a decorator.
    name : str, optional
        The type name (case-insensitive); default the lower-cased class name. A class may
        be registered under several names; it then learns the one asked for through
        ``_from_name``.

    Returns
    -------
    type or callable
        ``klass``, or a decorator when ``klass`` is omitted.
    """
    def add(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, KVStoreBase)):
            raise TypeError(f"only KVStoreBase subclasses can be registered, got {cls!r}")
        return _REGISTRY.register(cls, name=name)
    return add if klass is None else add(klass)


def create(name: str = "local") -> KVStoreBase:
    """Create a key-value store by type name.

    Parameters
    ----------
    name : str, default 'local'
        The store type, case-insensitive:

        - ``'local'`` (also ``'local_update_cpu'``, ``'local_allreduce_cpu'``): values are
          summed and kept on the host.
        - ``'device'`` (also ``'local_allreduce_device'``): values are summed and kept on a
          device the pushed values live on (a GPU when they are CuPy arrays).
        - ``'dist_sync'``, ``'dist_async'``, ``'dist_device_sync'``: stores shared by the
          workers of a Ray cluster (``raymod.kvstore.dist``).
        - any name registered with :func:`register`.

    Returns
    -------
    KVStoreBase
        A new, empty store.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the known ones.
    MXNetError
        For a ``dist`` name when the Ray backend is not available.
    """
    if not isinstance(name, str):
        raise TypeError(f"kvstore type name must be a str, got {type(name).__name__}")
    name = name.lower()
    if name not in _REGISTRY and name.startswith("dist"):
        _load_dist_backend(name)
    klass = _REGISTRY.get(name)
    return klass._from_name(name) if hasattr(klass, "_from_name") else klass()


def _load_dist_backend(name: str) -> None:
    """Import the module registering the dist stores, or say why a dist store is unavailable."""
    try:
        importlib.import_module(_DIST_MODULE, __package__)
    except ModuleNotFoundError as err:
        if err.name != __package__ + _DIST_MODULE:
            raise
        raise MXNetError(f"kvstore type {name!r} needs raymod's Ray backend "
                         f"({__package__}{_DIST_MODULE}), which is not available yet; in one "
                         "process use 'local' or 'device'") from None
