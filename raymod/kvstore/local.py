"""The in-process stores: ``'local'`` sums and keeps values on the host, ``'device'`` on a GPU.

Both hold one owned array per key. A push sums the values given for a key (one per device)
and then either replaces the stored value (no updater) or hands the sum to the updater, which
changes the stored value in place. A pull copies the stored value into every output, moving
it between host and devices as needed.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..base import MXNetError
from ..context import as_numpy, context_of
from ..optimizer import Optimizer, get_array_module, get_updater
from ..sparse import RowSparseArray, is_sparse
from .base import KVStoreBase, register
from .compression import GradientCompression
from .rows import assign_rows, check_sparse_push, rows_of, summed

__all__ = ["LocalKVStore", "KVStore"]

_HOST_TYPES = ("local", "local_update_cpu", "local_allreduce_cpu")
_DEVICE_TYPES = ("device", "local_allreduce_device")


def _moved(value: Any, like: Any) -> Any:
    """``value`` on the device ``like`` lives on: ``value`` itself when already there."""
    if isinstance(value, np.ndarray) and isinstance(like, np.ndarray):
        return value
    dst = context_of(like)
    if context_of(value) == dst:
        return value
    if dst.device_type != "gpu":
        return as_numpy(value)
    with dst.scope():
        return dst.xp.asarray(value) if isinstance(value, np.ndarray) else value.copy()


def _sum_into(target: Any, values: list) -> None:
    """``target[...] = sum(values)`` in place, each value moved to ``target``'s device and dtype."""
    vals = [_moved(v, target) for v in values]
    vals = [v if v.dtype == target.dtype else v.astype(target.dtype) for v in vals]
    if len(vals) == 1:
        target[...] = vals[0]
        return
    xp = get_array_module(target)
    xp.add(vals[0], vals[1], out=target)
    for v in vals[2:]:
        target += v


def _copy_into(dst: Any, src: Any) -> None:
    """``dst[...] = src`` across devices, cast to ``dst``'s dtype."""
    if isinstance(dst, np.ndarray):
        dst[...] = src if isinstance(src, np.ndarray) else as_numpy(src)
        return
    with context_of(dst).scope():
        dst[...] = _moved(src, dst)


