"""Helpers for checking operators: forward against a reference, backward against finite differences.

Used by raymod's own tests and usable for user-defined ops (MXNet's ``mx.test_utils``).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from .context import Context, as_numpy, cpu
from .symbol.symbol import Symbol, Variable, create


def op_symbol(op_name: str, input_names: Sequence[str], **attrs) -> Symbol:
    """``op_name`` applied to variables named like its inputs (``data``, ``weight``, ...)."""
    return create(op_name, [], {**{n: Variable(n) for n in input_names}, **attrs}, name="op")


def bind(symbol: Symbol, inputs: Mapping[str, np.ndarray], ctx: Context | None = None,
         aux: Mapping[str, np.ndarray] | None = None, grad_req="write", no_grad=()):
    """Bind ``symbol`` to copies of ``inputs`` on ``ctx`` with gradients for every argument."""
    ctx = ctx or cpu()
    xp = ctx.xp
    with ctx.scope():
        # C order, so that finite differences can nudge entries through a flat view
        args = {k: xp.array(v, order="C") for k, v in inputs.items()}
        grads = {k: xp.zeros_like(v) for k, v in args.items() if k not in no_grad}
        aux_arrays = {k: xp.array(v) for k, v in (aux or {}).items()}
    reqs = {k: ("null" if k in no_grad else grad_req) for k in args}
    return symbol.bind(ctx, args, args_grad=grads, grad_req=reqs,
                       aux_states=aux_arrays or None)


def assert_almost_equal(actual, expected, rtol: float = 1e-5, atol: float = 1e-7,
                        names: tuple[str, str] = ("actual", "expected")) -> None:
    """``numpy.testing.assert_allclose`` that accepts CuPy arrays."""
    np.testing.assert_allclose(as_numpy(actual), as_numpy(expected), rtol=rtol, atol=atol,
                               err_msg=f"{names[0]} vs {names[1]}")


def check_forward(symbol: Symbol, inputs: Mapping[str, np.ndarray],
                  expected: Sequence[np.ndarray] | Callable, ctx: Context | None = None,
                  aux=None, is_train: bool = False, rtol: float = 1e-5, atol: float = 1e-7):
    """Run forward and compare every output with ``expected`` (arrays or a function of inputs)."""
    ex = bind(symbol, inputs, ctx, aux=aux, grad_req="null")
    outs = ex.forward(is_train=is_train)
    if callable(expected):
        expected = expected(**{k: np.asarray(v) for k, v in inputs.items()})
    if isinstance(expected, np.ndarray):
        expected = [expected]
    assert len(outs) == len(expected), f"{len(outs)} outputs, {len(expected)} expected"
    for i, (o, e) in enumerate(zip(outs, expected)):
        assert tuple(o.shape) == tuple(np.shape(e)), f"output {i}: shape {o.shape} vs {np.shape(e)}"
        assert_almost_equal(o, e, rtol, atol, (f"output {i}", "reference"))
    return outs


def numeric_gradients(symbol: Symbol, inputs: Mapping[str, np.ndarray],
                      out_grads: Sequence[np.ndarray], ctx: Context | None = None, aux=None,
                      eps: float = 1e-6, max_elements: int = 64, seed: int = 0,
                      names: Sequence[str] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Central differences of ``sum(out_i * out_grads_i)`` at up to ``max_elements`` entries.

    Returns ``{name: (flat_indices, numeric_values)}``. Forward runs with ``is_train=True`` so
    BatchNorm and friends use their training behaviour; the aux states are reset each time.
    """
    rng = np.random.default_rng(seed)
    base = {k: np.array(v, dtype=np.float64) for k, v in inputs.items()}
    ex = bind(symbol, base, ctx, aux=aux, grad_req="null")

    def objective() -> float:
        if aux:
            for k, v in aux.items():
                ex.aux_dict[k][...] = ex._xp.asarray(v)
        outs = ex.forward(is_train=True)
        return float(sum(np.sum(as_numpy(o).astype(np.float64) * g)
                         for o, g in zip(outs, out_grads)))

    result = {}
    for name in names or base:
        arr = ex.arg_dict[name]
        size = arr.size
        picks = np.arange(size) if size <= max_elements else rng.choice(size, max_elements,
                                                                         replace=False)
        values = []
        flat = arr.reshape(-1)
        for i in picks:
            old = float(flat[i])
            flat[i] = old + eps
            plus = objective()
            flat[i] = old - eps
            minus = objective()
            flat[i] = old
            values.append((plus - minus) / (2 * eps))
        result[name] = (picks, np.array(values))
    return result


def check_gradient(symbol: Symbol, inputs: Mapping[str, np.ndarray], ctx: Context | None = None,
                   aux=None, no_grad: Sequence[str] = (), out_grads=None, rtol: float = 1e-4,
                   atol: float = 1e-6, eps: float = 1e-6, max_elements: int = 64,
                   seed: int = 0) -> dict:
    """Compare backward with central finite differences, in float64, for every input.

    ``out_grads`` default to random normal head gradients. Returns the analytic gradients.
    """
    inputs = {k: np.array(v, dtype=np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating)
              else np.asarray(v) for k, v in inputs.items()}
    ex = bind(symbol, inputs, ctx, aux=aux, no_grad=no_grad)
    outs = ex.forward(is_train=True)
    rng = np.random.default_rng(seed + 1)
    if out_grads is None:
        out_grads = [rng.standard_normal(o.shape) for o in outs]
    ex.backward([ex._xp.asarray(g) for g in out_grads])
    analytic = {k: as_numpy(v) for k, v in ex.grad_dict.items()}
    wanted = [k for k in inputs if k not in no_grad]
    numeric = numeric_gradients(symbol, inputs, out_grads, ctx, aux, eps, max_elements, seed,
                                wanted)
    for name, (picks, values) in numeric.items():
        got = analytic[name].reshape(-1)[picks]
        np.testing.assert_allclose(got, values, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name!r}: backward vs finite differences")
    return analytic


def check_backward_after_inference(symbol: Symbol, inputs: Mapping[str, np.ndarray],
                                   out_grads: Sequence[np.ndarray],
                                   ctx: Context | None = None) -> dict:
    """Check that backward after ``forward(is_train=False)`` gives the gradients it gives
    after a training forward (MXNet allows both; for ops whose training and inference
    functions agree). Returns the gradients."""
    grads = []
    for is_train in (True, False):
        ex = bind(symbol, inputs, ctx)
        ex.forward(is_train=is_train)
        ex.backward([ex._xp.asarray(g) for g in out_grads])
        grads.append({k: as_numpy(v) for k, v in ex.grad_dict.items()})
    trained, inferred = grads
    for name, value in trained.items():
        np.testing.assert_array_equal(inferred[name], value,
                                      err_msg=f"gradient of {name!r} after an inference forward")
    return trained
