"""Row_sparse gradients in the optimizers: MXNet 1.9.1's lazy (sparse) updates and the rest.

References are written out per row in numpy: for each row ``r`` a gradient holds, the kernel's
formula on ``w[r]`` and the states' row ``r``; the optimizer must match them over several steps
whose row sets repeat, skip, hold no row and hold every row, and leave every other row of the
weight and states bit-identical. ``lazy_update=False`` (and every optimizer without a sparse
rule) must equal the dense update on ``grad.todense()``.
"""
import math
import warnings

import numpy as np
import pytest

import raymod.random
from raymod import context
from raymod import optimizer as opt
from raymod.optimizer.svrg import _AssignmentOptimizer
from raymod.sparse import RowSparseArray

SHAPE = (7, 2, 3)
# the rows each step's gradient holds: repeats, gaps, none at all, every row
ROW_SETS = [[0, 2, 5], [2, 3], [], [0, 1, 2, 3, 4, 5, 6], [5], [1, 5, 6]]
LR = 0.1
TOL = dict(rtol=1e-12, atol=1e-14)  # float64 throughout: the references are exact formulas


def _clip(x, c):
    return x if c is None else np.clip(x, -c, c)


def _grads(seed, dtype=np.float64, row_sets=ROW_SETS, shape=SHAPE):
    """One RowSparseArray per row set, values in [-1, 1)."""
    rng = np.random.default_rng(seed)
    return [RowSparseArray(rng.uniform(-1, 1, (len(rows),) + shape[1:]).astype(dtype),
                           np.array(rows, dtype=np.int64), shape) for rows in row_sets]


def _weight(seed, dtype=np.float64, shape=SHAPE):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def _copy_state(state):
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.copy() for s in state)
    return state.copy()


def _state_list(state):
    if state is None:
        return []
    return list(state) if isinstance(state, tuple) else [state]


# ---- per-row references (one row of w and of each state, the kernel's formula) -----------

def row_sgd(w, g, s, t, hp):
    """MXNet's SGDDnsRspKernel / SGDMomDnsRspDnsKernel on one row."""
    lr, wd, mu = hp["lr"], hp["wd"], hp["momentum"]
    gp = _clip(hp["rescale_grad"] * g, hp["clip_gradient"])
    if mu == 0:
        return (1 - lr * wd) * w - lr * gp, None
    m = mu * s - lr * wd * w - lr * gp
    return w + m, m


def row_adam(w, g, s, t, hp):
    """MXNet's AdamDnsRspDnsKernel on one row; lr bias-corrected in Python as the dense path."""
    b1, b2, eps, wd = 0.9, 0.999, 1e-8, hp["wd"]
    lr = hp["lr"] * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    gg = _clip(hp["rescale_grad"] * g + wd * w, hp["clip_gradient"])
    m = b1 * s[0] + (1 - b1) * gg
    v = b2 * s[1] + (1 - b2) * gg * gg
    return w - lr * m / (np.sqrt(v) + eps), (m, v)


def row_adagrad(w, g, s, t, hp):
    """MXNet's AdagradDnsRspDnsKernel on one row (it takes no wd)."""
    lr = hp["lr"]
    gp = _clip(hp["rescale_grad"] * g, hp["clip_gradient"])
    h = s + gp * gp
    return w - lr * gp / np.sqrt(h + 1e-7), h


def row_ftrl(w, g, s, t, hp):
    """MXNet's FtrlDnsRspDnsKernel on one row."""
    lr, wd, lamda1, beta = hp["lr"], hp["wd"], 0.01, 1.0
    gp = _clip(hp["rescale_grad"] * g, hp["clip_gradient"])
    z, n = s
    z = z + gp - (np.sqrt(n + gp * gp) - np.sqrt(n)) * w / lr
    n = n + gp * gp
    new_w = (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lamda1)
    return new_w, (z, n)


