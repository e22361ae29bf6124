"""The Ray-backed dist kvstore: MXNet's KVStore behaviours, sharding, the step protocol."""
import numpy as np
import pytest

import raymod as rm
from raymod import optimizer as opt
from raymod.base import MXNetError
from raymod.kvstore.client import ShardClient
from raymod.kvstore.dist import DistKVStore
from raymod.kvstore.server import Published, ServerLost

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


@pytest.fixture(params=[1, 2], ids=["1server", "2servers"])
def store(request, monkeypatch):
    monkeypatch.setattr("raymod.kvstore.layout.BIG_ARRAY_BOUND", 10)
    kv = DistKVStore("dist_sync", num_servers=request.param)
    kv.layout.big_array_bound = 10  # split anything above 10 elements over the shards
    return kv


def test_create_by_name_gives_each_type():
    for name in ("dist_sync", "dist_async", "dist_device_sync"):
        kv = rm.kv.create(name)
        assert isinstance(kv, DistKVStore) and kv.type == name and kv.rank == 0


def test_init_pull_and_pushed_list_is_summed(store):
    store.init([3, 5], [np.ones((2, 3)), np.arange(40, dtype=np.float32).reshape(5, 8)])
    out = np.zeros((5, 8), np.float32)
    store.pull(5, out=out)
    np.testing.assert_array_equal(out, np.arange(40).reshape(5, 8))
    store.push(3, [np.ones((2, 3)) * 4] * 4)
    outs = [np.zeros((2, 3)), np.zeros((2, 3))]
    store.pull(3, out=outs)
    assert all((o == 16).all() for o in outs)
    store.push(3, [np.ones((2, 3)) * 4] * 4)  # no updater: a push replaces, not adds
    store.pull(3, out=outs[0])
    assert (outs[0] == 16).all()


def test_big_key_is_split_over_every_shard(store):
    value = np.random.default_rng(0).standard_normal((7, 9)).astype(np.float32)
    store.init("w", value)
    shards = {s for s, _ in store.layout.pieces_of("w")}
    assert shards == set(range(len(store.servers)))
    out = np.zeros_like(value)
    store.pull("w", out=out)
    np.testing.assert_array_equal(out, value)


def test_int_and_str_keys_do_not_mix(store):
    store.init(1, np.zeros(2))
    with pytest.raises(MXNetError, match="str"):
        store.init("a", np.zeros(2))
    with pytest.raises(MXNetError, match="not been initialized"):
        store.push(9, np.zeros(2))


def test_custom_updater_runs_on_the_servers(store):
    store.init("k", np.ones(30))

    def add(key, received, stored):
        stored += received

    store._set_updater(add)
    for _ in range(4):
        store.push("k", [np.ones(30)] * 4)
    out = np.zeros(30)
    store.pull("k", out=out)
    assert (out == 17).all()


def test_server_optimizer_equals_the_local_store(store):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    local = rm.kv.create("local")
    for kv in (store, local):
        kv.init("w", w0)
        kv.set_optimizer(opt.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01))
        for g in grads:
            kv.push("w", [g, g * 0.5])
    a, b = np.zeros_like(w0), np.zeros_like(w0)
    store.pull("w", out=a)
    local.pull("w", out=b)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_optimizer_states_join_to_the_local_format_and_load_back(store, tmp_path):
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((4, 6)).astype(np.float32)
    local = rm.kv.create("local")
    for kv in (store, local):
        kv.init("w", w0)
        kv.set_optimizer(opt.create("adam", learning_rate=0.01))
        kv.push("w", np.ones_like(w0))
    store.save_optimizer_states(str(tmp_path / "dist.states"))
    local.save_optimizer_states(str(tmp_path / "local.states"))
    a, b = opt.Updater(opt.create("adam")), opt.Updater(opt.create("adam"))
    a.set_states((tmp_path / "dist.states").read_bytes())
    b.set_states((tmp_path / "local.states").read_bytes())
    for sa, sb in zip(a.states["w"], b.states["w"]):
        np.testing.assert_allclose(sa, sb, rtol=1e-6)
    # a local store's file loads onto the servers; the next update then matches
    store.load_optimizer_states(str(tmp_path / "local.states"))
    g = rng.standard_normal(w0.shape).astype(np.float32)
    store.push("w", g)
    local.push("w", g)
    x, y = np.zeros_like(w0), np.zeros_like(w0)
    store.pull("w", out=x)
    local.pull("w", out=y)
    np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_two_bit_compression_keeps_a_residual():
    kv = DistKVStore("dist_sync")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init("g", np.zeros(4, np.float32))
    kv.push("g", np.full(4, 0.3, np.float32))  # below threshold: nothing sent yet
    out = np.zeros(4, np.float32)
    kv.pull("g", out=out)
    assert (out == 0).all()
    kv.push("g", np.full(4, 0.3, np.float32))  # residual 0.6 crosses it: +threshold sent
    kv.pull("g", out=out)
    np.testing.assert_array_equal(out, 0.5)


