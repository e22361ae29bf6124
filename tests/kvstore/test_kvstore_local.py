"""The in-process stores ('local', 'device' and MXNet's aliases): spec section 6, dense arrays."""
import numpy as np
import pytest

from raymod import kvstore as kv
from raymod import optimizer as opt
from raymod.base import MXNetError
from raymod.kvstore import base as kv_base

SHAPE = (4, 4)
KEYS = [5, 7, 11]
STR_KEYS = ["b", "c", "d"]
ALL_TYPES = ["local", "local_update_cpu", "local_allreduce_cpu", "device",
             "local_allreduce_device"]


def _ones(scale=1.0, shape=SHAPE):
    return np.full(shape, scale, np.float32)


def _pulled(store, key, shape=SHAPE):
    out = np.empty(shape, np.float32)
    store.pull(key, out=out)
    return out


@pytest.fixture(params=["local", "device"])
def store(request):
    return kv.create(request.param)


# ---- create, types, registry -----------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_TYPES)
def test_type_is_the_name_given(name):
    store = kv.create(name)
    assert store.type == name
    assert isinstance(store, kv.KVStore) and isinstance(store, kv.KVStoreBase)
    assert (store.rank, store.num_workers) == (0, 1)
    store.barrier()
    store._barrier()


def test_create_defaults_to_local_and_ignores_case():
    assert kv.create().type == "local"
    assert kv.create("Device").type == "device"


def test_unknown_type_lists_known_types():
    with pytest.raises(ValueError, match="local_allreduce_device.*local_update_cpu"):
        kv.create("nope")
    with pytest.raises(TypeError):
        kv.create(3)


def test_a_later_module_can_register_dist_types(monkeypatch):
    class FakeDist(kv.KVStoreBase):
        def __init__(self, mode):
            self.mode = mode

        @classmethod
        def _from_name(cls, name):
            return cls(name)

    import raymod.kvstore.dist  # noqa: F401  (the built-in dist types, to be overridden)

    monkeypatch.setattr(kv_base._REGISTRY, "_classes", dict(kv_base._REGISTRY._classes))
    for name in ("dist_sync", "dist_async", "dist_device_sync"):
        with pytest.warns(UserWarning, match=f"'{name}' is being overridden"):
            kv.register(FakeDist, name=name)
    assert kv.create("dist_async").mode == "dist_async"
    assert kv.create("DIST_SYNC").mode == "dist_sync"


def test_custom_store_registers_by_class_name(monkeypatch):
    monkeypatch.setattr(kv_base._REGISTRY, "_classes", dict(kv_base._REGISTRY._classes))

    @kv.KVStoreBase.register
    class TestStore(kv.KVStoreBase):
        def broadcast(self, key, value, out, priority=0):
            for o in (out if isinstance(out, list) else [out]):
                o[...] = value

        def is_capable(self, capability):
            return False

    store = kv.create("teststore")
    assert isinstance(store, TestStore) and store.is_capable(kv.KVStoreBase.OPTIMIZER) is False
    outs = [np.zeros(3), np.zeros(3)]
    store.broadcast(3, np.ones(3), outs)
    assert all((o == 1).all() for o in outs)
    with pytest.raises(NotImplementedError):
        store.set_optimizer(opt.SGD())
    with pytest.raises(NotImplementedError):
        store.save_optimizer_states("x")
    with pytest.raises(NotImplementedError):
        store.load_optimizer_states("x")
    with pytest.raises(TypeError):
        kv.register(int)


def test_is_capable():
    store = kv.create()
    assert store.is_capable(kv.KVStoreBase.OPTIMIZER) and store.is_capable("Optimizer")
    with pytest.raises(ValueError, match="capability"):
        store.is_capable("teleport")


# ---- init, push, pull ------------------------------------------------------------------------

@pytest.mark.parametrize("keys", [KEYS, STR_KEYS])
def test_init_then_pull_single_and_list(store, keys):
    store.init(keys[0], _ones(2))
    store.init(keys[1:], [_ones(3), _ones(4)])
    assert (_pulled(store, keys[0]) == 2).all()
    outs = [np.zeros(SHAPE, np.float32) for _ in keys[1:]]
    store.pull(keys[1:], out=outs)
    assert (outs[0] == 3).all() and (outs[1] == 4).all()


def test_init_keeps_a_copy(store):
    value = _ones(1)
    store.init(3, value)
    value[...] = 99
    assert (_pulled(store, 3) == 1).all()


@pytest.mark.parametrize("keys", [KEYS, STR_KEYS])
def test_push_of_a_list_stores_the_sum_and_pull_fills_every_output(store, keys):
    store.init(keys, [_ones() for _ in keys])
    store.push(keys[0], [_ones(i + 1) for i in range(4)])
    outs = [np.zeros(SHAPE, np.float32) for _ in range(3)]
    store.pull(keys[0], out=outs)
    assert all((o == 10).all() for o in outs)
    store.push(keys, [[_ones()] * 4 for _ in keys])
    outs = [[np.zeros(SHAPE, np.float32) for _ in range(2)] for _ in keys]
    store.pull(keys, out=outs)
    assert all((o == 4).all() for row in outs for o in row)


