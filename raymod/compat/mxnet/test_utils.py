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
from ...sparse._common import SparseBase
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
    dtype = np.dtype(value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype)
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
    if isinstance(a, SparseBase):  # compared by value, as MXNet's helpers do (asnumpy)
        return a.asnumpy()
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
    """A random array: standard-normal dense values, or with ``stype`` ``'csr'`` /
    ``'row_sparse'`` the sparse array of :func:`rand_sparse_ndarray`."""
    if stype == "default":
        return nd.array(random_arrays(tuple(shape)), ctx=ctx, dtype=dtype)
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, dtype=dtype,
                                 modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices,
                                 distribution=distribution, ctx=ctx)
    return arr


def assign_each(the_input: Any, function: Any) -> np.ndarray:
    """``function`` applied to every element of ``the_input`` (a copy when None)."""
    if function is None:
        return np.array(the_input)
    flat = np.asarray(the_input).reshape(-1)
    return np.array([function(v) for v in flat], dtype=np.float64).reshape(np.shape(the_input))


def assign_each2(input1: Any, input2: Any, function: Any) -> np.ndarray:
    """``function`` applied to every pair of elements of two same-shaped arrays."""
    if function is None:
        return np.array(input1)
    a, b = np.asarray(input1), np.asarray(input2)
    if a.shape != b.shape:
        raise AssertionError(f"assign_each2: shapes {a.shape} and {b.shape} differ")
    pairs = zip(a.reshape(-1), b.reshape(-1))
    return np.array([function(x, y) for x, y in pairs], dtype=np.float64).reshape(a.shape)


def shuffle_csr_column_indices(csr: Any) -> None:
    """Shuffle the column ids (and not the values) within each row of a scipy csr matrix,
    in place: a valid matrix whose columns are no longer sorted."""
    for row in range(len(csr.indptr) - 1):
        lo, hi = csr.indptr[row], csr.indptr[row + 1]
        ids = np.array(csr.indices[lo:hi])
        np.random.shuffle(ids)
        csr.indices[lo:hi] = ids


def _check_csr_request(rows: int, cols: int, density: float, distribution: str) -> None:
    if not 0 <= density <= 1:
        raise ValueError(f"density has to be between 0 and 1, got {density}")
    if rows <= 0 or cols <= 0:
        raise ValueError(f"num_rows and num_cols must be positive, got {rows}, {cols}")
    if distribution == "powerlaw" and int(rows * cols * density) < 2 * rows:
        raise ValueError(f"powerlaw: density {density} is too low for shape ({rows}, {cols}); "
                         "need rows * cols * density >= 2 * rows")


def _uniform_csr(rows: int, cols: int, density: float, dtype: Any, data_init: Any,
                 shuffle: bool) -> Any:
    """A csr array with ``density`` of its entries at uniformly drawn places."""
    from scipy import sparse as spsp

    _check_csr_request(rows, cols, density, "uniform")
    m = spsp.random(rows, cols, density, dtype=dtype, format="csr")
    if data_init is not None:
        m.data.fill(data_init)
    if shuffle:
        shuffle_csr_column_indices(m)
    return mx.nd.sparse.csr_matrix((m.data, m.indices, m.indptr), shape=(rows, cols),
                                   dtype=dtype)


def _powerlaw_csr(rows: int, cols: int, density: float, dtype: Any) -> Any:
    """A csr array whose rows hold 1, 2, 4, 8, ... values from column 0 on (each row twice
    the previous while the budget ``rows * cols * density`` lasts; past the last column
    whole rows), as MXNet's test data generator."""
    _check_csr_request(rows, cols, density, "powerlaw")
    budget = int(rows * cols * density)
    dense = np.zeros((rows, cols), dtype=dtype)

    def draw() -> float:
        return 1 + np.random.uniform(0.001, 2)

    for row in range(rows):  # every row starts with one value
        dense[row, 0] = draw()
        budget -= 1
        if budget <= 0:
            return mx.nd.array(dense).tostype("csr")
    width = 2
    for row in range(rows):
        limit = min(cols, width)
        if limit == cols and budget > limit:
            dense[row] = draw()
            budget -= limit - 1
            if budget <= 0:
                return mx.nd.array(dense).tostype("csr")
            continue
        for col in range(1, limit):
            dense[row, col] = draw()
            budget -= 1
            if budget <= 0:
                return mx.nd.array(dense).tostype("csr")
        width *= 2
    if budget > 0:
        raise ValueError(f"powerlaw: density {density} is too high for shape ({rows}, {cols})")
    return mx.nd.array(dense).tostype("csr")