def _reference(row_rule, w, state, grads, hp, rows_only):
    """Run ``row_rule`` over the steps: on the gradient's rows (lazy), or on every row with
    zeros where the gradient has none (the standard update). Returns w and state per step."""
    w, state = w.copy(), _copy_state(state)
    history = []
    for t, grad in enumerate(grads, start=1):
        dense = grad.todense()
        rows = grad.indices.tolist() if rows_only else range(w.shape[0])
        for r in rows:
            s_r = None if state is None else (
                tuple(s[r] for s in state) if isinstance(state, tuple) else state[r])
            new_w, new_s = row_rule(w[r], dense[r], s_r, t, hp)
            w[r] = new_w
            if isinstance(state, tuple):
                for s, v in zip(state, new_s):
                    s[r] = v
            elif state is not None:
                state[r] = new_s
        history.append((w.copy(), _copy_state(state)))
    return history


# name, constructor kwargs, per-row reference, settings grid (clip, rescale, wd)
LAZY_CASES = [
    ("sgd", dict(momentum=0.0), row_sgd, [(None, 1.0, 0.0), (0.4, 0.5, 0.03), (None, 0.7, 0.05)]),
    ("sgd", dict(momentum=0.9), row_sgd, [(None, 1.0, 0.0), (0.4, 0.5, 0.03), (None, 0.7, 0.05)]),
    ("adam", {}, row_adam, [(None, 1.0, 0.0), (0.4, 0.5, 0.03), (None, 0.7, 0.05)]),
    ("adagrad", {}, row_adagrad, [(None, 1.0, 0.0), (0.4, 0.5, 0.0)]),
    ("ftrl", {}, row_ftrl, [(None, 1.0, 0.0), (0.4, 0.5, 0.03), (None, 0.7, 0.05)]),
]


def _lazy_id(case):
    return case[0] + "".join(f"-{k}{v}" for k, v in case[1].items())


def _make(name, kwargs, clip, rescale, wd, **extra):
    return opt.create(name, learning_rate=LR, clip_gradient=clip, rescale_grad=rescale, wd=wd,
                      **kwargs, **extra)


@pytest.mark.parametrize("case", LAZY_CASES, ids=_lazy_id)
def test_lazy_update_matches_row_reference_and_leaves_other_rows(case):
    name, kwargs, row_rule, grid = case
    for k, (clip, rescale, wd) in enumerate(grid):
        o = _make(name, kwargs, clip, rescale, wd)
        w = _weight(k)
        state = o.create_state(0, w)
        hp = dict(kwargs, lr=LR, wd=wd, clip_gradient=clip, rescale_grad=rescale)
        grads = _grads(10 + k)
        expected = _reference(row_rule, w, state, grads, hp, rows_only=True)
        for grad, (exp_w, exp_s) in zip(grads, expected):
            before_w, before_s = w.copy(), _copy_state(state)
            o.update(0, w, grad, state)
            np.testing.assert_allclose(w, exp_w, **TOL)
            for a, e in zip(_state_list(state), _state_list(exp_s)):
                np.testing.assert_allclose(a, e, **TOL)
            others = np.setdiff1d(np.arange(SHAPE[0]), grad.indices)
            np.testing.assert_array_equal(w[others], before_w[others])
            for a, b in zip(_state_list(state), _state_list(before_s)):
                np.testing.assert_array_equal(a[others], b[others])


@pytest.mark.parametrize("case", [c for c in LAZY_CASES if c[0] in ("sgd", "adam")],
                         ids=_lazy_id)
