import raymod.symbol as sym
from raymod.test_utils import check_forward, check_gradient


def test_add_n(ctx, rng):
    for op, n in (("add_n", 3), ("ElementWiseSum", 1), ("add_n", 2)):
        s = getattr(sym, op)(*[sym.Variable(f"x{i}") for i in range(n)])
        inputs = {f"x{i}": rng.standard_normal((2, 3)) for i in range(n)}
        check_forward(s, inputs, lambda **kw: sum(kw.values()), ctx)
        check_gradient(s, inputs, ctx)
