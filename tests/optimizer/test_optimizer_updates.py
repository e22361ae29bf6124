"""Each optimizer's update against a numpy reference written from the spec's formulas.

References are pure functions ``(w, g, state, t, lr, wd, hp) -> (new_w, new_state)`` that never
touch their inputs; the optimizer under test must match them over several consecutive steps,
updating the very same weight and state arrays in place.
"""
import itertools
import math
import warnings

import numpy as np
import pytest

import raymod.random
from raymod import lr_scheduler
from raymod import optimizer as opt

SHAPE = (3, 4, 5)
STEPS = 3
GRID = list(itertools.product([None, 0.4], [1.0, 0.14], [0.0, 0.03]))  # clip, rescale, wd
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-11, atol=1e-13)}


def _clip(x, c):
    return x if c is None else np.clip(x, -c, c)


def _gp(g, hp):
    return _clip(hp["rescale_grad"] * g, hp["clip_gradient"])


def _gg(w, g, wd, hp):
    """Weight decay inside the clip."""
    return _clip(hp["rescale_grad"] * g + wd * w, hp["clip_gradient"])


# ---- references -------------------------------------------------------------------------

def ref_sgd(w, g, s, t, lr, wd, hp):
    gp = _gp(g, hp)
    if hp["momentum"] == 0:
        return (1 - lr * wd) * w - lr * gp, None
    m = hp["momentum"] * s - lr * wd * w - lr * gp
    return w + m, m


def ref_nag(w, g, s, t, lr, wd, hp):
    gg = _gp(g, hp) + wd * w
    mu = hp["momentum"]
    if mu == 0:
        return w - lr * gg, None
    return w + mu * mu * s - lr * (1 + mu) * gg, mu * s - lr * gg


def ref_signum(w, g, s, t, lr, wd, hp):
    mu, wd_lh = hp["momentum"], hp["wd_lh"]
    if mu == 0:
        return (1 - lr * (wd + wd_lh)) * w - lr * np.sign(g), None
    m = mu * s - (1 - mu) * (wd * w + _gp(g, hp))
    return (1 - lr * wd_lh) * w + lr * np.sign(m), m


def ref_adam(w, g, s, t, lr, wd, hp):
    b1, b2, eps = 0.9, 0.999, 1e-8
    gg = _gg(w, g, wd, hp)
    m = b1 * s[0] + (1 - b1) * gg
    v = b2 * s[1] + (1 - b2) * gg * gg
    step = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    return w - step, (m, v)


def ref_adamax(w, g, s, t, lr, wd, hp):
    b1, b2 = 0.9, 0.999
    gg = _gg(w, g, wd, hp)
    m = b1 * s[0] + (1 - b1) * gg
    u = np.maximum(b2 * s[1], np.abs(gg))
    return w - lr / (1 - b1 ** t) * m / u, (m, u)


def _nadam_mu(t):
    return 0.9 * (1 - 0.5 * 0.96 ** (t * 0.004))


def ref_nadam(w, g, s, t, lr, wd, hp):
    b1, b2, eps = 0.9, 0.999, 1e-8
    gg = _gg(w, g, wd, hp)
    sched = math.prod(_nadam_mu(i) for i in range(1, t + 1))
    sched_next = sched * _nadam_mu(t + 1)
    m = b1 * s[0] + (1 - b1) * gg
    v = b2 * s[1] + (1 - b2) * gg * gg
    m_bar = (1 - _nadam_mu(t)) * gg / (1 - sched) + _nadam_mu(t + 1) * m / (1 - sched_next)
    return w - lr * m_bar / (np.sqrt(v / (1 - b2 ** t)) + eps), (m, v)


def ref_ftml(w, g, s, t, lr, wd, hp):
    b1, b2, eps = 0.6, 0.999, 1e-8
    gg = _gg(w, g, wd, hp)
    d, v, z = s
    v = b2 * v + (1 - b2) * gg * gg
    d_t = (1 - b1 ** t) / lr * (np.sqrt(v / (1 - b2 ** t)) + eps)
    z = b1 * z + (1 - b1) * gg - (d_t - b1 * d) * w
    return -z / d_t, (d_t, v, z)