def test_standard_update_is_the_dense_update(case):
    """lazy_update=False: weight decay and momentum reach every row, as the dense update."""
    name, kwargs, row_rule, grid = case
    for k, (clip, rescale, wd) in enumerate(grid):
        sparse_opt = _make(name, kwargs, clip, rescale, wd, lazy_update=False)
        dense_opt = _make(name, kwargs, clip, rescale, wd, lazy_update=False)
        w_sparse = _weight(k)
        w_dense = w_sparse.copy()
        s_sparse, s_dense = sparse_opt.create_state(0, w_sparse), dense_opt.create_state(0, w_dense)
        hp = dict(kwargs, lr=LR, wd=wd, clip_gradient=clip, rescale_grad=rescale)
        grads = _grads(20 + k)
        expected = _reference(row_rule, w_sparse, s_sparse, grads, hp, rows_only=False)
        for grad, (exp_w, exp_s) in zip(grads, expected):
            sparse_opt.update(0, w_sparse, grad, s_sparse)
            dense_opt.update(0, w_dense, grad.todense(), s_dense)
            np.testing.assert_array_equal(w_sparse, w_dense)
            for a, b in zip(_state_list(s_sparse), _state_list(s_dense)):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_allclose(w_sparse, exp_w, **TOL)
        if wd or kwargs.get("momentum"):  # rows never pushed moved too
            assert not np.array_equal(w_sparse, _weight(k))


def test_adagrad_without_wd_rows_equal_the_dense_update():
    """With wd = 0 AdaGrad's sparse rule is exactly its dense rule on zero-filled gradients."""
    lazy, dense = opt.AdaGrad(clip_gradient=0.4), opt.AdaGrad(clip_gradient=0.4)
    w_lazy = _weight(3)
    w_dense = w_lazy.copy()
    s_lazy, s_dense = lazy.create_state(0, w_lazy), dense.create_state(0, w_dense)
    for grad in _grads(4):
        lazy.update(0, w_lazy, grad, s_lazy)
        dense.update(0, w_dense, grad.todense(), s_dense)
    np.testing.assert_array_equal(w_lazy, w_dense)
    np.testing.assert_array_equal(s_lazy, s_dense)


def test_adagrad_refuses_weight_decay_with_row_sparse_grads():
    o = opt.AdaGrad(wd=0.01, param_idx2name={0: "emb_weight", 1: "emb_bias"})
    w = _weight(0)
    grad = _grads(0)[0]
    with pytest.raises(ValueError, match="AdaGrad.*weight decay"):
        o.update(0, w, grad, o.create_state(0, w))
    o.update(1, w, grad, o.create_state(1, w))  # a bias: wd_mult 0, so no weight decay
    o.update(0, w, grad.todense(), o.create_state(0, w))  # dense gradients keep their wd


def test_ftrl_rows_differ_from_its_dense_rule():
    """The dense Ftrl rule recomputes every row from z and n (rows never pushed become 0);
    the sparse rule leaves them alone."""
    o = opt.Ftrl()
    w = _weight(0)
    state = o.create_state(0, w)
    grad = _grads(0)[0]
    o.update(0, w, grad, state)
    untouched = np.setdiff1d(np.arange(SHAPE[0]), grad.indices)
    np.testing.assert_array_equal(w[untouched], _weight(0)[untouched])


# every optimizer with no sparse rule: the dense rule on grad.todense(), exactly
FALLBACK = [n for n in opt.Optimizer.opt_registry.names()
            if n not in ("sgd", "ccsgd", "adam", "adagrad", "ftrl")]


@pytest.mark.parametrize("name", FALLBACK)
def test_other_optimizers_update_densely(name):
    kwargs = dict(wd=0.02, rescale_grad=0.5, clip_gradient=0.6)
    sparse_opt, dense_opt = opt.create(name, **kwargs), opt.create(name, **kwargs)
    w_sparse = _weight(1)
    w_dense = w_sparse.copy()
    s_sparse, s_dense = sparse_opt.create_state(0, w_sparse), dense_opt.create_state(0, w_dense)
    for step, grad in enumerate(_grads(2)):
        raymod.random.seed(step)  # SGLD's noise
        sparse_opt.update(0, w_sparse, grad, s_sparse)
        raymod.random.seed(step)
        dense_opt.update(0, w_dense, grad.todense(), s_dense)
        np.testing.assert_array_equal(w_sparse, w_dense)
        for a, b in zip(_state_list(s_sparse), _state_list(s_dense)):
            np.testing.assert_array_equal(a, b)


