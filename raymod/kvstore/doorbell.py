"""A same-machine lane for push messages: a Unix socket beside a server's shared-memory block.

When a worker and a KVServer share a machine, a push carries no bytes, only its step, slice
and the name of the worker's block (see :mod:`.shm`). Sent as a Ray actor call from inside a
worker actor, that message costs about 1 ms there and back on a 2-core machine, a third of a
whole 25 MB round once the copies are gone; the same message over a Unix socket costs tens of
microseconds. So a server on a machine with ``/dev/shm`` also listens on a socket file there,
and local workers ring it instead of calling the actor. Ray still starts, places, watches and
restarts every process: a server that dies closes its socket, which the worker reads as a
lost server, as it would read Ray's ``ActorDiedError``.

Messages are one JSON object per line each way (never pickle). The socket file is named like
the blocks (``raymod-<host>-<pid>-...``), so :func:`raymod.kvstore.shm.sweep_stale` removes
the files of killed servers.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from typing import Any, Callable

import numpy as np

from . import shm

__all__ = ["Doorbell", "DoorbellServer", "to_json", "from_json"]

_LOG = logging.getLogger(__name__)


class DoorbellServer:
    """Answers ``handler(message) -> reply`` for every line on a Unix socket, one thread per
    connection (a connection is one worker's client).

    Parameters
    ----------
    handler : callable
        Takes a message dict, returns a reply dict; an exception is sent back as
        ``{"error": "..."}``.
    """

    def __init__(self, handler: Callable[[dict], dict]):
        self.handler = handler
        self.path = os.path.join(shm.SHM_DIR, f"{shm.block_prefix()}{uuid.uuid4().hex[:12]}.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self._listener.listen(256)
        self._closed = False
        threading.Thread(target=self._accept, name="kvstore-doorbell", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as lines:
            try:
                for line in lines:  # ends when the worker closes
                    try:
                        reply = self.handler(json.loads(line))
                    except Exception as err:  # the worker raises it; this thread goes on
                        reply = {"error": f"{type(err).__name__}: {err}"}
                    conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:  # the worker died mid-conversation (reset or broken pipe)
                return

    def close(self) -> None:
        """Stop listening and remove the socket file (open connections end with the process)."""
        self._closed = True
        try:
            self._listener.close()
            os.unlink(self.path)
        except OSError:
            pass


class Doorbell:
    """A worker's connection to one server's :class:`DoorbellServer`.

    :meth:`send` and :meth:`receive` are split so that a push rings every shard before it
    waits for any answer.
    """

    def __init__(self, path: str):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._lines = self._sock.makefile("rb")

    def send(self, message: dict) -> None:
        """Send one message; raises ``ConnectionError`` if the server is gone."""
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as err:
            raise ConnectionError(f"kvstore doorbell: {err}") from None

    def receive(self) -> dict:
        """The reply to the oldest message not yet answered."""
        try:
            line = self._lines.readline()
        except OSError as err:
            raise ConnectionError(f"kvstore doorbell: {err}") from None
        if not line:
            raise ConnectionError("kvstore doorbell: the server closed the connection")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"kvstore server: {reply['error']}")
        return reply

    def close(self) -> None:
        """Close the connection."""
        try:
            self._lines.close()
            self._sock.close()
        except OSError:
            pass


def to_json(value: Any) -> Any:
    """``value`` (numbers, strings, lists, dicts, numpy scalars and arrays) as plain JSON
    types; arrays become ``{"__array__": nested list, "dtype": name}``."""
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    return value


def from_json(value: Any) -> Any:
    """The inverse of :func:`to_json` (tuples come back as lists)."""
    if isinstance(value, dict):
        if "__array__" in value:
            return np.asarray(value["__array__"], dtype=np.dtype(value["dtype"]))
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value