def ref_adagrad(w, g, s, t, lr, wd, hp):
    gp = _gp(g, hp)
    h = s + gp * gp
    return w - lr * (gp / np.sqrt(h + 1e-7) + wd * w), h


def ref_rmsprop(w, g, s, t, lr, wd, hp):
    g1, g2, eps = 0.9, 0.9, 1e-8
    gg = _gg(w, g, wd, hp)
    n = (1 - g1) * gg * gg + g1 * s[0]
    if hp["centered"]:
        gbar = (1 - g1) * gg + g1 * s[1]
        delta = g2 * s[2] - lr * gg / np.sqrt(n - gbar * gbar + eps)
        new_w, new_s = w + delta, (n, gbar, delta)
    else:
        new_w, new_s = w - lr * gg / np.sqrt(n + eps), (n,)
    if hp["clip_weights"]:
        new_w = np.clip(new_w, -hp["clip_weights"], hp["clip_weights"])
    return new_w, new_s


def ref_adadelta(w, g, s, t, lr, wd, hp):
    rho, eps = 0.9, 1e-5
    gp = _gp(g, hp)
    acc_g = rho * s[0] + (1 - rho) * gp * gp
    d = np.sqrt(s[1] + eps) / np.sqrt(acc_g + eps) * gp
    acc_d = rho * s[1] + (1 - rho) * d * d
    return w - d - wd * w, (acc_g, acc_d)


def ref_ftrl(w, g, s, t, lr, wd, hp):
    lamda1, beta = 0.01, 1.0
    gp = _gp(g, hp)
    z, n = s
    z = z + gp - (np.sqrt(n + gp * gp) - np.sqrt(n)) * w / lr
    n = n + gp * gp
    new_w = (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lamda1)
    return new_w, (z, n)


def _zeros(k):
    return lambda w: tuple(np.zeros_like(w) for _ in range(k))


# name, constructor kwargs, reference, initial reference state
CASES = [
    ("sgd", dict(momentum=0.0), ref_sgd, lambda w: None),
    ("sgd", dict(momentum=0.9), ref_sgd, np.zeros_like),
    ("nag", dict(momentum=0.0), ref_nag, lambda w: None),
    ("nag", dict(momentum=0.9), ref_nag, np.zeros_like),
    ("signum", dict(momentum=0.0, wd_lh=0.0), ref_signum, lambda w: None),
    ("signum", dict(momentum=0.9, wd_lh=0.0), ref_signum, np.zeros_like),
    ("signum", dict(momentum=0.9, wd_lh=0.02), ref_signum, np.zeros_like),
    ("adam", {}, ref_adam, _zeros(2)),
    ("adamax", {}, ref_adamax, _zeros(2)),
    ("nadam", {}, ref_nadam, _zeros(2)),
    ("ftml", {}, ref_ftml, _zeros(3)),
    ("adagrad", {}, ref_adagrad, np.zeros_like),
    ("rmsprop", dict(centered=False, clip_weights=None), ref_rmsprop, _zeros(1)),
    ("rmsprop", dict(centered=True, clip_weights=None), ref_rmsprop, _zeros(3)),
    ("rmsprop", dict(centered=True, clip_weights=0.3), ref_rmsprop, _zeros(3)),
    ("adadelta", {}, ref_adadelta, _zeros(2)),
    ("ftrl", {}, ref_ftrl, _zeros(2)),
]


def _case_id(case):
    name, kwargs = case[0], case[1]
    return name + "".join(f"-{k}{v}" for k, v in kwargs.items())


def _data(dtype, seed, n=STEPS):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, SHAPE).astype(dtype)
    grads = [rng.uniform(-1, 1, SHAPE).astype(dtype) for _ in range(n)]
    return w, grads