def test_push_without_updater_replaces(store):
    store.init(3, _ones(0))
    for _ in range(2):
        store.push(3, [_ones()] * 4)
    assert (_pulled(store, 3) == 4).all()


def test_device_store_init_then_push_replaces():
    store = kv.create("device")
    store.init(3, _ones(10))
    store.push(3, _ones(1))
    assert (_pulled(store, 3) == 1).all()


def test_push_does_not_alias_the_pushed_array(store):
    store.init(3, _ones(0))
    grad = _ones(2)
    store.push(3, grad)
    grad[...] = 7
    assert (_pulled(store, 3) == 2).all()


def test_pull_casts_to_the_output_dtype(store):
    store.init("w", _ones(1.5))
    out = np.zeros(SHAPE, np.float64)
    store.pull("w", out=out)
    assert out.dtype == np.float64 and (out == 1.5).all()


def test_errors_for_bad_use(store):
    store.init(3, _ones())
    with pytest.raises(MXNetError, match="already initialized"):
        store.init(3, _ones())
    with pytest.raises(MXNetError, match="one value per key"):
        store.init(4, [_ones(), _ones()])
    with pytest.raises(MXNetError, match="not been initialized"):
        store.push(9, _ones())
    with pytest.raises(MXNetError, match="not been initialized"):
        store.pull(9, out=_ones())
    with pytest.raises(MXNetError, match="shape"):
        store.push(3, np.ones((2, 2), np.float32))
    with pytest.raises(MXNetError, match="shape"):
        store.pull(3, out=np.ones((1,), np.float32))
    with pytest.raises(ValueError, match="out="):
        store.pull(3)
    with pytest.raises(ValueError, match="2 keys need"):
        store.push([3, 4], _ones())
    with pytest.raises(TypeError, match="int or str"):
        store.push(3.5, _ones())
    with pytest.raises(TypeError, match="array"):
        store.push(3, 1.0)


@pytest.mark.parametrize("first,second", [(3, "a"), ("a", 3)])
@pytest.mark.parametrize("op", ["init", "push", "pull", "row_sparse_pull"])
def test_int_and_str_keys_cannot_mix(store, first, second, op):
    store.init(first, _ones())
    call = {"init": lambda: store.init(second, _ones()),
            "push": lambda: store.push(second, _ones()),
            "pull": lambda: store.pull(second, out=_ones()),
            "row_sparse_pull": lambda: store.row_sparse_pull(second, out=_ones(),
                                                             row_ids=np.arange(2))}[op]
    with pytest.raises(MXNetError, match=r"int and str keys.*(int|str) keys, got (str|int)"):
        call()


def test_mixed_keys_in_one_call():
    with pytest.raises(MXNetError, match="cannot mix"):
        kv.create().init([3, "a"], [_ones(), _ones()])


def test_row_sparse_pull_refuses_a_dense_out(store):
    store.init(3, _ones())
    with pytest.raises(TypeError, match="out for key 3 must be a row_sparse array"):
        store.row_sparse_pull(3, out=_ones(), row_ids=np.arange(2))


# ---- updaters --------------------------------------------------------------------------------

@pytest.mark.parametrize("keys", [KEYS, STR_KEYS])
def test_custom_updater_runs_in_place_with_the_store_key(store, keys):
    seen = []

    def update(key, recv, stored):
        seen.append(key)
        stored += recv

    store._set_updater(update)
    store.init(keys, [_ones(0) for _ in keys])
    for _ in range(4):
        store.push(keys, [[_ones()] * 4 for _ in keys])
    outs = [np.zeros(SHAPE, np.float32) for _ in keys]
    store.pull(keys, out=outs)
    assert all((o == 16).all() for o in outs)
    assert seen == keys * 4 and all(type(k) is type(keys[0]) for k in seen)


def test_one_pushed_value_reaches_the_updater_without_a_copy():
    store = kv.create()
    got = []
    store._set_updater(lambda key, recv, stored: got.append(recv))
    store.init(0, _ones())
    grad = _ones(2)
    store.push(0, grad)
    assert got[0] is grad
    with pytest.raises(TypeError):
        store._set_updater(3)


def test_set_optimizer_matches_an_updater_run_by_hand(store, rng):
    weights = [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2)]
    grads = [[rng.standard_normal(SHAPE).astype(np.float32) for _ in range(3)] for _ in range(4)]
    sgd = dict(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5)
    store.set_optimizer(opt.SGD(**sgd))
    assert isinstance(store.get_optimizer(), opt.SGD)
    store.init([0, 1], weights)
    by_hand = opt.get_updater(opt.SGD(**sgd))
    expected = [w.copy() for w in weights]
    for step in grads:
        store.push([0, 1], [step, step[::-1]])
        by_hand(0, step[0] + step[1] + step[2], expected[0])
        by_hand(1, step[2] + step[1] + step[0], expected[1])
    for i in range(2):
        np.testing.assert_allclose(_pulled(store, i), expected[i], rtol=1e-6, atol=1e-7)
    assert (weights[0] != expected[0]).any()   # init copied: the caller's arrays untouched


