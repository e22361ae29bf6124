"""Weight initializers, as MXNet 1.x's ``mx.init`` (``rm.init`` is this module).

An initializer is called as ``init(desc, arr)`` and fills ``arr`` in place. ``desc`` is an
:class:`InitDesc`: the parameter's name plus the attributes of its variable. Which method
fills the array is decided by the name's suffix (``weight``, ``bias``, ``gamma``, ...),
unless the variable carries its own ``__init__`` attribute, which always wins.

Random draws are made on the host from :func:`raymod.random.generator` (so
``rm.random.seed`` fixes them) and copied into ``arr``, which may be a numpy or a CuPy array.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import logging
import re
import warnings
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from . import random as _random
from .base import check_int, check_real
from .context import as_numpy
from .registry import Registry

_LOG = logging.getLogger(__name__)

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Uniform", "Normal",
           "Xavier", "MSRAPrelu", "Orthogonal", "Constant", "Zero", "One", "Bilinear",
           "LSTMBias", "FusedRNN", "Mixed", "Load"]

_REGISTRY: Registry = Registry("initializer")


def register(klass: type) -> type:
    """Register an :class:`Initializer` subclass under its lower-cased class name.

    Registered initializers can be created by name (``create('xavier')``) and are what
    :meth:`Initializer.dumps` strings refer to.
    """
    return _REGISTRY.register(klass)


def alias(*aliases: str) -> Callable[[type], type]:
    """Decorator registering an initializer under extra names (e.g. ``'zeros'``)."""
    return _REGISTRY.alias(*aliases)


def create(initializer: Any, **kwargs: Any) -> "Initializer":
    """Make an initializer from a name, a ``dumps()`` JSON string, or return an instance.

    Parameters
    ----------
    initializer : str or Initializer
        ``'xavier'``, ``'["constant", {"value": 2}]'``, or an initializer object (returned
        as is).
    **kwargs
        Constructor arguments when ``initializer`` is a plain name.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the registered ones.
    """
    if isinstance(initializer, (Initializer, Mixed, Load)):
        return initializer
    if not isinstance(initializer, str):
        raise TypeError("initializer must be a name, a JSON string or an Initializer, got "
                        f"{type(initializer).__name__}")
    text = initializer.strip()
    if text.startswith("["):
        name, json_kwargs = json.loads(text)
        return _REGISTRY.get(name)(**json_kwargs, **kwargs)
    return _REGISTRY.get(text)(**kwargs)


def _check_choice(owner: str, name: str, value: Any, choices: tuple) -> None:
    """ValueError naming the initializer, the argument and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{owner}: {name} must be one of "
                         f"{', '.join(repr(c) for c in choices)}, got {value!r}")


def _assign(arr: Any, values: Any) -> None:
    """Write ``values`` into ``arr`` in place; ``arr`` may be numpy or cupy."""
    if isinstance(arr, np.ndarray) or np.isscalar(values):
        arr[...] = values
    else:  # a device array: move host values over first
        xp = importlib.import_module(type(arr).__module__.split(".")[0])
        arr[...] = xp.asarray(values, dtype=arr.dtype)


def _host_dtype(arr: Any) -> np.dtype:
    dtype = np.dtype(arr.dtype)
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def _uniform(arr: Any, low: float, high: float) -> None:
    _assign(arr, _random.generator().uniform(low, high, size=arr.shape).astype(_host_dtype(arr)))


def _normal(arr: Any, sigma: float) -> None:
    _assign(arr, _random.generator().normal(0.0, sigma, size=arr.shape).astype(_host_dtype(arr)))


#: the whole table's shape while a block of its rows is filled (see :func:`rows_of_table`):
#: the fan of Xavier-style initializers is the table's, not the block's
_TABLE_SHAPE: contextvars.ContextVar = contextvars.ContextVar("table_shape", default=None)


def _fan_shape(arr: Any) -> tuple:
    """The shape an initializer's scale follows: the table's while filling a block of its
    rows, else the array's."""
    return _TABLE_SHAPE.get() or tuple(arr.shape)


