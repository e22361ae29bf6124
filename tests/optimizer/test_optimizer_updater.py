"""Updater: lazy states, in-place updates, and the pickle-free state round trip."""
import io
import json

import numpy as np
import pytest

from raymod import context, lr_scheduler
from raymod import optimizer as opt


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    return {0: rng.uniform(-1, 1, (4, 3)).astype(np.float32),
            1: rng.uniform(-1, 1, (3,)).astype(np.float32),
            "fc_extra": rng.uniform(-1, 1, (2, 2)).astype(np.float64)}


def _grads(step, weights):
    rng = np.random.default_rng(100 + step)
    return {k: rng.uniform(-1, 1, w.shape).astype(w.dtype) for k, w in weights.items()}


def _run(updater, weights, steps):
    for s in steps:
        for k, g in _grads(s, weights).items():
            updater(k, g, weights[k])


def test_states_are_created_lazily_and_weights_change_in_place():
    weights = _weights()
    originals = {k: w for k, w in weights.items()}
    updater = opt.get_updater(opt.Adam())
    assert updater.states == {}
    updater(0, np.ones((4, 3), np.float32), weights[0])
    assert list(updater.states) == [0]
    m, v = updater.states[0]
    _run(updater, weights, [1])
    assert updater.states[0][0] is m and updater.states[0][1] is v
    assert all(weights[k] is originals[k] for k in weights)
    assert updater.optimizer._index_update_count[0] == 2


def test_list_call_matches_single_calls():
    wa, wb = _weights(), _weights()
    ua = opt.get_updater(opt.RMSProp(centered=True))
    ub = opt.get_updater(opt.RMSProp(centered=True))
    grads = _grads(0, wa)
    keys = list(wa)
    ua(keys, [grads[k] for k in keys], [wa[k] for k in keys])
    for k in keys:
        ub(k, grads[k], wb[k])
    for k in keys:
        np.testing.assert_array_equal(wa[k], wb[k])


@pytest.mark.filterwarnings("ignore:updating float16")  # the non-multi_precision cases
@pytest.mark.parametrize("name,kwargs", [
    ("adam", dict(wd=0.01)),
    ("sgd", dict(momentum=0.9, multi_precision=True)),
    ("rmsprop", dict(centered=True)),
    ("nadam", {}),
    ("ftml", {}),
    ("sgd", {}),  # states are None
])
def test_state_round_trip_gives_identical_next_update(name, kwargs):
    weights = _weights()
    weights["half"] = np.linspace(-1, 1, 6, dtype=np.float16)
    original = opt.get_updater(opt.create(name, **kwargs))
    _run(original, weights, [0, 1])
    blob = original.get_states()
    assert isinstance(blob, bytes)

    restored_weights = {k: w.copy() for k, w in weights.items()}
    restored = opt.get_updater(opt.create(name, **kwargs))
    restored.set_states(blob)
    assert set(restored.states) == set(original.states)
    assert restored.optimizer._index_update_count == original.optimizer._index_update_count

    _run(original, weights, [2])
    _run(restored, restored_weights, [2])
    for k in weights:
        np.testing.assert_array_equal(restored_weights[k], weights[k])
    assert restored.optimizer.num_update == original.optimizer.num_update == 3


def test_nested_state_structure_survives():
    updater = opt.get_updater(opt.SGD(momentum=0.9, multi_precision=True))
    w = np.ones(3, np.float16)
    updater(0, np.ones(3, np.float16), w)
    restored = opt.get_updater(opt.SGD(momentum=0.9, multi_precision=True))
    restored.set_states(updater.get_states())
    master, mom = restored.states[0]
    assert master.dtype == np.float32 and mom.dtype == np.float32
    np.testing.assert_array_equal(master, updater.states[0][0])
    np.testing.assert_array_equal(mom, updater.states[0][1])
    assert restored.states_synced == {0: False}
    restored(0, np.ones(3, np.float16), w.copy())
    assert restored.states_synced == {0: True}