class LocalKVStore(KVStoreBase):
    """A key-value store inside one process: MXNet's ``'local'`` and ``'device'`` stores.

    Created by ``rm.kv.create(name)``. ``'local'`` (and its MXNet aliases
    ``'local_update_cpu'``, ``'local_allreduce_cpu'``) keeps every value as a numpy array
    and sums pushed values on the host. ``'device'`` (and ``'local_allreduce_device'``)
    keeps a value on the device it was given on, and moves a host value to the GPU of the
    first values pushed from a GPU, so sums and updates run there. On numpy arrays the two
    behave the same.

    Parameters
    ----------
    name : str, default 'local'
        One of the type names above; :attr:`type` returns it.

    Examples
    --------
    >>> kv = rm.kv.create('local')
    >>> kv.init(3, np.ones((2, 3)))
    >>> kv.push(3, [np.ones((2, 3))] * 4)      # one gradient per device: summed
    >>> out = np.zeros((2, 3))
    >>> kv.pull(3, out=out)                    # out is now all 4
    """

    def __init__(self, name: str = "local"):
        name = name.lower()
        if name not in _HOST_TYPES + _DEVICE_TYPES:
            raise ValueError(f"not an in-process kvstore type: {name!r}; known: "
                             f"{', '.join(_HOST_TYPES + _DEVICE_TYPES)}")
        self._type = name
        self._on_device = name in _DEVICE_TYPES
        self._store: dict = {}
        self._merge: dict = {}
        self._updater: Callable | None = None
        self._compression: GradientCompression | None = None
        self._key_kind = None

    @classmethod
    def _from_name(cls, name: str) -> "LocalKVStore":
        return cls(name)

    # ---- data movement -------------------------------------------------------------------

    def init(self, key: Any, value: Any) -> None:
        """Set the initial value of a key (or of each key in a list); the store keeps a copy.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s); a store takes int keys or str keys, never both.
        value : ndarray or list of ndarray
            One array per key.

        Raises
        ------
        MXNetError
            If a key is already initialised, or given more than one value.
        """
        values = self._one_value_each(key, value)
        for k in values:
            if k in self._store:
                raise MXNetError(f"init: key {k!r} is already initialized")
        for k, v in values.items():
            self._store[k] = self._owned(v)

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Push values: the values for one key are summed, then stored or given to the updater.

        Without an updater the sum replaces the stored value. With one (see
        :meth:`set_optimizer`), ``updater(key, summed, stored)`` updates the stored value
        in place. With gradient compression, each value is compressed before the sum.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s).
        value : ndarray, list of ndarray, or list of those (one entry per key)
            For each key, one array or one per device.
        priority : int, default 0
            Accepted for MXNet compatibility; in-process pushes run at once, in order.
        """
        for k, vals in self._grouped(key, value, "push").items():
            stored = self._stored(k, vals, "push")
            if any(is_sparse(v) for v in vals):
                self._push_rows(k, vals, stored)
                continue
            if self._compression is not None:
                vals = [self._compression.compress(k, i, v) for i, v in enumerate(vals)]
            if self._on_device and isinstance(stored, np.ndarray) \
                    and not isinstance(vals[0], np.ndarray):
                stored = self._store[k] = _moved(stored, vals[0])
                self._merge.pop(k, None)
            with context_of(stored).scope():
                if self._updater is None:
                    _sum_into(stored, vals)
                else:
                    self._updater(k, self._merged(k, vals, stored), stored)

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy stored values into ``out``.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s).
        out : ndarray, list of ndarray, or list of those (one entry per key)
            Arrays that receive the value, on any device (numpy or cupy).
        priority : int, default 0
            Accepted for MXNet compatibility.
        ignore_sparse : bool, default True
            Skip row_sparse arrays in ``out`` (MXNet's default: their rows come from
            :meth:`row_sparse_pull`); with False they receive every row.
        """
        if out is None:
            raise ValueError("pull needs out=: the array(s) to copy the values into")
        for k, outs in self._grouped(key, out, "pull").items():
            src = self._stored(k, outs, "pull")
            for o in outs:
                if isinstance(o, RowSparseArray):
                    if not ignore_sparse:  # every row (row_sparse_pull picks some)
                        o[:] = RowSparseArray.full(_moved(src, o.data).copy())
                    continue
                _copy_into(o, src)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """Push ``value``, then pull the result into ``out``, or into ``value`` when omitted.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s).
        value : ndarray or lists of them
            As in :meth:`push`.
        out : ndarray or lists of them, optional
            As in :meth:`pull`; default ``value`` (in place).
        priority : int, default 0
            Accepted for MXNet compatibility.
        """
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """Initialise ``key`` with ``value`` and copy it into every array of ``out``.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s), not yet initialised.
        value : ndarray or list of ndarray
            One array per key.
        out : ndarray or lists of them
            As in :meth:`pull`.
        priority : int, default 0
            Accepted for MXNet compatibility.
        """
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Copy only the rows ``row_ids`` of stored tables into row_sparse ``out`` arrays.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s).
        out : RowSparseArray, or lists as in :meth:`pull`
            Receives the rows (and holds no others afterwards).
        priority : int, default 0
            Accepted for MXNet compatibility.
        row_ids : array of int, or a list of them (one per ``out`` array)
            Rows wanted, any order, repeats allowed.

        Raises
        ------
        ValueError
            A row id outside the table, or no ``row_ids`` (before anything is copied).
        TypeError
            An ``out`` array that is not row_sparse.
        """
        plan = self._row_pulls(key, out, row_ids,
                               lambda k, o: self._stored(k, [o], "row_sparse_pull"))
        for k, o, wanted in plan:
            o[:] = rows_of(self._store[k], wanted)

    # ---- optimizer and compression -------------------------------------------------------

    def set_gradient_compression(self, compression_params: dict) -> None:
        """Compress pushed gradients with 2-bit quantisation and error feedback.

        Supported by ``'device'`` stores (and dist ones); MXNet's ``'local'`` store refuses
        it, and so does this one.

        Parameters
        ----------
        compression_params : dict
            ``{'type': '2bit', 'threshold': t}`` with ``t > 0`` (default 0.5), or
            ``{'type': 'none'}`` to turn compression off.
        """
        if not self._on_device:
            raise MXNetError(f"gradient compression is not supported by a {self._type!r} "
                             "kvstore; use 'device' or a dist store")
        self._compression = GradientCompression.from_params(compression_params)

    @property
    def compression_threshold(self) -> float | None:
        """The 2-bit threshold pushes are compressed with (None: off), as a dist store's."""
        return None if self._compression is None else self._compression.threshold

    def set_optimizer(self, optimizer: Optimizer) -> None:
        """Run ``optimizer`` on every push: ``push`` then updates the stored weights.

        Parameters
        ----------
        optimizer : Optimizer
            Its updater receives ``(key, summed gradient, stored weight)``.
        """
        self._set_updater(get_updater(optimizer))

    def _set_updater(self, updater: Callable) -> None:
        """Use ``updater(key, received, stored)`` on pushes; it updates ``stored`` in place."""
        if not callable(updater):
            raise TypeError(f"updater must be callable, got {type(updater).__name__}")
        self._updater = updater

    def get_optimizer(self) -> Optimizer | None:
        """The optimizer installed by :meth:`set_optimizer` (or loaded with its states)."""
        return getattr(self._updater, "optimizer", None)

    def is_capable(self, capability: str) -> bool:
        """True for :attr:`OPTIMIZER`: this store can run an optimizer.

        Raises
        ------
        ValueError
            For any other capability.
        """
        if capability.lower() == self.OPTIMIZER:
            return True
        raise ValueError(f"unknown kvstore capability {capability!r}")

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the updater's states (see ``Updater.get_states``) to ``fname``.

        Parameters
        ----------
        fname : str
            Output path.
        dump_optimizer : bool, default False
            Also save the optimizer itself, so that loading re-creates it.
        """
        with open(fname, "wb") as f:
            f.write(self.get_optimizer_states(dump_optimizer))

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The updater's states as bytes (see ``Updater.get_states``)."""
        return self._state_updater("save").get_states(dump_optimizer)

    def load_optimizer_states(self, fname: str) -> None:
        """Read states written by :meth:`save_optimizer_states` into the updater.

        Parameters
        ----------
        fname : str
            Input path.
        """
        with open(fname, "rb") as f:
            self.set_optimizer_states(f.read())

    def set_optimizer_states(self, states: bytes) -> None:
        """Load states (bytes from ``Updater.get_states``) into the updater."""
        self._state_updater("load").set_states(states)

    # ---- identity ------------------------------------------------------------------------

    @property
    def type(self) -> str:
        """The type name the store was created with, e.g. ``'local_allreduce_cpu'``."""
        return self._type

    @property
    def rank(self) -> int:
        """Always 0: one process."""
        return 0

    @property
    def num_workers(self) -> int:
        """Always 1: one process."""
        return 1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} type={self._type!r} keys={len(self._store)}>"

    # ---- helpers -------------------------------------------------------------------------

    def _owned(self, value: Any) -> Any:
        """A copy of ``value`` for the store: on the host, or on its device for 'device'.
        A row_sparse value is stored as its dense table."""
        if is_sparse(value):
            value = value.todense()
        if isinstance(value, np.ndarray):
            return value.copy()
        if not self._on_device:
            return as_numpy(value)
        with context_of(value).scope():
            return value.copy()

    def _stored(self, key: Any, arrays: list, what: str) -> Any:
        """The stored value of ``key``, checked against the shapes of ``arrays``."""
        stored = self._store.get(key)
        if stored is None:
            raise MXNetError(f"{what}: key {key!r} has not been initialized; call init first")
        for a in arrays:
            if a.shape != stored.shape:
                raise MXNetError(f"{what}: key {key!r} holds shape {stored.shape}, got an "
                                 f"array of shape {a.shape}")
        return stored

    def _push_rows(self, key: Any, values: list, stored: Any) -> None:
        """A push with row_sparse values: summed by rows; the updater (a lazy update) or
        the assignment touches only the rows pushed."""
        check_sparse_push(key, values, self._compression)
        total = summed(values)
        if self._updater is not None:
            self._updater(key, total, stored)
        elif isinstance(total, RowSparseArray):
            assign_rows(stored, total)
        else:
            stored[...] = total

    def _merged(self, key: Any, values: list, stored: Any) -> Any:
        """The sum of ``values`` on ``stored``'s device (current), for the updater; one value
        is passed through uncopied when already there."""
        if len(values) == 1:
            return _moved(values[0], stored)
        buf = self._merge.get(key)
        if buf is None:
            buf = self._merge[key] = get_array_module(stored).empty_like(stored)
        _sum_into(buf, values)
        return buf

    def _state_updater(self, what: str) -> Any:
        """The updater, if it can save and load states."""
        if self._updater is None:
            raise MXNetError(f"cannot {what} optimizer states: no optimizer on this kvstore "
                             "(call set_optimizer first)")
        if not hasattr(self._updater, "get_states"):
            raise MXNetError(f"cannot {what} optimizer states: the updater given to "
                             "_set_updater has no get_states/set_states")
        return self._updater


#: MXNet's name for the store class (``rm.kv.KVStore``)
KVStore = LocalKVStore

for _name in _HOST_TYPES + _DEVICE_TYPES:
    register(LocalKVStore, name=_name)
