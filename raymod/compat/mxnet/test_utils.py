"""``mx.test_utils``: the dense-array helpers MXNet scripts and tests use, on raymod.

Comparison helpers take numpy or NDArray (numpy/CuPy) arrays and MXNet's default tolerances
per dtype. Nothing is downloaded: :func:`download` and the dataset getters return files that
are already there and raise otherwise.
"""
from __future__ import annotations

import numbers
import os
import sys  # noqa: F401 - re-exported by `import *`, as MXNet's tests expect
from typing import Any, Callable, Sequence

import numpy as np
import numpy.random as rnd  # noqa: F401 - MXNet's tests use it through `import *`

from ...context import Context, _entered_stack, as_numpy, current_context, num_gpus
from ...io.mnist_iter import read_idx
from ..errors import not_supported
from ...context import Context as Context  # noqa: F401,F811 - MXNet's module exports these
from ...symbol import Symbol  # noqa: F401
from .. import mxnet as mx
from . import ndarray as nd
from .ndarray import array  # noqa: F401 - used by MXNet's tests through `import *`

# no __all__: MXNet's tests do `from mxnet.test_utils import *` and use what it brings
# along (np, os, sys, mx, ...), as MXNet's module has none either

# MXNet's default tolerances by element type (floats; integers and bool compare exactly)
_RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-5}
_ATOL = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-20}
_DEFAULT_SET: list = []  # the context set_default_context put at the bottom of the stack


def default_context() -> Context:
    """The context tests run on: the current one (``cpu(0)`` unless set or entered)."""
    return current_context()


def set_default_context(ctx: Context) -> None:
    """Make ``ctx`` the context used when none is entered (this thread)."""
    if not isinstance(ctx, Context):
        raise TypeError(f"set_default_context: ctx must be a Context, got {type(ctx).__name__}")
    stack = _entered_stack()
    if _DEFAULT_SET and stack and stack[0] is _DEFAULT_SET[0]:
        stack[0] = ctx
    else:
        stack.insert(0, ctx)
    _DEFAULT_SET[:] = [ctx]


def default_dtype() -> type:
    """float32."""
    return np.float32


def _tol(value: Any, tol: Any, table: dict) -> float:
    if isinstance(tol, numbers.Number):
        return tol
    dtype = np.dtype(getattr(value, "dtype", np.asarray(value).dtype))
    return (tol or {}).get(dtype, table.get(dtype, 0))


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """The tolerances to compare ``x`` and ``y``: given numbers, else the larger default."""
    return (max(_tol(x, rtol, _RTOL), _tol(y, rtol, _RTOL)),
            max(_tol(x, atol, _ATOL), _tol(y, atol, _ATOL)))


def get_rtol(rtol: float | None = None, dtype: Any = np.float64) -> float:
    """``rtol``, or the default for ``dtype``."""
    return _RTOL.get(np.dtype(dtype), 0) if rtol is None else rtol


def get_atol(atol: float | None = None, dtype: Any = np.float64) -> float:
    """``atol``, or the default for ``dtype``."""
    return _ATOL.get(np.dtype(dtype), 0) if atol is None else atol


def _host(a: Any) -> Any:
    return as_numpy(a) if hasattr(a, "dtype") else a


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, use_broadcast: bool = True) -> bool:
    """Whether ``a`` and ``b`` are close (``numpy.allclose`` with MXNet's defaults)."""
    if not use_broadcast and np.shape(a) != np.shape(b):
        return False
    return bool(np.allclose(_host(a), _host(b), rtol=get_rtol(rtol), atol=get_atol(atol),
                            equal_nan=equal_nan))