def rand_sparse_ndarray(shape: tuple, stype: str, density: Any = None, dtype: Any = None,
                        distribution: Any = None, data_init: Any = None,
                        rsp_indices: Any = None, modifier_func: Any = None,
                        shuffle_csr_indices: bool = False, ctx: Context | None = None) -> tuple:
    """A random sparse array and its parts, as MXNet's test helper.

    Parameters
    ----------
    shape : tuple of int
        2-d for csr.
    stype : {'csr', 'row_sparse'}
    density : float, optional
        The share of entries (csr) or rows (row_sparse) held; random in [0, 1) by default.
    dtype : numpy dtype, optional
        float32 by default.
    distribution : {'uniform', 'powerlaw'}, optional
        Where a csr array's values are ('powerlaw': see the generator); uniform by default.
    data_init : float, optional
        Every stored value is this.
    rsp_indices : array of int, optional
        The rows a row_sparse array holds (instead of drawing them).
    modifier_func : callable, optional
        Applied to every stored value of a row_sparse array.
    shuffle_csr_indices : bool
        Leave a csr array's column ids unsorted within rows.
    ctx : Context, optional
        Default: :func:`default_context`.

    Returns
    -------
    (CSRNDArray, (indptr, indices, data)) or (RowSparseNDArray, (values, indices))
    """
    ctx = ctx or default_context()
    density = np.random.rand() if density is None else density
    dtype = np.float32 if dtype is None else dtype
    distribution = distribution or "uniform"
    if stype == "row_sparse":
        if distribution != "uniform":
            raise AssertionError(f"distribution {distribution!r} is not supported for "
                                 "row_sparse")
        if rsp_indices is not None:
            indices = np.asarray(rsp_indices)
            assert len(indices) <= shape[0]
        else:
            indices = np.argwhere(np.random.rand(shape[0]) < density).reshape(-1)
        if indices.shape[0] == 0:
            arr = nd.zeros(shape, stype="row_sparse", dtype=dtype, ctx=ctx)
            return arr, (np.array([], dtype=dtype), np.array([]))
        values = np.random.rand(indices.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            values.fill(data_init)
        if modifier_func is not None:
            values = assign_each(values, modifier_func)
        arr = mx.nd.sparse.row_sparse_array((values, indices), shape=shape, dtype=dtype,
                                            ctx=ctx)
        return arr, (values, indices)
    if stype == "csr":
        if len(shape) != 2:
            raise AssertionError(f"a csr array is 2-d, got shape {shape}")
        if distribution == "uniform":
            csr = _uniform_csr(shape[0], shape[1], density, dtype, data_init,
                               shuffle_csr_indices)
        elif distribution == "powerlaw":
            csr = _powerlaw_csr(shape[0], shape[1], density, dtype)
        else:
            raise AssertionError(f"distribution not supported: {distribution!r}")
        csr = csr.as_in_context(ctx)
        return csr, (csr.indptr, csr.indices, csr.data)
    raise AssertionError(f"unknown storage type {stype!r}")


def create_sparse_array(shape: tuple, stype: str, data_init: Any = None,
                        rsp_indices: Any = None, dtype: Any = None, modifier_func: Any = None,
                        density: float = .5, shuffle_csr_indices: bool = False) -> Any:
    """A random sparse array (:func:`rand_sparse_ndarray`); ``rsp_indices`` are sorted."""
    if stype not in ("row_sparse", "csr"):
        raise AssertionError(f"Unknown storage type: {stype}")
    if stype == "row_sparse" and rsp_indices is not None:
        rsp_indices = np.sort(np.asarray(rsp_indices))
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, data_init=data_init,
                                 rsp_indices=rsp_indices if stype == "row_sparse" else None,
                                 dtype=dtype, modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices)
    return arr


def create_sparse_array_zd(shape: tuple, stype: str, density: float, data_init: Any = None,
                           rsp_indices: Any = None, dtype: Any = None,
                           modifier_func: Any = None, shuffle_csr_indices: bool = False) -> Any:
    """:func:`create_sparse_array` where a row_sparse array holds ``rsp_indices`` only."""
    if stype == "row_sparse":
        density = 0.0
        if rsp_indices is not None:
            assert len(rsp_indices) <= shape[0]
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices,
                               dtype=dtype, modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)


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


# --- checking a symbol's forward and backward through an executor -----------------------------
_NUMERIC_EPS = {np.dtype(np.float16): 1.0 / 2 ** 6, np.dtype(np.float32): 1.0 / 2 ** 9,
                np.dtype(np.float64): 1.0 / 2 ** 14}