@contextlib.contextmanager
def rows_of_table(shape: tuple) -> Iterator[None]:
    """Within it, initializers size their scale for a table of ``shape`` while filling a
    block of its rows (:class:`raymod.sparse.table_init.TableInit`)."""
    token = _TABLE_SHAPE.set(tuple(shape))
    try:
        yield
    finally:
        _TABLE_SHAPE.reset(token)


def _rms(arr: Any) -> str:
    host = np.asarray(arr.get() if hasattr(arr, "get") and not isinstance(arr, np.ndarray)
                      else arr, dtype=np.float64)
    return str(float(np.linalg.norm(host) / np.sqrt(max(host.size, 1))))


class InitDesc(str):
    """A parameter's name, with the attributes its variable carries.

    It is a ``str`` (the name), so name tests like ``desc.endswith('weight')`` work.

    Parameters
    ----------
    name : str
        The parameter's name.
    attrs : dict of str to str, optional
        Attributes of the variable; ``attrs['__init__']`` (an initializer's ``dumps()``)
        overrides the global initializer for this parameter.
    global_init : Initializer, optional
        The initializer in force for the whole model, for initializers that delegate.
    """

    def __new__(cls, name: str, attrs: Mapping[str, str] | None = None,
                global_init: "Initializer | None" = None) -> "InitDesc":
        desc = super().__new__(cls, name)
        desc.attrs = dict(attrs or {})
        desc.global_init = global_init
        return desc

    def __reduce__(self):
        return (InitDesc, (str(self), self.attrs, self.global_init))


# name suffix -> method, checked in this order, for names without an ``__init__`` attribute
_SUFFIX_RULES = (
    ("weight", "_init_weight"), ("bias", "_init_bias"), ("gamma", "_init_gamma"),
    ("beta", "_init_beta"), ("moving_mean", "_init_zero"), ("moving_var", "_init_one"),
    ("moving_inv_var", "_init_zero"), ("moving_avg", "_init_zero"),
    ("min", "_init_zero"), ("max", "_init_one"),
)