def assert_almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                        names: tuple = ("a", "b"), equal_nan: bool = False,
                        use_broadcast: bool = True, mismatches: tuple = (10, 10)) -> None:
    """Raise AssertionError unless ``a`` and ``b`` are close; tolerances default per dtype."""
    if not use_broadcast and np.shape(a) != np.shape(b):
        raise AssertionError(f"{names[0]}.shape = {np.shape(a)} and {names[1]}.shape = "
                             f"{np.shape(b)} are not equal")
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _host(a), _host(b)
    if getattr(a, "dtype", None) == np.bool_ and getattr(b, "dtype", None) == np.bool_:
        np.testing.assert_equal(a, b)
        return
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan,
                               err_msg=f"{names[0]} vs {names[1]}")


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0,
                    equal_nan: bool = True) -> None:
    """:func:`assert_almost_equal` with numpy's default tolerances."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` have the same shape and elements."""
    return bool(np.array_equal(_host(a), _host(b)))


def same_array(array1: Any, array2: Any) -> bool:
    """Whether the two arrays share memory (writing one changes the other)."""
    return bool(np.shares_memory(array1, array2)) and array1.shape == array2.shape


def random_arrays(*shapes: tuple) -> Any:
    """Standard-normal float32 arrays of ``shapes`` (one array when one shape is given)."""
    arrays = [np.random.randn(*s).astype(np.float32) if len(s) else
              np.array(np.random.randn(), dtype=np.float32) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes: tuple, low: float = 0.0, high: float = 1.0,
                          dtype: Any = np.float32) -> Any:
    """Uniform arrays of ``shapes`` in [low, high)."""
    arrays = [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_sample(population: list, k: int) -> list:
    """``k`` distinct items of ``population`` in random order."""
    return [population[i] for i in np.random.permutation(len(population))[:k]]


def rand_ndarray(shape: tuple, stype: str = "default", density: Any = None, dtype: Any = None,
                 modifier_func: Any = None, shuffle_csr_indices: bool = False,
                 distribution: Any = None, ctx: Context | None = None) -> Any:
    """A standard-normal dense NDArray; ``stype`` other than 'default' is not supported."""
    if stype != "default":
        raise not_supported(f"rand_ndarray(stype={stype!r})", "sparse storage")
    return nd.array(random_arrays(tuple(shape)), ctx=ctx, dtype=dtype)


def rand_sparse_ndarray(shape: tuple, stype: str, *args: Any, **kwargs: Any) -> Any:
    """Sparse arrays are not supported."""
    raise not_supported(f"rand_sparse_ndarray(stype={stype!r})", "sparse storage")


def rand_shape_2d(dim0: int = 10, dim1: int = 10, allow_zero_size: bool = False) -> tuple:
    """A random 2-D shape with dims in [1, dim] (0 allowed when ``allow_zero_size``)."""
    return rand_shape_nd(2, (dim0, dim1), allow_zero_size)


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10,
                  allow_zero_size: bool = False) -> tuple:
    """A random 3-D shape."""
    return rand_shape_nd(3, (dim0, dim1, dim2), allow_zero_size)


def rand_shape_nd(num_dim: int, dim: Any = 10, allow_zero_size: bool = False) -> tuple:
    """A random ``num_dim``-D shape with dims up to ``dim``."""
    low = 0 if allow_zero_size else 1
    highs = np.broadcast_to(np.asarray(dim), (num_dim,)) + 1
    return tuple(int(np.random.randint(low, h)) for h in highs)


def assert_exception(f: Callable, exception_type: type, *args: Any, **kwargs: Any) -> None:
    """Raise AssertionError unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise "
                         f"{exception_type.__name__}")


def retry(n: int) -> Callable:
    """Decorator: run a stochastic test up to ``n`` times until it passes."""
    if n < 1:
        raise ValueError(f"retry: n must be >= 1, got {n}")

    def decorate(f: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for attempt in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if attempt == n - 1:
                        raise
        wrapper.__name__ = f.__name__
        return wrapper
    return decorate


def simple_forward(sym: Any, ctx: Context | None = None, is_train: bool = False,
                   **inputs: Any) -> Any:
    """Bind ``sym`` to ``inputs`` (numpy arrays), run forward; numpy output(s)."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args={k: nd.array(v, ctx=ctx) for k, v in inputs.items()})
    outputs = [as_numpy(o) for o in exe.forward(is_train=is_train)]
    return outputs[0] if len(outputs) == 1 else outputs