@pytest.mark.parametrize("shared_memory", [True, False], ids=["shm", "object_store"])
def test_step_pushes_count_each_slice_once(shared_memory):
    import ray
    kv = DistKVStore("dist_sync", shared_memory=shared_memory)
    kv.init("w", np.zeros(3, np.float32))
    server = kv.servers[0]
    (piece,) = [p for _, p in kv.layout.pieces_of("w")]
    payload = {piece.dtype: np.ones(3, np.float32)}
    assert ray.get(server.push.remote(0, 0, payload)) is True
    assert ray.get(server.push.remote(0, 0, payload)) is False  # a recomputed slice: ignored
    assert kv.missing_slices(0, [0, 1]) == [1]
    done = ray.get(server.push.remote(0, 1, {piece.dtype: np.full(3, 2, np.float32)}, 2))
    assert isinstance(done, list)  # the completing push gets the published values back
    assert isinstance(done[0], Published) == shared_memory
    got = {}
    ShardClient(kv.layout, kv.servers).read(done, lambda shard, values: got.update(values))
    np.testing.assert_array_equal(got[piece.dtype], 3)  # replaced by the sum
    assert ray.get(server.push.remote(0, 1, payload, 2)) is False  # step already applied
    kv.close()


def test_client_pushes_through_shared_memory_and_sums_in_slice_order():
    kv = DistKVStore("dist_sync", num_servers=2)
    kv.layout.big_array_bound = 4
    kv.init(["a", "b"], [np.zeros(10, np.float32), np.zeros(3, np.float64)])
    client = ShardClient(kv.layout, kv.servers)
    assert client.local == [True, True]  # this process shares the servers' machine
    rng = np.random.default_rng(0)
    slices = [{"a": rng.standard_normal(10).astype(np.float32), "b": rng.standard_normal(3)}
              for _ in range(3)]
    published = {}
    for slice_id in (2, 0, 1):  # out of order, one outbox block per push of the step
        published.update(client.push(7, slice_id, slices[slice_id], 3))
    assert sorted(published) == [0, 1] and len(client.outboxes[0]) == 3
    got = {"a": np.zeros(10, np.float32), "b": np.zeros(3)}
    client.read([published[0], published[1]],
                lambda shard, values: kv.layout.unpack(shard, values, got))
    for key in got:  # (s0 + s1) + s2 exactly, whatever the arrival order
        np.testing.assert_array_equal(got[key], (slices[0][key] + slices[1][key]) +
                                      slices[2][key])
    client.push(8, 0, slices[0], 1)  # the next step reuses the first block
    assert len(client.outboxes[0]) == 3
    stale = Published(published[0].handle, published[0].version)
    got = {"a": np.zeros(10, np.float32), "b": np.zeros(3)}  # step 7's values are still there
    client.read([stale, published[1]], lambda shard, values: kv.layout.unpack(shard, values, got))
    np.testing.assert_array_equal(got["b"], (slices[0]["b"] + slices[1]["b"]) + slices[2]["b"])
    client.push(9, 0, slices[0], 1)  # the server writes step 9 over step 7's block
    with pytest.raises(ServerLost, match="not the published"):  # the server moved on
        client.read([stale, published[1]], lambda shard, values: None)
    client.close()
    kv.close()


def test_full_shared_memory_falls_back_to_the_object_store(monkeypatch):
    import errno

    def no_space(sizes):
        raise OSError(errno.ENOSPC, "No space left on device")

    kv = DistKVStore("dist_sync")
    kv.init("w", np.zeros(5, np.float32))
    client = ShardClient(kv.layout, kv.servers)
    assert client.local == [True]
    monkeypatch.setattr("raymod.kvstore.shm.SharedBlock.create", no_space)  # this process
    slices = [np.arange(5, dtype=np.float32), np.full(5, 2, np.float32)]
    published = {}
    for slice_id, grad in enumerate(slices):
        published.update(client.push(0, slice_id, {"w": grad}, 2))
    assert client.local == [False]  # this shard's pushes now go by value
    got = {"w": np.zeros(5, np.float32)}
    client.read([published[0]], lambda shard, values: kv.layout.unpack(shard, values, got))
    np.testing.assert_array_equal(got["w"], slices[0] + slices[1])
    kv.close()


def test_server_without_shared_memory_publishes_through_the_object_store(monkeypatch):
    import errno

    import ray
    from raymod.kvstore.layout import ShardLayout
    from raymod.kvstore.server import KVServer

    def no_space(sizes):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("raymod.kvstore.shm.SharedBlock.create", no_space)
    layout = ShardLayout(1)
    pieces = [p for _, p in layout.add("w", (4,), np.float32)]
    server = KVServer(0, "sync")  # in this process: the same code as the actor
    server.add(pieces, layout.pack(0, {"w": np.ones(4, np.float32)}))
    assert server.block is None and server.block_handle() is None
    (ref,) = server.push(0, 0, {"<f4": np.full(4, 3, np.float32)}, 1)
    np.testing.assert_array_equal(ray.get(ref)["<f4"], 3)
