"""A same-machine lane for push messages: a Unix socket beside a server's shared-memory block.

When a worker and a KVServer share a machine, a push carries no bytes, only its step, slice
and the name of the worker's block (see :mod:`.shm`). Sent as a Ray actor call from inside a
worker actor, that message costs about 1 ms there and back on a 2-core machine, a third of a
whole 25 MB round once the copies are gone; the same message over a Unix socket costs tens of
microseconds. So a server on a machine with ``/dev/shm`` also listens on a socket file there,
and local workers ring it instead of calling the actor. Ray still starts, places, watches and
restarts every process: a server that dies closes its socket, which the worker reads as a
lost server, as it would read Ray's ``ActorDiedError``.

Messages are one JSON object per line each way (never pickle). A worker's push may ask to
be answered only once its step is finished (the wait of a run-ahead window), so a step costs
one round trip; the server answers every worker from one thread (see
:class:`DoorbellServer`). The socket file is named like the blocks
(``raymod-<host>-<pid>-...``), so :func:`raymod.kvstore.shm.sweep_stale` removes the files of
killed servers.
"""
from __future__ import annotations

import json
import logging
import math
import os
import selectors
import socket
import threading
import time
import uuid
from typing import Any, Callable

import numpy as np

from ..profiling import profiled
from . import shm

__all__ = ["Doorbell", "DoorbellServer", "to_json", "from_json"]

_LOG = logging.getLogger(__name__)


class DoorbellServer:
    """Answers ``handler(message) -> reply`` for every line on a Unix socket.

    One thread serves every connection (a connection is one worker's client) through
    ``epoll``: on a 2-core machine a thread per worker, each woken per message and all
    contending for the GIL at every step's end, cost more than the messages themselves.
    A handler therefore never blocks: it returns a number instead of a reply to say "not
    yet", and the message is parked until :meth:`wake` (or the monotonic time it returned,
    ``math.inf`` for none), then handed to ``handler`` again. A connection's next message is
    read only after its parked one is answered, so replies keep the order of the messages.

    Parameters
    ----------
    handler : callable
        Takes a message dict, returns a reply dict or a deadline (float); an exception is
        sent back as ``{"error": "..."}``.
    """

    def __init__(self, handler: Callable[[dict], dict | float]):
        self.handler = handler
        self.path = os.path.join(shm.SHM_DIR, f"{shm.block_prefix()}{uuid.uuid4().hex[:12]}.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self._listener.listen(256)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, None)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._inbox: dict[socket.socket, bytearray] = {}      # bytes read, not yet a line
        self._parked: dict[socket.socket, tuple[dict, float]] = {}  # message, deadline
        self._woken = False  # a wake since the parked messages were last asked again
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="kvstore-doorbell", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Ask the handler again about every parked message (call after a change that may
        answer them; any thread)."""
        self._woken = True
        if threading.current_thread() is not self._thread:
            try:
                self._wake_w.send(b"\0")
            except (BlockingIOError, OSError):  # already pending, or closed
                pass

    def _loop(self) -> None:
        try:
            self._run()
        finally:  # closed: hang up, so that no worker waits for an answer that never comes
            for conn in list(self._inbox):
                self._drop(conn)
            self._selector.close()

    def _run(self) -> None:
        while not self._closed:
            timeout = None
            if self._parked:
                first = min(deadline for _, deadline in self._parked.values())
                if first != math.inf:
                    timeout = max(0.0, first - time.monotonic())
            try:
                events = self._selector.select(timeout)
            except (OSError, ValueError):  # closed meanwhile
                return
            with profiled("doorbell"):
                for key, _ in events:
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except (BlockingIOError, OSError):
                            pass
                    else:
                        self._read(sock)
                if self._parked and (self._woken or timeout is not None):
                    self._retry_parked()

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, OSError):  # closed, or another loop took it
            return
        conn.setblocking(True)  # replies are short; a read follows a readable event only
        self._inbox[conn] = bytearray()
        self._selector.register(conn, selectors.EVENT_READ, None)

    def _drop(self, conn: socket.socket) -> None:
        """Forget a connection whose worker hung up or died."""
        self._inbox.pop(conn, None)
        self._parked.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except OSError:  # the worker died mid-conversation (reset)
            data = b""
        if not data:
            self._drop(conn)
            return
        self._inbox[conn] += data
        self._serve(conn)

    def _serve(self, conn: socket.socket) -> None:
        """Answer the complete lines waiting from ``conn``, up to one that must wait."""
        buf = self._inbox.get(conn)
        while buf is not None and conn not in self._parked:
            end = buf.find(b"\n")
            if end < 0:
                return
            line = bytes(buf[:end])
            del buf[:end + 1]
            try:
                message = json.loads(line, object_hook=_array_hook)  # from_json, in one pass
            except ValueError as err:
                self._send(conn, {"error": f"{type(err).__name__}: {err}"})
                continue
            self._answer(conn, message)

    def _answer(self, conn: socket.socket, message: dict) -> None:
        try:
            reply = self.handler(message)
        except Exception as err:  # the worker raises it; the loop goes on
            reply = {"error": f"{type(err).__name__}: {err}"}
        if isinstance(reply, dict):
            self._parked.pop(conn, None)
            self._send(conn, reply)
        else:
            self._parked[conn] = (message, float(reply))

    def _retry_parked(self) -> None:
        self._woken = False
        for conn, (message, _) in list(self._parked.items()):
            if conn in self._parked:
                self._answer(conn, message)
                if conn not in self._parked and conn in self._inbox:
                    self._serve(conn)  # lines that came in behind the parked one

    def _send(self, conn: socket.socket, reply: dict) -> None:
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:  # the worker died mid-conversation (reset or broken pipe)
            self._drop(conn)

    def close(self) -> None:
        """Stop listening and remove the socket file (open connections end with the process)."""
        self._closed = True
        self.wake()
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
            self._sock.sendall(_dumps(message) + b"\n")
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


def _dumps(message: dict) -> bytes:
    """``message`` as JSON bytes, numpy values in :func:`to_json`'s form. The encoder asks
    :func:`_plain` about numpy values only, instead of a walk over the whole message first
    (a worker sends one per step); keys JSON cannot take fall back to that walk."""
    try:
        return json.dumps(message, default=_plain).encode()
    except TypeError:
        return json.dumps(to_json(message)).encode()


def _plain(value: Any) -> Any:
    """``json.dumps``'s ``default``: a numpy array or scalar as :func:`to_json` writes it."""
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


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


def _array_hook(value: dict) -> Any:
    """``json.loads``'s ``object_hook`` doing :func:`from_json`'s work on each object."""
    if "__array__" in value:
        return np.asarray(value["__array__"], dtype=np.dtype(value["dtype"]))
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