def _assert_state_close(actual, expected, tol):
    if expected is None:
        assert actual is None
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, **tol)
    else:
        np.testing.assert_allclose(actual, expected, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_update_matches_reference(case, dtype):
    name, kwargs, reference, init_state = case
    lr = 0.1
    for k, (clip, rescale, wd) in enumerate(GRID):
        hp = dict(kwargs, clip_gradient=clip, rescale_grad=rescale)
        o = opt.create(name, learning_rate=lr, wd=wd, **hp)
        w, grads = _data(dtype, seed=k)
        weight = w.copy()
        state = o.create_state(0, weight)
        state_ids = [id(a) for a in (state if isinstance(state, tuple) else [state])]
        ref_w, ref_s = w.astype(np.float64), init_state(w.astype(np.float64))
        for t, g in enumerate(grads, start=1):
            g_before = g.copy()
            o.update(0, weight, g, state)
            ref_w, ref_s = reference(ref_w, g.astype(np.float64), ref_s, t, lr, wd, hp)
            np.testing.assert_array_equal(g, g_before)  # gradients are read only
            assert weight.dtype == dtype
            np.testing.assert_allclose(weight, ref_w, **TOL[dtype],
                                       err_msg=f"{name} {hp} wd={wd} step {t}")
            _assert_state_close(state, ref_s, TOL[dtype])
        # the state arrays were updated in place, never replaced
        assert [id(a) for a in (state if isinstance(state, tuple) else [state])] == state_ids


def test_sgld_matches_reference_with_the_same_seed():
    w, (g,) = _data(np.float32, seed=3, n=1)
    o = opt.SGLD(learning_rate=0.1, wd=0.03, rescale_grad=0.14, clip_gradient=0.4)
    weight = w.copy()
    raymod.random.seed(7)
    o.update(0, weight, g, o.create_state(0, weight))
    noise = np.random.default_rng(7).standard_normal(size=SHAPE, dtype=np.float32)
    hp = dict(rescale_grad=0.14, clip_gradient=0.4)
    expected = w - 0.1 / 2 * (_gp(g, hp) + 0.03 * w) + math.sqrt(0.1) * noise
    np.testing.assert_allclose(weight, expected, rtol=1e-5, atol=1e-6)


def test_test_optimizer_adds_rescaled_grad():
    o = opt.create("test", rescale_grad=0.5)
    w = np.ones(4)
    state = o.create_state(0, w)
    o.update(0, w, np.full(4, 2.0), state)
    np.testing.assert_array_equal(w, np.full(4, 2.0))
    np.testing.assert_array_equal(state, w)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_multi_precision_keeps_float32_master(momentum):
    lr, wd = 0.1, 0.03
    hp = dict(momentum=momentum, rescale_grad=0.14, clip_gradient=0.4)
    o = opt.SGD(learning_rate=lr, wd=wd, multi_precision=True, **hp)
    w, grads = _data(np.float16, seed=5)
    weight = w.copy()
    state = o.create_state_multi_precision(0, weight)
    inner, master = state  # MXNet's SGD layout: (momentum, master copy)
    assert master.dtype == np.float32
    ref_w = w.astype(np.float32)
    ref_s = None if momentum == 0 else np.zeros_like(ref_w)
    for t, g in enumerate(grads, start=1):
        o.update_multi_precision(0, weight, g, state)
        ref_w, ref_s = ref_sgd(ref_w, g.astype(np.float32), ref_s, t, lr, wd, hp)
        assert weight.dtype == np.float16
        np.testing.assert_allclose(master, ref_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(weight, master.astype(np.float16))
        if momentum:
            assert inner.dtype == np.float32
            np.testing.assert_allclose(inner, ref_s, rtol=1e-5, atol=1e-6)


def test_float16_without_multi_precision_warns():
    o = opt.SGD(momentum=0.9)
    with pytest.warns(UserWarning, match="multi_precision"):
        state = o.create_state_multi_precision(0, np.zeros(3, np.float16))
    assert state.dtype == np.float16


def test_list_update_equals_one_by_one():
    w, grads = _data(np.float64, seed=9, n=2)
    a, b = opt.Adam(wd=0.01), opt.Adam(wd=0.01)
    wa = [w.copy(), 2 * w]
    wb = [w.copy(), 2 * w]
    sa = [a.create_state(i, x) for i, x in enumerate(wa)]
    sb = [b.create_state(i, x) for i, x in enumerate(wb)]
    a.update([0, 1], wa, grads, sa)
    for i in range(2):
        b.update(i, wb[i], grads[i], sb[i])
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)
    assert a._index_update_count == {0: 1, 1: 1} and a.num_update == 1


# ---- learning rate, multipliers, counts --------------------------------------------------

def test_defaults_follow_mxnet():
    assert opt.SGD().learning_rate == 0.01
    assert opt.Adam().learning_rate == 0.001
    assert opt.Adamax().learning_rate == 0.002
    assert opt.RMSProp().learning_rate == 0.001
    assert opt.Ftrl().learning_rate == 0.1
    adam = opt.Adam()
    assert (adam.beta1, adam.beta2, adam.epsilon) == (0.9, 0.999, 1e-8)
    assert opt.Nadam().schedule_decay == 0.004
    assert opt.AdaGrad().float_stable_eps == 1e-7
    rms = opt.RMSProp()
    assert (rms.gamma1, rms.gamma2, rms.epsilon, rms.centered, rms.clip_weights) == \
        (0.9, 0.9, 1e-8, False, None)
    assert (opt.AdaDelta().rho, opt.AdaDelta().epsilon) == (0.9, 1e-5)
    assert (opt.Signum().momentum, opt.Signum().wd_lh) == (0.9, 0.0)
    assert (opt.FTML().beta1, opt.FTML().beta2, opt.FTML().epsilon) == (0.6, 0.999, 1e-8)
    assert opt.SGD().momentum == 0.0 and opt.SGD().lazy_update is True


def test_set_learning_rate_and_scheduler():
    o = opt.Optimizer(learning_rate=0.01)
    o.set_learning_rate(0.2)
    assert o.learning_rate == 0.2

    sched = lr_scheduler.FactorScheduler(step=1)
    with pytest.warns(UserWarning):
        o2 = opt.Optimizer(lr_scheduler=sched, learning_rate=0.3)
    assert o2.learning_rate == 0.3 and sched.base_lr == 0.3
    o2.lr_scheduler.base_lr = 0.4
    assert o2.learning_rate == 0.4
    with pytest.raises(UserWarning):
        o2.set_learning_rate(0.5)

    # without learning_rate the scheduler's base_lr is kept, even where the class default differs
    o3 = opt.Adam(lr_scheduler=lr_scheduler.FactorScheduler(step=5, base_lr=0.7))
    assert o3.learning_rate == 0.7


def test_scheduler_drives_the_update_rate():
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    o = opt.SGD(lr_scheduler=sched)
    w = np.zeros(2)
    state = o.create_state(0, w)
    seen = []
    for _ in range(3):
        before = w.copy()
        o.update(0, w, np.ones(2), state)
        seen.append(float(before[0] - w[0]))
    assert seen == [1.0, 0.5, 0.25]  # sched(1), sched(2), sched(3)
    assert o.num_update == 3


def test_lr_and_wd_mult_through_idx2name():
    idx2name = {0: "fc1_weight", 1: "fc1_bias", 2: "bn_gamma", 3: "bn_beta"}
    o = opt.SGD(learning_rate=0.1, wd=0.5, param_idx2name=idx2name)
    assert o.wd_mult == {"fc1_bias": 0.0, "bn_beta": 0.0}
    assert [o._get_wd(i) for i in range(4)] == [0.5, 0.0, 0.5, 0.0]
    o.set_lr_mult({"fc1_weight": 0.5, 3: 2.0})
    assert [o._get_lr(i) for i in range(4)] == [0.05, 0.1, 0.1, 0.2]
    o.set_wd_mult({"fc1_bias": 1.0})
    assert o._get_wd(1) == 0.5 and o._get_wd(3) == 0.0
    # the multipliers reach the update: a frozen weight stays put, wd skips the bias
    o.set_lr_mult({"fc1_weight": 0.0})
    w = np.ones(3)
    o.update(0, w, np.ones(3), None)
    np.testing.assert_array_equal(w, np.ones(3))
    o.update(3, w, np.zeros(3), None)
    np.testing.assert_array_equal(w, np.ones(3))
    o.update(1, w, np.zeros(3), None)  # fc1_bias got wd_mult 1 above
    np.testing.assert_allclose(w, np.full(3, 1 - 0.1 * 0.5))


class _FakeSymbol:
    """Stands in for a Symbol: only attr_dict() and list_arguments() are used."""

    def attr_dict(self):
        return {"fc1_weight": {"__lr_mult__": "0.0", "__wd_mult__": "3"},
                "fc1_bias": {"__lr_mult__": "2.0", "__wd_mult__": "1"},
                "fc2_weight": {"other": "x"},
                "fc2_bias": {}}

    def list_arguments(self):
        return ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def test_multipliers_from_symbol_attributes():
    idx2name = {0: "fc1_weight", 1: "fc1_bias", 2: "fc2_weight", 3: "fc2_bias"}
    o = opt.SGD(learning_rate=1.0, wd=1.0, sym=_FakeSymbol(), param_idx2name=idx2name)
    assert [o._get_lr(i) for i in range(4)] == [0.0, 2.0, 1.0, 1.0]
    assert [o._get_wd(i) for i in range(4)] == [3.0, 1.0, 1.0, 0.0]
    o.set_lr_mult({"fc1_weight": 0.5})  # explicit entries win over the symbol's
    assert o._get_lr(0) == 0.5 and o._get_lr(1) == 2.0


def test_param_dict_multipliers_win():
    class Param:
        lr_mult, wd_mult = 3.0, 0.25

    o = opt.SGD(learning_rate=1.0, wd=1.0, param_dict={0: Param()})
    o.set_lr_mult({0: 10.0})
    assert o._get_lr(0) == 3.0 and o._get_wd(0) == 0.25


def test_update_counts_per_index_and_begin_num_update():
    o = opt.SGD(begin_num_update=10)
    w = np.zeros(2)
    for idx in [0, 0, 1]:
        o.update(idx, w, np.zeros(2), None)
    assert o._index_update_count == {0: 12, 1: 11} and o.num_update == 12
    o._update_count([1, 2])
    assert o._index_update_count == {0: 12, 1: 12, 2: 11}


# ---- registry and errors ----------------------------------------------------------------

def test_create_is_case_insensitive():
    assert type(opt.create("SGD")) is opt.SGD
    assert type(opt.Optimizer.create_optimizer("RMSProp", centered=True)) is opt.RMSProp
    assert type(opt.create("ccsgd")) is opt.SGD
    assert "adam" in opt.Optimizer.opt_registry


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match="nope") as err:
        opt.create("nope")
    for name in ("sgd", "adam", "rmsprop", "nag", "ftml"):
        assert name in str(err.value)