def test_dump_optimizer_recreates_it():
    sched = lr_scheduler.MultiFactorScheduler(step=[2, 4], factor=0.5, base_lr=0.3)
    adam = opt.Adam(beta1=0.8, wd=0.02, clip_gradient=0.5, lr_scheduler=sched,
                    param_idx2name={0: "fc_weight", 1: "fc_bias"})
    adam.set_lr_mult({"fc_weight": 0.5})
    original = opt.get_updater(adam)
    weights = _weights()
    _run(original, weights, [0, 1, 2])
    blob = original.get_states(dump_optimizer=True)

    restored = opt.get_updater(opt.SGD())
    restored.set_states(blob)
    new = restored.optimizer
    assert type(new) is opt.Adam and new is not adam
    assert (new.beta1, new.wd, new.clip_gradient) == (0.8, 0.02, 0.5)
    assert new.idx2name == adam.idx2name
    assert new.lr_mult == {"fc_weight": 0.5} and new.wd_mult == {"fc_bias": 0.0}
    assert isinstance(new.lr_scheduler, lr_scheduler.MultiFactorScheduler)
    assert new.lr_scheduler.get_config() == sched.get_config()
    assert new.learning_rate == adam.learning_rate == 0.3 * 0.5

    restored_weights = {k: w.copy() for k, w in weights.items()}
    _run(original, weights, [3, 4])
    _run(restored, restored_weights, [3, 4])
    for k in weights:
        np.testing.assert_array_equal(restored_weights[k], weights[k])


def test_saved_bytes_are_a_plain_npz_without_pickle():
    updater = opt.get_updater(opt.Adam())
    updater(0, np.ones(2, np.float32), np.zeros(2, np.float32))
    with np.load(io.BytesIO(updater.get_states(dump_optimizer=True)), allow_pickle=False) as npz:
        meta = json.loads(npz["__meta__"].tobytes())
        assert all(npz[f].dtype != object for f in npz.files)
    assert meta["optimizer"]["name"] == "adam"
    assert meta["states"] == [[0, {"tuple": [{"array": "a0"}, {"array": "a1"}]}]]
    assert meta["update_counts"] == [[0, [[0, 1]]]]


def test_bad_state_bytes():
    updater = opt.get_updater(opt.SGD())
    with pytest.raises(ValueError, match="get_states"):
        updater.set_states(b"not an archive")
    buf = io.BytesIO()
    np.savez(buf, x=np.zeros(2))
    with pytest.raises(ValueError):
        updater.set_states(buf.getvalue())


def test_unsavable_things_fail_clearly():
    class Unregistered(opt.SGD):
        pass

    updater = opt.get_updater(Unregistered())
    updater(0, np.ones(2), np.zeros(2))
    updater.get_states()  # states alone are fine
    with pytest.raises(ValueError, match="not registered"):
        updater.get_states(dump_optimizer=True)
    updater = opt.get_updater(opt.SGD())
    updater.states[(1, 2)] = None
    with pytest.raises(TypeError, match="int or a str"):
        updater.get_states()


def test_updater_rejects_non_optimizer():
    with pytest.raises(TypeError):
        opt.get_updater("sgd")


@pytest.mark.gpu
def test_cupy_weights_update_and_round_trip():
    if not context.gpu_available():
        pytest.skip("needs CuPy and a CUDA device")
    import cupy

    rng = np.random.default_rng(0)
    w_host = rng.uniform(-1, 1, (8, 5)).astype(np.float32)
    grads = [rng.uniform(-1, 1, (8, 5)).astype(np.float32) for _ in range(3)]
    cpu_w, gpu_w = w_host.copy(), cupy.asarray(w_host)
    cpu_u = opt.get_updater(opt.Adam(wd=0.01, clip_gradient=0.4))
    gpu_u = opt.get_updater(opt.Adam(wd=0.01, clip_gradient=0.4))
    for g in grads[:2]:
        cpu_u(0, g, cpu_w)
        gpu_u(0, cupy.asarray(g), gpu_w)
    assert isinstance(gpu_u.states[0][0], cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(gpu_w), cpu_w, rtol=1e-5, atol=1e-6)

    restored = opt.get_updater(opt.Adam(wd=0.01, clip_gradient=0.4))
    restored.set_states(gpu_u.get_states())
    gpu_w2 = gpu_w.copy()
    restored(0, cupy.asarray(grads[2]), gpu_w2)
    gpu_u(0, cupy.asarray(grads[2]), gpu_w)
    assert isinstance(restored.states[0][0], cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(gpu_w2), cupy.asnumpy(gpu_w))
