import numpy as np

from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def test_clip(ctx, rng):
    s = op_symbol("clip", ["data"], a_min=-0.5, a_max=0.8)
    x = rng.standard_normal((4, 5))
    x[np.abs(np.abs(x) - 0.65) > 0.6] += 0.01  # keep finite differences off the bounds
    check_forward(s, {"data": x}, lambda data: np.clip(data, -0.5, 0.8), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_clip_gradient_passes_at_bounds():
    ex = bind(op_symbol("clip", ["data"], a_min=-1, a_max=1),
              {"data": np.array([-2., -1, 0, 1, 2])})
    ex.forward(is_train=True)
    ex.backward([np.ones(5)])
    np.testing.assert_array_equal(ex.grad_dict["data"], [0, 1, 1, 1, 0])