def test_row_sparse_grad_of_another_shape_is_refused():
    o = opt.SGD(momentum=0.9)
    w = np.zeros((7, 3))
    grad = RowSparseArray(np.ones((1, 1)), [2], (7, 1))
    with pytest.raises(ValueError, match="shape"):
        o.update(0, w, grad, o.create_state(0, w))


# ---- through the Updater ------------------------------------------------------------------

def test_updater_with_mixed_dense_and_row_sparse_grads():
    """SGD's aggregated path (every weight in one call) takes a list mixing both kinds; each
    weight gets its own rule, at rates read after the whole list's counts."""
    hp = dict(lr=LR, wd=0.03, momentum=0.9, clip_gradient=0.4, rescale_grad=0.5)
    o = opt.SGD(learning_rate=LR, wd=0.03, momentum=0.9, clip_gradient=0.4, rescale_grad=0.5)
    updater = opt.get_updater(o)
    assert updater.aggregate_updates
    weights = [_weight(0), _weight(1), _weight(2, shape=(7, 2, 3))]
    sparse_a, sparse_b = _grads(5), _grads(6, row_sets=ROW_SETS[::-1])
    dense = [_weight(100 + i) for i in range(len(ROW_SETS))]
    exp_a = _reference(row_sgd, weights[0], np.zeros(SHAPE), sparse_a, hp, rows_only=True)
    exp_b = _reference(row_sgd, weights[2], np.zeros(SHAPE), sparse_b, hp, rows_only=True)
    full = [RowSparseArray.full(d) for d in dense]
    exp_d = _reference(row_sgd, weights[1], np.zeros(SHAPE), full, hp, rows_only=True)
    for step in range(len(ROW_SETS)):
        updater([0, 1, 2], [sparse_a[step], dense[step], sparse_b[step]], weights)
        np.testing.assert_allclose(weights[0], exp_a[step][0], **TOL)
        np.testing.assert_allclose(weights[1], exp_d[step][0], **TOL)
        np.testing.assert_allclose(weights[2], exp_b[step][0], **TOL)
    np.testing.assert_allclose(updater.states[0], exp_a[-1][1], **TOL)


def test_updater_single_row_sparse_grad_adam():
    hp = dict(lr=LR, wd=0.01, clip_gradient=None, rescale_grad=1.0)
    updater = opt.get_updater(opt.Adam(learning_rate=LR, wd=0.01))
    w = _weight(0)
    grads = _grads(7)
    expected = _reference(row_adam, w, (np.zeros(SHAPE), np.zeros(SHAPE)), grads, hp, True)
    for grad, (exp_w, exp_s) in zip(grads, expected):
        updater(0, grad, w)
        np.testing.assert_allclose(w, exp_w, **TOL)
    for a, e in zip(updater.states[0], expected[-1][1]):
        np.testing.assert_allclose(a, e, **TOL)
    # the states of a lazy update save and load as any others
    restored = opt.get_updater(opt.Adam(learning_rate=LR, wd=0.01))
    restored.set_states(updater.get_states())
    w2 = w.copy()
    updater(0, grads[0], w)
    restored(0, grads[0], w2)
    np.testing.assert_array_equal(w, w2)


@pytest.mark.parametrize("name,kwargs,row_rule", [
    ("sgd", dict(momentum=0.9), row_sgd), ("sgd", dict(momentum=0.0), row_sgd),
    ("adam", {}, row_adam), ("ftrl", {}, row_ftrl)], ids=["sgd-mom", "sgd", "adam", "ftrl"])