def _as_input(value: Any, ctx: Context, dtype: Any) -> Any:
    """A numpy value as an NDArray on ``ctx`` (``dtype``, or its own for ``'asnumpy'``);
    NDArrays, sparse ones included, as they are."""
    if isinstance(value, np.ndarray):
        return nd.array(value, ctx=ctx, dtype=value.dtype if dtype == "asnumpy" else dtype)
    return value


def _named(names: list, values: Any, what: str, ctx: Context, dtype: Any) -> dict:
    """``values`` (a list in ``names``' order, or a dict naming every one) as name -> array."""
    if isinstance(values, dict):
        if set(values) != set(names):
            raise ValueError(f"the {what} given ({sorted(values)}) are not the symbol's "
                             f"({sorted(names)})")
    else:
        values = dict(zip(names, values))
    return {k: _as_input(v, ctx, dtype) for k, v in values.items()}


def check_symbolic_forward(sym: Any, location: Any, expected: Any, rtol: Any = None,
                           atol: Any = None, aux_states: Any = None, ctx: Context | None = None,
                           equal_nan: bool = False, dtype: Any = np.float32) -> list:
    """Bind ``sym`` to ``location`` (arrays by argument, in order or by name), run forward
    (not training) and assert that the outputs are close to ``expected``; the outputs.

    Numpy values become NDArrays of ``dtype`` (``'asnumpy'``: their own); NDArrays, sparse
    ones included, are bound as they are.
    """
    ctx = ctx or default_context()
    args = _named(sym.list_arguments(), location, "arguments", ctx, dtype)
    aux = None if aux_states is None else \
        _named(sym.list_auxiliary_states(), aux_states, "auxiliary states", ctx, dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    grads = {k: nd.zeros(v.shape, ctx=ctx, dtype=v.dtype) for k, v in args.items()}
    exe = sym.bind(ctx, args=args, args_grad=grads, aux_states=aux)
    exe.forward(is_train=False)
    for name, want, got in zip(sym.list_outputs(), expected, exe.outputs):
        assert_almost_equal(want, got, rtol, atol, (f"EXPECTED_{name}", f"FORWARD_{name}"),
                            equal_nan=equal_nan)
    return exe.outputs


def check_symbolic_backward(sym: Any, location: Any, out_grads: Any, expected: Any,
                            rtol: Any = None, atol: Any = None, aux_states: Any = None,
                            grad_req: Any = "write", ctx: Context | None = None,
                            grad_stypes: dict | None = None, equal_nan: bool = False,
                            dtype: Any = np.float32) -> dict:
    """Bind ``sym`` to ``location``, run forward (training) and backward with ``out_grads``,
    and assert that the argument gradients are close to ``expected`` (by argument, in order
    or by name); the gradient arrays by name.

    Gradients start as random values, so ``grad_req='add'`` is checked as the change and
    ``'null'`` as no change. ``grad_stypes`` stores some gradients sparse (``'row_sparse'``).
    """
    ctx = ctx or default_context()
    args = _named(sym.list_arguments(), location, "arguments", ctx, dtype)
    aux = None if aux_states is None else \
        _named(sym.list_auxiliary_states(), aux_states, "auxiliary states", ctx, dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))
    start = {k: np.random.normal(size=np.shape(v)) for k, v in expected.items()}
    grads = {}
    for k, v in start.items():
        stype = (grad_stypes or {}).get(k) or "default"
        if stype != "default":
            grads[k] = create_sparse_array(v.shape, stype, density=0.0)
        else:
            want = getattr(expected[k], "dtype", np.float32)
            grads[k] = nd.array(v, ctx=ctx, dtype=want if dtype == "asnumpy" else dtype)
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req))
    exe = sym.bind(ctx, args=args, args_grad=grads, aux_states=aux, grad_req=grad_req)
    exe.forward(is_train=True)
    if isinstance(out_grads, dict):
        out_grads = {k: _as_input(v, ctx, dtype) for k, v in out_grads.items()}
    elif out_grads is not None:
        out_grads = [_as_input(v, ctx, dtype) for v in out_grads]
    exe.backward(out_grads)
    for name, want in expected.items():
        req, got = grad_req[name], exe.grad_dict.get(name, grads[name])
        names = (f"EXPECTED_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(want, got, rtol, atol, names, equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(want, _host(got) - start[name], rtol, atol, names,
                                equal_nan=equal_nan)
        elif req == "null":
            assert_almost_equal(start[name], got, rtol, atol, names, equal_nan=equal_nan)
        else:
            raise ValueError(f"invalid grad_req {req!r} for argument {name!r}")
    return grads


