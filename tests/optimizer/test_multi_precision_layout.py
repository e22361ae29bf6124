"""Multi-precision state layout as MXNet's: SGD and NAG keep (state, master copy), the other
optimizers (master copy, state); updates go through the master copy either way."""
import numpy as np
import pytest

import raymod as rm


@pytest.mark.parametrize("name", ["sgd", "nag"])
def test_sgd_and_nag_put_the_master_copy_last(name):
    opt = rm.optimizer.create(name, learning_rate=0.5, momentum=0.9, multi_precision=True)
    w = np.array([1.0, -2.0, 0.25], np.float16)
    g = np.array([0.5, 0.5, -1.0], np.float16)
    mom, master = opt.create_state_multi_precision(0, w)
    assert master.dtype == np.float32 and np.array_equal(master, w.astype(np.float32))
    assert mom.dtype == np.float32 and not mom.any()
    opt.update_multi_precision(0, w, g, (mom, master))
    # first step from zero momentum: m = -lr*g; SGD: w += m; NAG: w += momentum*m - lr*g
    m = -0.5 * g.astype(np.float32)
    want = (np.array([1.0, -2.0, 0.25], np.float32) + m if name == "sgd"
            else np.array([1.0, -2.0, 0.25], np.float32) + 0.9 * m - 0.5 * g.astype(np.float32))
    np.testing.assert_allclose(master, want, rtol=1e-6)
    np.testing.assert_allclose(mom, m, rtol=1e-6)
    np.testing.assert_array_equal(w, want.astype(np.float16))  # the weight follows its master


def test_adam_keeps_the_master_copy_first():
    opt = rm.optimizer.create("adam", multi_precision=True)
    w = np.ones(3, np.float16)
    master, (mean, var) = opt.create_state_multi_precision(0, w)
    assert master.dtype == np.float32 and mean.shape == var.shape == (3,)