def list_gpus() -> list[int]:
    """The ids of the visible GPUs (empty without CuPy/CUDA)."""
    return list(range(num_gpus()))


def download(url: str, fname: str | None = None, dirname: str | None = None,
             overwrite: bool = False, retries: int = 5) -> str:
    """The path MXNet would download ``url`` to, which must already exist: raymod does not
    download. Put the file there first."""
    fname = fname or url.split("/")[-1]
    if dirname is not None:
        fname = os.path.join(dirname, fname)
    if os.path.isdir(fname):
        fname = os.path.join(fname, url.split("/")[-1])
    if os.path.exists(fname) and not overwrite:
        return fname
    raise not_supported(f"mx.test_utils.download({url!r})",
                        f"downloading (put the file at {fname!r} first)")


_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def get_mnist_ubyte() -> None:
    """Check that ``data/`` holds MNIST's four idx-ubyte files (raymod does not download).

    Raises
    ------
    NotSupportedError
        Naming the missing files' paths: MXNet would download them there.
    """
    missing = [os.path.abspath(os.path.join("data", n)) for n in _MNIST_FILES
               if not os.path.exists(os.path.join("data", n))]
    if missing:
        raise not_supported("mx.test_utils.get_mnist_ubyte()",
                            f"downloading (MNIST's idx files {', '.join(missing)} are missing; "
                            "put them there first)")


def _mnist_file(name: str) -> str:
    """Where MNIST file ``name`` is: ``./name.gz`` (MXNet's get_mnist downloads it there),
    else ``data/name`` or ``data/name.gz`` (get_mnist_ubyte's folder)."""
    tried = [f"{name}.gz", os.path.join("data", name), os.path.join("data", f"{name}.gz")]
    for path in tried:
        if os.path.isfile(path):
            return path
    raise not_supported("mx.test_utils.get_mnist()",
                        "downloading (no MNIST file at "
                        f"{', '.join(os.path.abspath(p) for p in tried)}; put one there first)")


def get_mnist() -> dict:
    """MNIST as arrays, read from local files (raymod does not download).

    Each file is looked for where MXNet's ``get_mnist`` downloads it (``./<name>.gz`` in the
    working folder), then in ``data/`` (plain or gzipped), where ``get_mnist_ubyte`` puts it.

    Returns
    -------
    dict
        ``train_data`` and ``test_data``: float32 arrays ``(N, 1, rows, cols)`` scaled to
        [0, 1] (pixel / 255); ``train_label`` and ``test_label``: int8 arrays ``(N,)`` (MXNet's
        types and scaling).

    Raises
    ------
    NotSupportedError
        When a file is in none of those places (naming the paths tried).
    ValueError
        When a file is not an idx file of the expected kind, or images and labels disagree.
    """
    def split(prefix: str) -> tuple:
        images = read_idx(_mnist_file(f"{prefix}-images-idx3-ubyte"), 3)
        labels = read_idx(_mnist_file(f"{prefix}-labels-idx1-ubyte"), 1)
        if len(images) != len(labels):
            raise ValueError(f"get_mnist: {prefix} has {len(images)} images but "
                             f"{len(labels)} labels")
        data = images.reshape(len(images), 1, *images.shape[1:]).astype(np.float32) / 255
        return data, labels.astype(np.int8)

    train_data, train_label = split("train")
    test_data, test_label = split("t10k")
    return {"train_data": train_data, "train_label": train_label,
            "test_data": test_data, "test_label": test_label}