class Initializer:
    """Base class of initializers: fills a parameter array in place, chosen by its name.

    Called as ``init(desc, arr)``. With an :class:`InitDesc` whose ``attrs`` hold an
    ``__init__`` entry, that initializer (``create(attrs['__init__'])``) fills the array
    with its ``_init_weight``. Otherwise the name's suffix decides: ``weight`` ->
    :meth:`_init_weight` (what subclasses define), ``bias`` -> 0, ``gamma`` -> 1,
    ``beta`` -> 0, ``moving_mean`` -> 0, ``moving_var`` -> 1, ``moving_inv_var`` -> 0,
    ``moving_avg`` -> 0, ``min`` -> 0, ``max`` -> 1; any other name is an error.

    Notes
    -----
    PReLU's ``gamma`` starts at 0.25 in MXNet's ``Module.init_params`` not because of a
    rule here but because the LeakyReLU op gives its gamma variable an ``__init__``
    attribute; the initializer side of that is the ``__init__`` rule above.

    Parameters
    ----------
    **kwargs
        The constructor arguments, kept for :meth:`dumps`.
    """

    #: each element is drawn on its own (or constant), so a row_sparse table can be filled
    #: a block of rows at a time, on the KVServers holding them (see
    #: :class:`raymod.sparse.table_init.TableInit`); False where a value depends on the whole array
    by_rows = False

    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Callable[[Any], str] | None = None

    def set_verbosity(self, verbose: bool = False,
                      print_func: Callable[[Any], str] | None = None) -> "Initializer":
        """Log each parameter as it is initialized.

        Parameters
        ----------
        verbose : bool, default False
            Turn logging on or off.
        print_func : callable, optional
            Maps the filled array to a string to log; by default its root mean square.
        """
        self._verbose = verbose
        self._print_func = print_func or _rms
        return self

    def _verbose_print(self, desc: str, how: str, arr: Any) -> None:
        if self._verbose and self._print_func:
            _LOG.info("Initialized %s as %s: %s", desc, how, self._print_func(arr))

    def dumps(self) -> str:
        """JSON ``["<registered name>", {constructor kwargs}]``, what ``create`` reads back."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._kwargs.items())})"

    def __call__(self, desc: str, arr: Any) -> None:
        """Fill ``arr`` in place for the parameter described by ``desc``."""
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        own = desc.attrs.get("__init__", "")
        if own:
            create(own)._init_weight(desc, arr)
            self._verbose_print(desc, own, arr)
            return
        for suffix, method in _SUFFIX_RULES:
            if desc.endswith(suffix):
                getattr(self, method)(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name: str, arr: Any) -> None:
        """Name-only dispatch for a plain-string name (deprecated in MXNet, kept working)."""
        if not isinstance(name, str):
            raise TypeError(f"the parameter name must be a str, got {type(name).__name__}")
        warnings.warn("calling an initializer with a plain str name is deprecated; pass "
                      "rm.init.InitDesc(name, attrs)", DeprecationWarning, stacklevel=3)
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
        elif name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
        elif name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
        else:
            for suffix, method in _SUFFIX_RULES:
                if name.endswith(suffix):
                    getattr(self, method)(name, arr)
                    return
            self._init_default(name, arr)

    # --- the per-pattern fillers; subclasses override _init_weight -----------------------
    def _init_weight(self, name: str, arr: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _init_weight")

    def _init_bias(self, _: str, arr: Any) -> None:
        _assign(arr, 0.0)

    def _init_gamma(self, _: str, arr: Any) -> None:
        _assign(arr, 1.0)

    def _init_beta(self, _: str, arr: Any) -> None:
        _assign(arr, 0.0)

    def _init_zero(self, _: str, arr: Any) -> None:
        _assign(arr, 0.0)

    def _init_one(self, _: str, arr: Any) -> None:
        _assign(arr, 1.0)

    def _init_bilinear(self, _: str, arr: Any) -> None:
        _assign(arr, _bilinear_kernel(arr.shape))

    def _init_loc_bias(self, _: str, arr: Any) -> None:
        if tuple(arr.shape) != (6,):
            raise ValueError("a spatial-transformer loc bias must have shape (6,), "
                             f"got {tuple(arr.shape)}")
        _assign(arr, np.array([1.0, 0, 0, 0, 1.0, 0]))

    def _init_default(self, name: str, _: Any) -> None:
        raise ValueError(
            f"Unknown initialization pattern for {name!r}: without an init attribute only names "
            "ending in weight, bias, gamma (1), beta (0), moving_mean/moving_var/"
            "moving_inv_var/moving_avg, min or max have a default. Give the variable its own "
            "initializer, e.g. rm.sym.Variable(name, init=rm.init.Zero()).")


def _bilinear_kernel(shape: Sequence[int]) -> np.ndarray:
    """An upsampling kernel: a separable tent over the last two axes, tiled over the rest."""
    if len(shape) < 2:
        raise ValueError(f"Bilinear needs at least a 2-d array, got shape {tuple(shape)}")
    f = np.ceil(shape[-1] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    x = np.arange(shape[-1])
    y = np.arange(shape[-2])
    kernel = np.outer(1 - np.abs(y / f - c), 1 - np.abs(x / f - c)).astype(np.float32)
    return np.broadcast_to(kernel, tuple(shape))


@register
class Uniform(Initializer):
    """Weights drawn uniformly from ``[-scale, scale)``.

    Parameters
    ----------
    scale : float, default 0.07
        Half-width of the interval; at least 0.
    """

    by_rows = True

    def __init__(self, scale: float = 0.07):
        check_real("Uniform", "scale", scale, 0)
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr: Any) -> None:
        _uniform(arr, -self.scale, self.scale)


@register
class Normal(Initializer):
    """Weights drawn from a normal distribution with mean 0 and standard deviation ``sigma``.

    Parameters
    ----------
    sigma : float, default 0.01
        Standard deviation; at least 0.
    """

    by_rows = True

    def __init__(self, sigma: float = 0.01):
        check_real("Normal", "sigma", sigma, 0)
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr: Any) -> None:
        _normal(arr, self.sigma)


@register
class Orthogonal(Initializer):
    """Weights whose rows (or columns, when taller than wide) are orthonormal, times ``scale``.

    A random ``(shape[0], prod(shape[1:]))`` matrix is drawn and replaced by an orthonormal
    factor of its SVD (Saxe et al., 2013).

    Parameters
    ----------
    scale : float, default 1.414
        Multiplier of the orthonormal matrix.
    rand_type : {'uniform', 'normal'}, default 'uniform'
        Distribution of the random matrix: U(-1, 1) or N(0, 1).
    """

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform"):
        check_real("Orthogonal", "scale", scale)
        _check_choice("Orthogonal", "rand_type", rand_type, ("uniform", "normal"))
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _: str, arr: Any) -> None:
        nout, nin = arr.shape[0], int(np.prod(arr.shape[1:]))
        rng = _random.generator()
        if self.rand_type == "uniform":
            tmp = rng.uniform(-1.0, 1.0, size=(nout, nin))
        else:
            tmp = rng.normal(0.0, 1.0, size=(nout, nin))
        u, _, vt = np.linalg.svd(tmp, full_matrices=False)
        q = u if u.shape == tmp.shape else vt
        _assign(arr, (self.scale * q).reshape(arr.shape).astype(_host_dtype(arr)))


@register
class Xavier(Initializer):
    """Weights scaled to the layer's fan-in / fan-out (Glorot & Bengio, 2010).

    With ``fan_in = shape[1] * r`` and ``fan_out = shape[0] * r``, where ``r`` is the product
    of the axes after the second (the receptive field), the scale is
    ``sqrt(magnitude / factor)``: weights come from ``U(-scale, scale)`` or ``N(0, scale^2)``.

    Parameters
    ----------
    rnd_type : {'uniform', 'gaussian'}, default 'uniform'
        Distribution.
    factor_type : {'avg', 'in', 'out'}, default 'avg'
        ``factor`` is ``(fan_in + fan_out) / 2``, ``fan_in`` or ``fan_out``.
    magnitude : float, default 3
        Numerator of the scale; greater than 0 (a string such as ``'2'`` is read as a
        number, as MXNet does).
    """

    by_rows = True

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3):
        owner = type(self).__name__
        _check_choice(owner, "rnd_type", rnd_type, ("uniform", "gaussian"))
        _check_choice(owner, "factor_type", factor_type, ("avg", "in", "out"))
        value = magnitude
        if isinstance(value, str):  # MXNet keeps float(magnitude): '2' is a magnitude
            try:
                value = float(value)
            except ValueError:
                pass  # check_real names it below
        check_real(owner, "magnitude", value, 0, low_open=True)
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name: str, arr: Any) -> None:
        shape = _fan_shape(arr)
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer cannot be applied to vector {name}: it needs "
                             f"at least 2 axes, got shape {tuple(shape)}")
        receptive = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            _uniform(arr, -scale, scale)
        else:
            _normal(arr, scale)


@register
class MSRAPrelu(Xavier):
    """Gaussian Xavier initialization for PReLU networks (He et al., 2015).

    Same as ``Xavier('gaussian', factor_type, 2 / (1 + slope**2))``.

    Parameters
    ----------
    factor_type : {'avg', 'in', 'out'}, default 'avg'
        As in :class:`Xavier`.
    slope : float, default 0.25
        Negative slope of the PReLU units (0 for ReLU).
    """

    def __init__(self, factor_type: str = "avg", slope: float = 0.25):
        check_real("MSRAPrelu", "slope", slope)
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Weights of a bilinear-upsampling deconvolution kernel."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, name: str, arr: Any) -> None:
        self._init_bilinear(name, arr)


@register
class Constant(Initializer):
    """Every element set to ``value``.

    Parameters
    ----------
    value : float or array
        The value; an array is broadcast to the parameter's shape.
    """

    def __init__(self, value: Any):
        # _kwargs holds the value as JSON (nested lists for an array), as MXNet's dumps
        # leaves it, so that json.dumps(init._kwargs) works too
        super().__init__(value=_json_value(value))
        self.value = value

    @property
    def by_rows(self) -> bool:
        """A scalar fills any block of rows; an array is broadcast to the whole shape."""
        return bool(np.isscalar(self.value))

    def _init_weight(self, _: str, arr: Any) -> None:
        value = self.value
        if not np.isscalar(value):
            value = np.asarray(value.get() if hasattr(value, "get") and
                               not isinstance(value, np.ndarray) else value)
        _assign(arr, value)

    def dumps(self) -> str:
        """JSON ``["constant", {"value": ...}]``; an array value is written as nested lists."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])