def test_register_a_custom_optimizer():
    @opt.register
    class PlainStepForTest(opt.Optimizer):
        def update(self, index, weight, grad, state):
            self._update_count(index)
            weight -= self._get_lr(index) * grad

    try:
        o = opt.create("plainstepfortest", learning_rate=0.5)
        w = np.ones(2)
        opt.get_updater(o)(0, np.ones(2), w)
        np.testing.assert_array_equal(w, [0.5, 0.5])
    finally:
        opt.Optimizer.opt_registry._classes.pop("plainstepfortest")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError):
            opt.register(int)


def test_bad_arguments():
    with pytest.raises(TypeError, match="param_idx2name"):
        opt.SGD(param_idx2name=["fc_weight"])
    with pytest.raises(NotImplementedError):
        opt.Optimizer().update(0, np.zeros(1), np.zeros(1), None)
    with pytest.raises(ValueError, match="indices"):
        opt.SGD().update([0, 1], [np.zeros(1)], [np.zeros(1)], [None])


@pytest.mark.parametrize("name", opt.Optimizer.opt_registry.names())
def test_config_round_trip(name):
    o = opt.create(name, wd=0.01, rescale_grad=0.5, clip_gradient=2.0)
    config = o.get_config()
    again = type(o).from_config(config)
    assert again.get_config() == config
    assert config["wd"] == 0.01 and config["clip_gradient"] == 2.0


@pytest.mark.parametrize("name", ["ftml", "ftrl", "sgd", "adam"])
def test_zero_lr_mult_freezes_the_weight(name):
    o = opt.create(name, param_idx2name={0: "w_weight"})
    o.set_lr_mult({"w_weight": 0.0})
    w = np.linspace(-1, 1, 5)
    before = w.copy()
    o.update(0, w, np.ones(5), o.create_state(0, w))
    np.testing.assert_array_equal(w, before)
