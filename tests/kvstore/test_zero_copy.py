"""The same-machine KVStore road: doorbell messages, gradients pushed from where they were
computed, parameters read in place from the server's block, the parallel sum."""
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from raymod.kvstore import server as server_module
from raymod.kvstore import shm
from raymod.kvstore.client import ShardClient
from raymod.kvstore.dist import DistKVStore
from raymod.kvstore.doorbell import Doorbell, DoorbellServer
from raymod.kvstore.layout import ShardLayout

pytestmark = pytest.mark.skipif(not shm.available(), reason="no writable /dev/shm here")


def test_doorbell_answers_in_order_and_reports_handler_errors():
    def handler(message):
        if message["n"] < 0:
            raise ValueError(f"negative n: {message['n']}")
        return {"twice": 2 * message["n"]}

    bell_server = DoorbellServer(handler)
    assert os.stat(bell_server.path).st_mode & 0o077 == 0  # this user's only
    bell = Doorbell(bell_server.path)
    for n in (1, 2, 3):  # sent before any answer is read, answered in order
        bell.send({"n": n})
    assert [bell.receive()["twice"] for _ in range(3)] == [2, 4, 6]
    bell.send({"n": -1})
    with pytest.raises(RuntimeError, match="ValueError: negative n: -1"):
        bell.receive()
    bell.send({"n": 5})  # the connection survives a handler error
    assert bell.receive() == {"twice": 10}
    bell.close()
    bell_server.close()
    assert not os.path.exists(bell_server.path)


def test_a_worker_gone_mid_conversation_leaves_the_server_serving(monkeypatch):
    crashes = []
    monkeypatch.setattr(threading, "excepthook", crashes.append)
    bell_server = DoorbellServer(lambda message: {"ok": message["n"]})
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gone.connect(bell_server.path)
    gone.sendall(b'{"n": 1}\n{"n": 2}\n')
    time.sleep(0.2)  # both answers now wait unread on its side
    gone.close()  # so the server's next read is reset, as when a worker is killed
    time.sleep(0.2)
    bell = Doorbell(bell_server.path)
    bell.send({"n": 3})
    assert bell.receive() == {"ok": 3}
    bell.close()
    bell_server.close()
    assert crashes == []


def test_a_killed_servers_doorbell_reads_as_a_lost_connection():
    code = ("from raymod.kvstore.doorbell import DoorbellServer; import time; "
            "s = DoorbellServer(lambda m: (time.sleep(60), {})[1]); "
            "print(s.path, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        path = proc.stdout.readline().strip()
        bell = Doorbell(path)
        bell.send({"push": 1})  # the server is busy with it when it dies
        os.kill(proc.pid, signal.SIGKILL)
        with pytest.raises(ConnectionError, match="kvstore doorbell"):
            bell.receive()
    finally:
        proc.kill()
        proc.wait(10)
    assert os.path.basename(path) in shm.sweep_stale()  # its socket file goes with its blocks


def test_pack_leaves_pieces_that_already_lie_in_place():
    layout = ShardLayout(1)
    layout.add("a", (2, 3), np.float32)
    layout.add("b", (4,), np.float32)
    out = layout.buffers(0)
    in_place = out["<f4"][0:6].reshape(2, 3)
    in_place[...] = 7
    out["<f4"].flags.writeable = False  # a write into it would raise
    with pytest.raises(ValueError, match="read-only"):
        layout.pack(0, {"a": in_place, "b": np.ones(4, np.float32)}, out=out)
    out["<f4"].flags.writeable = True
    layout.pack(0, {"a": in_place, "b": np.ones(4, np.float32)}, out=out)
    np.testing.assert_array_equal(out["<f4"], [7] * 6 + [1] * 4)
    assert [p.key for p in layout.whole_pieces(0)] == ["a", "b"]


@pytest.mark.parametrize("threads", [1, 3])
def test_parallel_sum_adds_in_slice_order_whatever_the_threads(monkeypatch, threads):
    monkeypatch.setattr(server_module, "REDUCTION_THREADS", threads)
    monkeypatch.setattr(server_module, "_PARALLEL_MIN", 16)
    monkeypatch.setattr(server_module, "_reducers", None)
    rng = np.random.default_rng(3)
    grads = [{"<f4": rng.standard_normal(1001).astype(np.float32) * 10.0 ** k}
             for k in range(4)]
    out = server_module._sum_into(grads, {"<f4": np.empty(1001, np.float32)})
    expect = ((grads[0]["<f4"] + grads[1]["<f4"]) + grads[2]["<f4"]) + grads[3]["<f4"]
    np.testing.assert_array_equal(out["<f4"], expect)


@pytest.mark.ray
@pytest.mark.usefixtures("ray_cluster")
def test_gradients_pushed_from_their_block_and_weights_read_in_place():
    kv = DistKVStore("dist_sync", num_servers=2)
    kv.layout.big_array_bound = 8  # "big" is split over both shards: it is copied
    kv.init(["w", "v", "big"], [np.zeros((2, 3), np.float32), np.zeros(3),
                                np.zeros(10, np.float32)])
    clients = [ShardClient(kv.layout, kv.servers) for _ in range(2)]  # two workers' ends
    assert all(bell is not None for c in clients for bell in c.doorbells)
    rng = np.random.default_rng(0)
    pushed, published = [], {}
    for slice_id, client in enumerate(clients):
        slot = client.next_slot(5)
        views = client.gradient_views(slot)
        assert sorted(views) == ["v", "w"]  # whole keys only
        grads = {"w": views["w"].reshape(2, 3), "v": views["v"],
                 "big": rng.standard_normal(10).astype(np.float32)}
        grads["w"][...] = rng.standard_normal((2, 3))  # as a backward writes its gradient
        grads["v"][...] = rng.standard_normal(3)
        pushed.append({k: np.array(g) for k, g in grads.items()})
        published.update(client.push(5, slice_id, grads, 2))
    published = [published[0], published[1]]
    values = clients[0].value_views(published)
    assert sorted(values) == ["v", "w"]
    for key in ("w", "v"):
        np.testing.assert_array_equal(values[key].reshape(pushed[0][key].shape),
                                      pushed[0][key] + pushed[1][key])
        assert not values[key].flags.writeable  # the server's values: never written by workers
    blocks = [shm.SharedBlock.attach(p.handle) for p in published]
    assert any(np.shares_memory(values["w"], a) for b in blocks for a in b.arrays.values())
    got = {"big": np.zeros(10, np.float32)}  # the split key is copied out
    clients[1].read(published, lambda shard, payload: kv.layout.unpack(shard, payload, got))
    np.testing.assert_allclose(got["big"], pushed[0]["big"] + pushed[1]["big"], rtol=1e-6)
    assert clients[0].next_slot(5) == 1 and clients[0].next_slot(6) == 0  # a new step: slot 0
    for client in clients:
        client.close()
    kv.close()