def _json_value(value: Any) -> Any:
    """A scalar or an array (numpy, cupy, list) as plain JSON types."""
    if isinstance(value, np.generic):
        return value.item()
    if np.isscalar(value):
        return value
    return np.asarray(value.get() if hasattr(value, "get") and
                      not isinstance(value, np.ndarray) else value).tolist()


@register
@alias("zeros")
class Zero(Initializer):
    """Every element set to 0."""

    by_rows = True

    def __init__(self):
        super().__init__()

    def _init_weight(self, _: str, arr: Any) -> None:
        _assign(arr, 0.0)


@register
@alias("ones")
class One(Initializer):
    """Every element set to 1."""

    by_rows = True

    def __init__(self):
        super().__init__()

    def _init_weight(self, _: str, arr: Any) -> None:
        _assign(arr, 1.0)


@register
class LSTMBias(Initializer):
    """LSTM bias: 0 except the forget gate, set to ``forget_bias``.

    The bias holds the four gates stacked as (input, forget, cell, output); the second
    quarter is the forget gate. A positive forget bias helps gradients flow early in
    training (Jozefowicz et al., 2015).

    Parameters
    ----------
    forget_bias : float, default 1.0
        Value of the forget-gate quarter.
    """

    def __init__(self, forget_bias: float = 1.0):
        check_real("LSTMBias", "forget_bias", forget_bias)
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name: str, arr: Any) -> None:
        num_hidden = int(arr.shape[0]) // 4
        values = np.zeros(arr.shape, dtype=_host_dtype(arr))
        values[num_hidden:2 * num_hidden] = self.forget_bias
        _assign(arr, values)