def test_float16_multi_precision_updates_rows_of_master_and_weight(name, kwargs, row_rule):
    hp = dict(kwargs, lr=LR, wd=0.03, clip_gradient=0.4, rescale_grad=0.5)
    o = _make(name, kwargs, 0.4, 0.5, 0.03, multi_precision=True)
    updater = opt.get_updater(o)
    w16 = _weight(0, np.float16)
    grads = _grads(8, np.float16)
    init_state = o.create_state(0, w16.astype(np.float32))
    expected = _reference(row_rule, w16.astype(np.float32), init_state,
                          [g.astype(np.float32) for g in grads], hp, rows_only=True)
    for grad, (exp_master, _) in zip(grads, expected):
        before = w16.copy()
        updater(0, grad, w16)
        state = updater.states[0]
        master = state[1] if name == "sgd" else state[0]  # MXNet's layouts
        assert master.dtype == np.float32 and w16.dtype == np.float16
        np.testing.assert_allclose(master, exp_master, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(w16[grad.indices], master[grad.indices].astype(np.float16))
        others = np.setdiff1d(np.arange(SHAPE[0]), grad.indices)
        np.testing.assert_array_equal(w16[others], before[others])


def test_float16_multi_precision_standard_update_reaches_every_row():
    o = opt.SGD(learning_rate=LR, momentum=0.9, wd=0.03, lazy_update=False, multi_precision=True)
    updater = opt.get_updater(o)
    w16 = _weight(0, np.float16)
    grad = _grads(0, np.float16, row_sets=[[1]])[0]
    updater(0, grad, w16)
    master = updater.states[0][1]
    np.testing.assert_array_equal(w16, master.astype(np.float16))
    assert not np.array_equal(w16[0], _weight(0, np.float16)[0])  # wd moved an unpushed row


def test_float16_without_multi_precision_updates_rows_in_float16():
    o = opt.SGD(learning_rate=LR, momentum=0.9)
    w16 = _weight(0, np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        state = o.create_state_multi_precision(0, w16)
    grad = _grads(0, np.float16)[1]
    before = w16.copy()
    o.update_multi_precision(0, w16, grad, state)
    others = np.setdiff1d(np.arange(SHAPE[0]), grad.indices)
    np.testing.assert_array_equal(w16[others], before[others])
    assert not np.array_equal(w16[grad.indices], before[grad.indices])


def test_own_update_subclass_gets_dense_grads_from_the_updater():
    seen = []

    class OwnUpdate(opt.Optimizer):
        def update(self, index, weight, grad, state):
            seen.append(type(grad))
            weight -= grad

    w = np.zeros(SHAPE)
    grad = _grads(0)[0]
    opt.get_updater(OwnUpdate())(0, grad, w)
    assert seen == [np.ndarray]
    np.testing.assert_array_equal(w, -grad.todense())


def test_assignment_optimizer_assigns_row_sparse_values_densely():
    w = np.ones(SHAPE)
    grad = _grads(0)[0]
    _AssignmentOptimizer().update(0, w, grad, None)
    np.testing.assert_array_equal(w, grad.todense())


@pytest.mark.gpu
def test_cupy_lazy_updates_match_numpy():
    if not context.gpu_available():
        pytest.skip("needs CuPy and a CUDA device")
    import cupy

    for make in (lambda: opt.SGD(learning_rate=LR, momentum=0.9, wd=0.01),
                 lambda: opt.Adam(learning_rate=LR, wd=0.01, clip_gradient=0.4),
                 lambda: opt.Ftrl()):
        cpu_u, gpu_u = opt.get_updater(make()), opt.get_updater(make())
        w_host = _weight(0, np.float32)
        cpu_w, gpu_w = w_host.copy(), cupy.asarray(w_host)
        for grad in _grads(1, np.float32):
            gpu_grad = RowSparseArray(cupy.asarray(grad.data), cupy.asarray(grad.indices),
                                      grad.shape)
            cpu_u(0, grad, cpu_w)
            gpu_u(0, gpu_grad, gpu_w)
        np.testing.assert_allclose(cupy.asnumpy(gpu_w), cpu_w, rtol=1e-5, atol=1e-6)