def get_mnist_iterator(batch_size: int, input_shape: Sequence[int], num_parts: int = 1,
                       part_index: int = 0) -> tuple:
    """Training and validation ``mx.io.MNISTIter`` over ``data/``'s idx files.

    Parameters
    ----------
    batch_size : int
        Rows per batch.
    input_shape : tuple of int
        One image's shape: three dimensions (``(1, 28, 28)``) give image batches, anything
        else (``(784,)``) flat rows, as in MXNet.
    num_parts, part_index : int, default 1, 0
        Read only this part of each file (data-parallel readers).

    Returns
    -------
    (MNISTIter, MNISTIter)
        The training iterator (shuffled) and the validation one.

    Raises
    ------
    NotSupportedError
        When ``data/`` lacks one of MNIST's four idx files (naming the paths).
    TypeError
        When ``input_shape`` is not a tuple or list.
    """
    if not isinstance(input_shape, (tuple, list)):
        raise TypeError(f"get_mnist_iterator: input_shape must be a tuple such as (784,) or "
                        f"(1, 28, 28), got {type(input_shape).__name__} {input_shape!r}")
    get_mnist_ubyte()
    flat = len(input_shape) != 3
    common = {"input_shape": input_shape, "batch_size": batch_size, "flat": flat,
              "num_parts": num_parts, "part_index": part_index}
    train = mx.io.MNISTIter(image="data/train-images-idx3-ubyte",
                            label="data/train-labels-idx1-ubyte", shuffle=True, **common)
    val = mx.io.MNISTIter(image="data/t10k-images-idx3-ubyte",
                          label="data/t10k-labels-idx1-ubyte", **common)
    return train, val


def get_cifar10() -> None:
    """Check that ``data/cifar/`` holds CIFAR-10's RecordIO files (raymod does not
    download); :class:`~raymod.io.ImageRecordIter` reads them."""
    need = [os.path.join("data", "cifar", n) for n in ("train.rec", "test.rec")]
    missing = [p for p in need if not os.path.isfile(p)]
    if missing:
        raise not_supported("mx.test_utils.get_cifar10()",
                            f"downloading (CIFAR-10's files {', '.join(missing)} are missing; "
                            "put them there first)")


def get_bz2_data(data_dir: str, data_name: str, url: str, data_origin_name: str) -> None:
    """Check that ``data_dir/data_name`` exists (MXNet would download and unpack it)."""
    path = os.path.join(data_dir, data_name)
    if not os.path.isfile(path):
        raise not_supported("mx.test_utils.get_bz2_data()",
                            f"downloading (no file at {path!r}; put it there first)")


class environment:
    """Context manager (and decorator) setting environment variables for its duration.

    Takes a dict, or one name and value; a value of None unsets the variable.
    """

    def __init__(self, *args: Any):
        self._vars = dict(args[0]) if len(args) == 1 else {args[0]: args[1]}
        self._saved: dict = {}

    def __enter__(self) -> "environment":
        self._saved = {k: os.environ.get(k) for k in self._vars}
        _set_env(self._vars)
        return self

    def __exit__(self, *exc: Any) -> None:
        _set_env(self._saved)

    def __call__(self, f: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return f(*args, **kwargs)
        wrapper.__name__ = f.__name__
        return wrapper


def _set_env(values: dict) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = str(v)


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: float | None = None,
                          atol: float | None = None) -> None:
    """Assert that two (nested tuples of) arrays are close; None on either side passes."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for a, b in zip(t1, t2):
            compare_ndarray_tuple(a, b, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1: Any, opt2: Any, shape: Any, dtype: Any, w_stype: str = "default",
                      g_stype: str = "default", rtol: float = 1e-4, atol: float = 1e-5,
                      compare_states: bool = True, ntensors: int = 1) -> None:
    """Assert that one update of ``opt1`` and of ``opt2`` from the same random weight,
    gradient and fresh state give the same weight (and states). A list of shapes updates
    ``ntensors`` arrays in one ``opt2`` call against one ``opt1`` call each."""
    if w_stype != "default" or g_stype != "default":
        raise not_supported(f"compare_optimizer(w_stype={w_stype!r}, g_stype={g_stype!r})",
                            "sparse storage")
    ctx = default_context()

    def draw(s):
        return nd.array(np.random.uniform(size=s), ctx=ctx, dtype=dtype)
    if not isinstance(shape, list):
        w1, g1 = draw(shape), draw(shape)
        w2, g2 = w1.copy(), g1.copy()
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = [draw(s) for s in shape]
    g1 = [draw(s) for s in shape]
    w2, g2 = [w.copy() for w in w1], [g.copy() for g in g1]
    state2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, state2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, state2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)