@register
class FusedRNN(Initializer):
    """The flat ``parameters`` vector of a fused ``RNN`` op, filled gate by gate.

    The vector is cut into the per-gate weights and biases of the unfused cells
    (:meth:`raymod.rnn.FusedRNNCell.unpack_weights`); each is filled by ``init`` (or, when
    None, by the model's global initializer under its per-gate name), LSTM forget-gate biases
    are set to ``forget_bias``, and the pieces are packed back. ``rm.rnn.FusedRNNCell`` gives
    its ``parameters`` variable this initializer, as MXNet's does.

    Parameters
    ----------
    init : Initializer or str or None
        For the per-gate arrays; None uses the global initializer.
    num_hidden, num_layers : int
        The cell's sizes.
    mode : str
        ``rnn_relu``, ``rnn_tanh``, ``lstm`` or ``gru``.
    bidirectional : bool, default False
    forget_bias : float, default 1.0
    """

    def __init__(self, init: Any, num_hidden: int, num_layers: int, mode: str,
                 bidirectional: bool = False, forget_bias: float = 1.0):
        check_int("FusedRNN", "num_hidden", num_hidden, 1)
        check_int("FusedRNN", "num_layers", num_layers, 1)
        _check_choice("FusedRNN", "mode", mode, ("rnn_relu", "rnn_tanh", "lstm", "gru"))
        check_real("FusedRNN", "forget_bias", forget_bias)
        if isinstance(init, str):
            init = create(init)
        super().__init__(init=None if init is None else init.dumps(), num_hidden=num_hidden,
                         num_layers=num_layers, mode=mode, bidirectional=bidirectional,
                         forget_bias=forget_bias)
        self._init = init
        self._cell_args = (num_hidden, num_layers, mode, bidirectional)
        self._forget_bias = forget_bias

    def _init_weight(self, desc: str, arr: Any) -> None:
        from .rnn.fused import FusedRNNCell  # the cell knows the layout; rnn sits above
        num_hidden, num_layers, mode, bidirectional = self._cell_args
        cell = FusedRNNCell(num_hidden, num_layers, mode, bidirectional, prefix="")
        pieces = cell.unpack_weights({"parameters": as_numpy(arr)})
        outer = getattr(desc, "global_init", None)
        for name, piece in pieces.items():
            if mode == "lstm" and name.endswith("_f_bias"):
                piece[...] = self._forget_bias
            elif self._init is not None:
                self._init(InitDesc(name, global_init=outer), piece)
            elif outer is not None:
                outer(InitDesc(name, global_init=outer), piece)
            else:
                raise ValueError(f"FusedRNN for {str(desc)!r}: no init given and no global "
                                 "initializer to fill the per-gate arrays with")
        _assign(arr, cell.pack_weights(pieces)["parameters"])