def numeric_grad(executor: Any, location: dict, aux_states: dict | None = None,
                 eps: float = 1e-4, use_forward_train: bool = True,
                 dtype: Any = np.float32) -> dict:
    """Central finite differences of the sum of ``executor``'s first output, per element of
    every floating-point argument in ``location`` (name -> numpy array); arguments bound
    sparse get each probe in their own storage."""
    def store(name: str, value: np.ndarray) -> None:
        target = executor.arg_dict[name]
        probe = nd.array(value, dtype=dtype)
        target[:] = probe if target.stype == "default" else probe.tostype(target.stype)

    grads = {k: np.zeros(np.shape(v), dtype=dtype) for k, v in location.items()}
    for name, value in location.items():
        value = np.array(value, order="C")
        if value.dtype.kind != "f":
            continue
        flat = value.reshape(-1)
        for i in range(flat.size):
            keep = flat[i]
            outs = []
            for step in (eps / 2.0, -eps / 2.0):
                flat[i] = keep + step
                store(name, value)
                for key, val in (aux_states or {}).items():
                    executor.aux_dict[key][:] = val
                executor.forward(is_train=use_forward_train)
                outs.append(np.array(_host(executor.outputs[0])))
            flat[i] = keep
            # the outputs' difference first: summing each first loses float32 digits
            grads[name].reshape(-1)[i] = (outs[0] - outs[1]).sum() / eps
        store(name, value)
    return grads


def check_numeric_gradient(sym: Any, location: Any, aux_states: Any = None,
                           numeric_eps: Any = None, rtol: Any = None, atol: Any = None,
                           grad_nodes: Any = None, use_forward_train: bool = True,
                           ctx: Context | None = None, grad_stype_dict: dict | None = None,
                           dtype: Any = np.float32) -> None:
    """Assert that ``sym``'s backward agrees with finite differences at ``location``.

    The symbol's output is multiplied by a random projection and made a loss, so one
    backward gives every argument's gradient; ``grad_nodes`` (names, or name -> grad_req)
    limits which are checked; ``grad_stype_dict`` stores some gradients sparse.
    """
    ctx = ctx or default_context()
    args = _named(sym.list_arguments(), location, "arguments", ctx, dtype)
    host = {k: _host(v) for k, v in args.items()}
    aux = None if aux_states is None else \
        _named(sym.list_auxiliary_states(), aux_states, "auxiliary states", ctx, dtype)
    aux_host = None if aux is None else {k: _host(v) for k, v in aux.items()}
    if grad_nodes is None:
        grad_nodes = sym.list_arguments()
    grad_req = dict(grad_nodes) if isinstance(grad_nodes, dict) else \
        {k: "write" for k in grad_nodes}
    _, out_shapes, _ = sym.infer_shape(**{k: v.shape for k, v in args.items()})
    proj = mx.sym.Variable("__random_proj")
    loss = mx.sym.make_loss(sym * proj)
    args["__random_proj"] = nd.array(np.random.rand(*out_shapes[0]) + 0.1, ctx=ctx,
                                     dtype=dtype)
    start = {k: np.random.normal(0, 0.01, size=args[k].shape) for k in grad_req}
    start["__random_proj"] = np.random.normal(0, 0.01, size=out_shapes[0])
    grads = {k: nd.array(v, ctx=ctx, dtype=dtype) for k, v in start.items()}
    for k, stype in (grad_stype_dict or {}).items():
        if k in grads and stype not in (None, "default"):
            grads[k] = nd.zeros(grads[k].shape, ctx=ctx, dtype=grads[k].dtype, stype=stype)
    exe = loss.bind(ctx, args=args, args_grad=grads, aux_states=aux,
                    grad_req={**grad_req, "__random_proj": "write"})
    exe.forward(is_train=True)
    eps = numeric_eps if isinstance(numeric_eps, (int, float)) else \
        (numeric_eps or {}).get(np.dtype(dtype), _NUMERIC_EPS.get(np.dtype(dtype), 1e-4))
    exe.backward()
    symbolic = {k: _host(exe.grad_dict.get(k, grads[k])) for k in grad_req}
    # finite differences of the checked arguments only: the others' are never compared
    numeric = numeric_grad(exe, {k: host[k] for k in grad_req}, aux_host, eps=eps,
                           use_forward_train=use_forward_train, dtype=dtype)
    for name, req in grad_req.items():
        names = (f"NUMERICAL_{name}", f"BACKWARD_{name}")
        if req == "write":
            assert_almost_equal(numeric[name], symbolic[name], rtol, atol, names)
        elif req == "add":
            assert_almost_equal(numeric[name], symbolic[name] - start[name], rtol, atol, names)
        elif req == "null":
            assert_almost_equal(start[name], symbolic[name], rtol, atol, names)
        else:
            raise ValueError(f"invalid grad_req {req!r} for argument {name!r}")
