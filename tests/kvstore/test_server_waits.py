"""The server side of run-ahead windows, in this process: workers wait for a finished step on
the server, the driver can abort those waits, and metric states travel once with the pushes."""
import json
import threading
import time

import numpy as np
import pytest

from raymod.kvstore.doorbell import from_json, to_json
from raymod.kvstore.layout import ShardLayout
from raymod.kvstore.server import KVServer


@pytest.fixture
def server():
    layout = ShardLayout(1)
    pieces = [p for _, p in layout.add("w", (4,), np.float32)]
    srv = KVServer(0, "sync")
    srv.add(pieces, layout.pack(0, {"w": np.zeros(4, np.float32)}))
    yield srv
    srv.close()


def grad(value):
    return {"<f4": np.full(4, value, np.float32)}


def values_of(server, published):
    """The values a published entry names (a shared-memory block here, or an object ref)."""
    from raymod.kvstore import shm
    item = published[0]
    if hasattr(item, "handle"):
        return shm.SharedBlock.attach(item.handle).arrays["<f4"].copy()
    import ray
    return ray.get(item)["<f4"]


def test_a_wait_returns_when_the_step_finishes(server):
    got = {}
    waiter = threading.Thread(target=lambda: got.update(p=server.wait_done(0, window=1)))
    waiter.start()
    server.push(0, 0, grad(1.0), 2, metric={"n": 1})
    waiter.join(0.2)
    assert waiter.is_alive()  # slice 1 has not arrived
    server.push(0, 1, grad(2.0), 2, metric={"n": 2})
    waiter.join(5)
    assert not waiter.is_alive()
    np.testing.assert_array_equal(values_of(server, got["p"]), 3.0)  # no optimizer: the sum


def test_abort_ends_the_waits_of_its_windows_only(server):
    got = {}
    waiter = threading.Thread(target=lambda: got.update(p=server.wait_done(0, window=3)))
    waiter.start()
    server.abort(2)  # an older window
    waiter.join(0.2)
    assert waiter.is_alive()
    server.abort(3)
    waiter.join(5)
    assert got["p"] is None
    assert server.wait_done(5, window=1) is None  # aborted before it began


def test_metrics_count_once_per_slice_and_are_handed_over_once(server):
    server.push(0, 0, grad(1.0), 2, metric={"n": 1})
    server.push(0, 0, grad(9.0), 2, metric={"n": 99})  # a recomputed duplicate: ignored
    server.push(0, 1, grad(1.0), 2, metric={"n": 2})
    server.push(1, 0, grad(1.0), 2, metric={"n": 3})
    before = time.time()
    taken = server.take_metrics(5)  # step 1 is unfinished
    assert list(taken) == [0] and taken[0]["parts"] == [{"n": 1}, {"n": 2}]
    assert server.take_metrics(0) == {}
    server.push(1, 1, grad(1.0), 2, metric={"n": 4})
    taken = server.take_metrics(5)
    assert list(taken) == [1] and taken[1]["parts"] == [{"n": 3}, {"n": 4}]
    # when the step completed (the batch-end callbacks' clock)
    assert before <= taken[1]["done_at"] <= time.time()


def test_a_finished_step_folds_its_slices_into_one_metric_state(server):
    import raymod as rm
    metric = rm.metric.Accuracy()
    server.set_metric(metric)
    states = []
    for k, (label, pred) in enumerate([([1.0, 0.0], [[0.2, 0.8], [0.9, 0.1]]),
                                       ([1.0, 1.0], [[0.7, 0.3], [0.1, 0.9]])]):
        metric.reset()
        metric.update([np.array(label)], [np.array(pred)])
        states.append(metric.state())
        server.push(0, k, grad(1.0), 2, metric=states[-1])
    (folded,) = server.take_metrics(0).values()
    whole = rm.metric.Accuracy()
    whole.merge(folded["merged"])
    assert whole.get() == ("accuracy", 0.75) and whole.num_inst == 4


def test_the_values_after_the_last_two_steps_stay_readable(server):
    for step, value in enumerate([1.0, 2.0, 3.0]):
        server.push(step, 0, grad(value), 1)
    assert server.missing(1, [0]) == []  # a finished step lacks nothing
    np.testing.assert_array_equal(values_of(server, server.published_after(2)), 3.0)
    np.testing.assert_array_equal(values_of(server, server.published_after(1)), 2.0)
    with pytest.raises(RuntimeError, match="after step 0 are gone"):
        server.published_after(0)


def test_metric_states_cross_the_doorbell_as_json():
    state = {"metric": "F1", "local": {"tp": np.int64(3), "hist": np.arange(3.0)},
             "global": [1, 2.5], "step": None}
    back = from_json(json.loads(json.dumps(to_json(state))))
    assert back["local"]["tp"] == 3 and back["global"] == [1, 2.5] and back["step"] is None
    np.testing.assert_array_equal(back["local"]["hist"], np.arange(3.0))
    assert back["local"]["hist"].dtype == np.float64


def test_doorbell_messages_encode_numpy_values_as_to_json_does():
    """The doorbell encodes numpy values as it goes (no walk over the message first); the
    bytes are to_json's, and keys JSON cannot take fall back to that walk."""
    from raymod.kvstore.doorbell import _dumps
    for message in ({"step": 3, "metric": {"tp": np.int64(3), "hist": np.arange(3.0),
                                           "pair": (np.float32(0.5), 2)}},
                    {"metric": {(1, 2): np.arange(2)}}):
        assert _dumps(message) == json.dumps(to_json(message)).encode()


def test_a_push_through_the_doorbell_can_wait_for_its_step(server):
    """One message pushes a slice and returns once the step finished (or its window was
    aborted); the server's single doorbell thread parks it meanwhile and serves others."""
    from raymod.kvstore import shm
    from raymod.kvstore.doorbell import Doorbell
    if server.doorbell() is None:
        pytest.skip("no shared memory here")
    boxes = [shm.SharedBlock.create({"<f4": 4}) for _ in range(3)]
    for k, box in enumerate(boxes):
        box.arrays["<f4"][:] = k + 1.0
    bells = [Doorbell(server.doorbell()) for _ in boxes]

    def push(k, step, wait=True, window=1, timeout=None):
        message = {"step": step, "slice": k, "num_slices": 2, "block": boxes[k].handle.name,
                   "sizes": [list(x) for x in boxes[k].handle.sizes],
                   "metric": {"hist": np.arange(2.0)}}  # encoded by the doorbell
        if wait:
            message.update(wait=step, window=window, timeout=timeout)
        bells[k].send(message)

    push(0, 0)
    bells[2].send({"wait": 0, "window": 1})  # a plain wait on another connection
    bells[2].send({"wait": 0, "window": 1})  # queued behind it, answered after it
    push(1, 0)  # finishes step 0: every parked message is answered
    for bell in (bells[0], bells[1], bells[2], bells[2]):
        reply = bell.receive()
        assert reply["published"]["version"] == server.version
    assert server.take_metrics(0)[0]["parts"][1]["hist"].tolist() == [0.0, 1.0]
    push(0, 1, window=7)
    server.abort(7)  # from another thread (a Ray call): the parked push-and-wait ends
    assert bells[0].receive() == {"aborted": True}
    assert server.missing(1, [0, 1]) == [1]  # its push was taken all the same
    push(1, 1, wait=False)
    assert "published" in bells[1].receive()
    push(0, 5, window=8, timeout=0.2)  # nobody finishes step 5: the wait times out
    assert bells[0].receive() == {"aborted": True}
    for bell in bells:
        bell.close()
    for box in boxes:
        box.unlink()