class Mixed:
    """Pick an initializer by the first regular expression that matches the name.

    Parameters
    ----------
    patterns : list of str
        Regular expressions, tried in order with ``re.match``.
    initializers : list of Initializer
        One per pattern.

    Examples
    --------
    >>> init = Mixed(['bias', '.*'], [Constant(0.1), Uniform(0.1)])   # doctest: +SKIP
    """

    def __init__(self, patterns: Sequence[str], initializers: Sequence[Any]):
        if len(patterns) != len(initializers):
            raise ValueError(f"Mixed needs one initializer per pattern: got {len(patterns)} "
                             f"patterns and {len(initializers)} initializers")
        self.map = [(re.compile(p), create(i)) for p, i in zip(patterns, initializers)]

    def __call__(self, name: str, arr: Any) -> None:
        """Fill ``arr`` with the initializer of the first pattern matching ``name``."""
        for prog, init in self.map:
            if prog.match(name):
                init(name, arr)
                return
        raise ValueError(f"parameter name {str(name)!r} matches none of the patterns "
                         f"{[p.pattern for p, _ in self.map]}; add a '.*' pattern last with a "
                         "default initializer")


def _load_param_file(path: str) -> dict:
    """Arrays saved at ``path``: a ``.npz`` file, or a ``.params`` file in MXNet's format."""
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    from .ndarray_io import load
    arrays = load(path)
    if not isinstance(arrays, dict):
        raise ValueError(f"{path!r} holds an unnamed list of arrays; Load needs named parameters")
    return arrays


class Load:
    """Initialize from saved parameters, falling back to another initializer.

    Parameters
    ----------
    param : str or dict of str to array
        The arrays by name, or a file holding them. ``arg:`` / ``aux:`` name prefixes (as
        written by ``save_checkpoint``) are dropped.
    default_init : Initializer, optional
        For names not in ``param``; without one such names are an error.
    verbose : bool, default False
        Log where each parameter's values came from.
    """

    def __init__(self, param: str | Mapping[str, Any], default_init: Any = None,
                 verbose: bool = False):
        if isinstance(param, str):
            param = _load_param_file(param)
        if not isinstance(param, Mapping):
            raise TypeError(f"param must be a dict of arrays or a file name, got "
                            f"{type(param).__name__}")
        self.param = {(k[4:] if k.startswith(("arg:", "aux:")) else k): v
                      for k, v in param.items()}
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name: str, arr: Any) -> None:
        """Copy the saved array called ``name`` into ``arr``, else use ``default_init``."""
        if name in self.param:
            saved = self.param[name]
            if tuple(saved.shape) != tuple(arr.shape):
                raise ValueError(f"parameter {str(name)!r} cannot be loaded: shape mismatch, "
                                 f"target {tuple(arr.shape)} vs loaded {tuple(saved.shape)}")
            _assign(arr, saved)
            if self.verbose:
                _LOG.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise ValueError(f"cannot initialize {str(name)!r}: not in the loaded parameters "
                             "and no default_init given")
        self.default_init(name, arr)
        if self.verbose:
            _LOG.info("Initialized %s by default", name)