# ---- pushpull and broadcast ------------------------------------------------------------------

def test_pushpull_writes_the_sum_in_place_or_to_out(store):
    store.init([3, 4], [_ones(0), _ones(0)])
    values = [_ones(i + 1) for i in range(4)]
    store.pushpull(3, values)
    assert all((v == 10).all() for v in values)
    outs = [np.zeros(SHAPE, np.float32) for _ in range(2)]
    store.pushpull(4, [_ones(2)] * 3, out=outs)
    assert all((o == 6).all() for o in outs)
    values = [[_ones(1)] * 2, [_ones(3)] * 2]
    store.pushpull([3, 4], values)
    assert (values[0][0] == 2).all() and (values[1][1] == 6).all()


def test_pushpull_with_optimizer_returns_updated_weights(store):
    store.set_optimizer(opt.Test(rescale_grad=0.5))
    store.init("w", _ones(1))
    grads = [_ones(2), _ones(2)]
    store.pushpull("w", grads)
    assert all((g == 3).all() for g in grads)   # 1 + 0.5 * (2 + 2)


def test_broadcast_single_list_and_list_of_lists(store):
    out = np.zeros(SHAPE, np.float32)
    store.broadcast(3, _ones(5), out)
    assert (out == 5).all()
    outs = [np.zeros(SHAPE, np.float32) for _ in range(3)]
    store.broadcast(4, _ones(6), outs)
    assert all((o == 6).all() for o in outs)
    outs = [[np.zeros(SHAPE, np.float32) for _ in range(2)] for _ in range(2)]
    store.broadcast([5, 6], [_ones(7), _ones(8)], outs)
    assert (outs[0][1] == 7).all() and (outs[1][0] == 8).all()


# ---- optimizer states ------------------------------------------------------------------------

def _stepped(store, grads, keys):
    for g in grads:
        store.push(keys, [[x, x * 0.5] for x in g])


def test_save_load_optimizer_states_continue_the_same_trajectory(tmp_path, rng):
    keys = ["fc_weight", "fc_bias"]
    shapes = [(3, 4), (3,)]
    init = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(6)]
    make = lambda: opt.Adam(learning_rate=0.01, wd=0.1, param_idx2name={0: "fc_weight"})

    ref = kv.create("device")
    ref.set_optimizer(make())
    ref.init(keys, init)
    _stepped(ref, grads[:3], keys)
    ref.save_optimizer_states(str(tmp_path / "s.states"))
    middle = [_pulled(ref, k, s) for k, s in zip(keys, shapes)]
    _stepped(ref, grads[3:], keys)

    resumed = kv.create("local")
    resumed.set_optimizer(make())
    resumed.init(keys, middle)
    resumed.load_optimizer_states(str(tmp_path / "s.states"))
    _stepped(resumed, grads[3:], keys)
    for k, s in zip(keys, shapes):
        np.testing.assert_array_equal(_pulled(resumed, k, s), _pulled(ref, k, s))
    assert resumed.get_optimizer().num_update == ref.get_optimizer().num_update == 6


def test_dump_optimizer_restores_the_optimizer(tmp_path):
    store = kv.create()
    store.set_optimizer(opt.SGD(learning_rate=0.25, momentum=0.5))
    store.init(0, _ones())
    store.push(0, _ones())
    store.save_optimizer_states(str(tmp_path / "s"), dump_optimizer=True)
    other = kv.create()
    other.set_optimizer(opt.Adam())
    other.load_optimizer_states(str(tmp_path / "s"))
    loaded = other.get_optimizer()
    assert isinstance(loaded, opt.SGD) and loaded.lr == 0.25 and loaded.momentum == 0.5


def test_optimizer_states_need_an_optimizer(tmp_path):
    store = kv.create()
    assert store.get_optimizer() is None
    with pytest.raises(MXNetError, match="set_optimizer"):
        store.save_optimizer_states(str(tmp_path / "s"))
    store._set_updater(lambda k, r, s: None)
    with pytest.raises(MXNetError, match="get_states"):
        store.load_optimizer_states(str(tmp_path / "s"))


# ---- devices ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["local", "device"])
def test_values_on_any_device(ctx, name):
    xp = ctx.xp
    store = kv.create(name)
    store.init(0, xp.ones(SHAPE, np.float32))
    store.push(0, [xp.ones(SHAPE, np.float32), np.ones(SHAPE, np.float32)])
    outs = [xp.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float64)]
    store.pull(0, out=outs)
    assert all((np.asarray(getattr(o, "get", lambda: o)()) == 2).all() for o in outs)
    store.set_optimizer(opt.Test())
    store.pushpull(0, [xp.ones(SHAPE, np.float32)] * 2, out=outs)
    assert all((np.asarray(getattr(o, "get", lambda: o)()) == 4).all() for o in outs)
