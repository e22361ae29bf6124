"""Flat arrays in shared memory, for KVStore traffic between processes of one machine.

Ray's object store costs a full copy per ``put`` (about 3 ms for 25 MB here) on top of the
copy a worker makes to pack its gradient, and another when the server publishes. Processes
on the same machine can instead share pages: a worker packs its gradient straight into a
:class:`SharedBlock` and pushes only the block's :class:`BlockHandle`; a server keeps its
values in a block that workers map and read in place. Ray still carries every message and
detects every failure; only the bytes skip it. Processes on other machines, or where
``/dev/shm`` is missing, fall back to the object store (see ``raymod.kvstore.client``).

A block is a file in ``/dev/shm`` mapped by every process that uses it: a 64-byte header
(the writer's version number, see :attr:`SharedBlock.version`), then one flat array per dtype.
File names carry the creating process's host and pid, so a process that was killed (Ray kills
actors with SIGKILL, which runs no clean-up) has its files removed by :func:`sweep_stale` in
the next raymod process to start on that machine.
"""
from __future__ import annotations

import atexit
import mmap
import os
import socket
import uuid
from dataclasses import dataclass

import numpy as np

__all__ = ["BlockHandle", "SharedBlock", "available", "block_prefix", "sweep_stale"]

SHM_DIR = "/dev/shm"
_PREFIX = "raymod-"
_HEADER = 64   # bytes before the first array: the version counter, cache-line aligned
_ALIGN = 64
_HOST = socket.gethostname().replace("-", "_")[:40]


@dataclass(frozen=True)
class BlockHandle:
    """What another process needs to map a block: its file name and per-dtype sizes."""

    name: str
    sizes: tuple[tuple[str, int], ...]


def available() -> bool:
    """Whether this machine offers a writable ``/dev/shm`` (Linux)."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def _layout(sizes: tuple[tuple[str, int], ...]) -> tuple[list[tuple[str, int, int]], int]:
    """``(dtype, byte offset, count)`` per array and the file size."""
    spans, offset = [], _HEADER
    for dtype, count in sizes:
        spans.append((dtype, offset, count))
        offset += -(-count * np.dtype(dtype).itemsize // _ALIGN) * _ALIGN
    return spans, offset


def block_prefix() -> str:
    """The start of the names of this process's files in ``/dev/shm`` (host and pid, which
    :func:`sweep_stale` reads back)."""
    return f"{_PREFIX}{_HOST}-{os.getpid()}-"


class SharedBlock:
    """One dtype-keyed set of flat arrays in a shared-memory file.

    Use :meth:`create` in the writing process and :meth:`attach` elsewhere; ``arrays`` maps
    each dtype string to its flat array, writable in every process.
    """

    def __init__(self, handle: BlockHandle, created: bool):
        self.handle, self.created = handle, created
        spans, nbytes = _layout(handle.sizes)
        path = os.path.join(SHM_DIR, handle.name)
        fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if created else 0), 0o600)
        try:
            if created:
                # reserve the pages now: a short tmpfs raises here, not SIGBUS on first write
                os.posix_fallocate(fd, 0, nbytes)
            self._map = mmap.mmap(fd, nbytes)
        except BaseException:
            if created:
                os.unlink(path)
            raise
        finally:
            os.close(fd)
        self._header = np.frombuffer(self._map, np.int64, 1, 0)
        self.arrays = {dt: np.frombuffer(self._map, dt, n, off) for dt, off, n in spans}
        if created:
            _OWNED[handle.name] = self

    @classmethod
    def create(cls, sizes: dict[str, int]) -> "SharedBlock":
        """A new zeroed block with ``sizes[dtype]`` elements per dtype."""
        name = f"{block_prefix()}{uuid.uuid4().hex[:12]}"
        return cls(BlockHandle(name, tuple(sorted(sizes.items()))), created=True)

    @classmethod
    def attach(cls, handle: BlockHandle) -> "SharedBlock":
        """Map a block another process on this machine created (cached per process).

        Raises ``FileNotFoundError`` if this machine has no such block (another machine's,
        or removed because its creator died).
        """
        block = _ATTACHED.pop(handle.name, None)  # re-inserted last: least recently used first
        if block is None:
            if len(_ATTACHED) >= _MAX_ATTACHED:  # e.g. outboxes of workers that died
                _ATTACHED.pop(next(iter(_ATTACHED)))
            block = cls(handle, created=False)
        _ATTACHED[handle.name] = block
        return block

    @property
    def version(self) -> int:
        """The number the writer last stamped (readers check it around a read)."""
        return int(self._header[0])

    @version.setter
    def version(self, value: int) -> None:
        self._header[0] = value

    def unlink(self) -> None:
        """Remove the file (mappings elsewhere stay valid until they are dropped)."""
        if _OWNED.pop(self.handle.name, None) is not None:
            try:
                os.unlink(os.path.join(SHM_DIR, self.handle.name))
            except FileNotFoundError:
                pass


_OWNED: dict[str, SharedBlock] = {}
_ATTACHED: dict[str, SharedBlock] = {}
_MAX_ATTACHED = 64  # mappings kept per process; a dropped one unmaps once unreferenced


@atexit.register
def _unlink_owned() -> None:
    for block in list(_OWNED.values()):
        block.unlink()


def sweep_stale() -> list[str]:
    """Remove this host's block files whose creating process is gone; returns their names."""
    if not available():
        return []
    removed = []
    for name in os.listdir(SHM_DIR):
        if not name.startswith(f"{_PREFIX}{_HOST}-"):
            continue
        try:
            pid = int(name[len(_PREFIX) + len(_HOST) + 1:].split("-")[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                removed.append(name)
            except FileNotFoundError:
                pass
        except (ValueError, PermissionError):  # not ours to judge
            continue
    return removed
