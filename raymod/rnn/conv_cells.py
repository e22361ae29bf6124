"""Convolutional recurrent cells (ConvRNN, ConvLSTM, ConvGRU), as MXNet 1.x's ``mx.rnn``.

The input-to-state and state-to-state transforms are convolutions instead of dense layers,
so states keep the spatial layout of the input (Shi et al., 2015). Weights are named as
MXNet's: ``<prefix>i2h_weight``, ``<prefix>i2h_bias``, ``<prefix>h2h_weight``,
``<prefix>h2h_bias``, the gates stacked along the filters; step nodes as the dense cells'.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from .. import symbol as sym
from ..symbol.symbol import Symbol
from .cells import BaseRNNCell, RNNParams

__all__ = ["BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell"]

_LEAKY = functools.partial(sym.LeakyReLU, act_type="leaky", slope=0.2)


class BaseConvRNNCell(BaseRNNCell):
    """Shared set-up of the convolutional cells: convolution settings, state shape, weights.

    Parameters
    ----------
    input_shape : tuple of int
        Shape of one step's input, batch included, e.g. ``(1, 3, 16, 10)`` for NCHW.
    num_hidden : int
        Channels of the output and of each state.
    h2h_kernel : tuple of int
        Kernel of the state-to-state convolution; both sizes odd (it is padded to keep the
        state's size).
    h2h_dilate : tuple of int
        Dilation of the state-to-state convolution.
    i2h_kernel, i2h_stride, i2h_pad, i2h_dilate : tuple of int
        Kernel, stride, padding and dilation of the input-to-state convolution; they fix the
        state's spatial size.
    i2h_weight_initializer, h2h_weight_initializer : str or Initializer, optional
        Initializers attached to the weights (None: the global one).
    i2h_bias_initializer, h2h_bias_initializer : str or Initializer
        Initializers attached to the biases.
    activation : str or callable
        An ``Activation`` act_type, or a function of a symbol and ``name=``.
    prefix : str
        Prefix of node and weight names.
    params : RNNParams, optional
        Share weights with another cell.
    conv_layout : str, default 'NCHW'
        Layout of the convolutions (raymod's Convolution takes channel-first layouts).
    """

    def __init__(self, input_shape: Sequence[int], num_hidden: int,
                 h2h_kernel: Sequence[int], h2h_dilate: Sequence[int],
                 i2h_kernel: Sequence[int], i2h_stride: Sequence[int],
                 i2h_pad: Sequence[int], i2h_dilate: Sequence[int],
                 i2h_weight_initializer: Any, h2h_weight_initializer: Any,
                 i2h_bias_initializer: Any, h2h_bias_initializer: Any, activation: Any,
                 prefix: str = "", params: RNNParams | None = None, conv_layout: str = "NCHW"):
        super().__init__(prefix=prefix, params=params)
        if any(k % 2 == 0 for k in h2h_kernel):
            raise ValueError(f"{type(self).__name__}: h2h_kernel sizes must be odd (the "
                             f"state keeps its size), got h2h_kernel={tuple(h2h_kernel)}")
        self._h2h_kernel = tuple(h2h_kernel)
        self._h2h_dilate = tuple(h2h_dilate)
        self._h2h_pad = tuple(d * (k - 1) // 2 for k, d in zip(h2h_kernel, h2h_dilate))
        self._i2h_kernel = tuple(i2h_kernel)
        self._i2h_stride = tuple(i2h_stride)
        self._i2h_pad = tuple(i2h_pad)
        self._i2h_dilate = tuple(i2h_dilate)
        self._num_hidden = num_hidden
        self._input_shape = tuple(input_shape)
        self._conv_layout = conv_layout
        self._activation = activation
        # the state has the shape of the input-to-state convolution's output, batch free
        probe = sym.Convolution(data=sym.Variable("data"), num_filter=num_hidden,
                                kernel=self._i2h_kernel, stride=self._i2h_stride,
                                pad=self._i2h_pad, dilate=self._i2h_dilate, layout=conv_layout)
        out = probe.infer_shape(data=self._input_shape)[1][0]
        self._state_shape = (0,) + tuple(out[1:])
        self._iW = self._params.get("i2h_weight", init=i2h_weight_initializer)
        self._hW = self._params.get("h2h_weight", init=h2h_weight_initializer)
        self._iB = self._params.get("i2h_bias", init=i2h_bias_initializer)
        self._hB = self._params.get("h2h_bias", init=h2h_bias_initializer)

    @property
    def _num_gates(self) -> int:
        return len(self._gate_names)

    @property
    def state_info(self) -> list[dict]:
        info = {"shape": self._state_shape, "__layout__": self._conv_layout}
        return [dict(info) for _ in range(self._num_states)]

    _num_states = 1

    def _conv_forward(self, inputs: Symbol, states: list, name: str) -> tuple[Symbol, Symbol]:
        """This step's ``i2h`` and ``h2h`` convolutions (all gates stacked)."""
        filters = self._num_hidden * self._num_gates
        i2h = sym.Convolution(name=f"{name}i2h", data=inputs, num_filter=filters,
                              kernel=self._i2h_kernel, stride=self._i2h_stride,
                              pad=self._i2h_pad, dilate=self._i2h_dilate, weight=self._iW,
                              bias=self._iB, layout=self._conv_layout)
        h2h = sym.Convolution(name=f"{name}h2h", data=states[0], num_filter=filters,
                              kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                              pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
                              bias=self._hB, layout=self._conv_layout)
        return i2h, h2h

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        raise NotImplementedError("BaseConvRNNCell is abstract: use ConvRNNCell, "
                                  "ConvLSTMCell or ConvGRUCell")


class ConvRNNCell(BaseConvRNNCell):
    """Convolutional Elman cell: ``h' = act(conv_i2h(x) + conv_h2h(h))``.

    Parameters are those of :class:`BaseConvRNNCell`, with MXNet's defaults: 3x3 kernels,
    stride, dilation 1 and input padding 1, zero-initialised biases, a leaky ReLU (slope
    0.2) activation and prefix ``'ConvRNN_'``.
    """

    def __init__(self, input_shape: Sequence[int], num_hidden: int,
                 h2h_kernel: Sequence[int] = (3, 3), h2h_dilate: Sequence[int] = (1, 1),
                 i2h_kernel: Sequence[int] = (3, 3), i2h_stride: Sequence[int] = (1, 1),
                 i2h_pad: Sequence[int] = (1, 1), i2h_dilate: Sequence[int] = (1, 1),
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 activation: Any = _LEAKY, prefix: str = "ConvRNN_",
                 params: RNNParams | None = None, conv_layout: str = "NCHW"):
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                         i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                         activation, prefix, params, conv_layout)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("",)

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    """Convolutional LSTM (Shi et al., 2015); states ``[h, c]``.

    Gates stacked as (input, forget, cell candidate, output) along the channel axis; the
    candidate and the cell output use ``activation`` (MXNet's default: leaky ReLU, slope
    0.2), the gates sigmoids. Parameters as :class:`ConvRNNCell`, prefix ``'ConvLSTM_'``.
    """

    _num_states = 2

    def __init__(self, input_shape: Sequence[int], num_hidden: int,
                 h2h_kernel: Sequence[int] = (3, 3), h2h_dilate: Sequence[int] = (1, 1),
                 i2h_kernel: Sequence[int] = (3, 3), i2h_stride: Sequence[int] = (1, 1),
                 i2h_pad: Sequence[int] = (1, 1), i2h_dilate: Sequence[int] = (1, 1),
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 activation: Any = _LEAKY, prefix: str = "ConvLSTM_",
                 params: RNNParams | None = None, conv_layout: str = "NCHW"):
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                         i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                         activation, prefix, params, conv_layout)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        gates = sym.SliceChannel(i2h + h2h, num_outputs=4, axis=self._conv_layout.find("C"),
                                 name=f"{name}slice")
        in_gate = sym.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = sym.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        candidate = self._get_activation(gates[2], self._activation, name=f"{name}c")
        out_gate = sym.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = sym.elemwise_add(forget_gate * states[1], in_gate * candidate,
                                  name=f"{name}state")
        next_h = sym.elemwise_mul(out_gate, self._get_activation(next_c, self._activation),
                                  name=f"{name}out")
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU; the reset gate scales ``conv_h2h(h)`` (as :class:`GRUCell`).

    Gates stacked as (reset, update, new); the new state uses ``activation`` (MXNet's
    default: leaky ReLU, slope 0.2). Parameters as :class:`ConvRNNCell`, prefix
    ``'ConvGRU_'``.
    """

    def __init__(self, input_shape: Sequence[int], num_hidden: int,
                 h2h_kernel: Sequence[int] = (3, 3), h2h_dilate: Sequence[int] = (1, 1),
                 i2h_kernel: Sequence[int] = (3, 3), i2h_stride: Sequence[int] = (1, 1),
                 i2h_pad: Sequence[int] = (1, 1), i2h_dilate: Sequence[int] = (1, 1),
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 activation: Any = _LEAKY, prefix: str = "ConvGRU_",
                 params: RNNParams | None = None, conv_layout: str = "NCHW"):
        super().__init__(input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                         i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                         h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                         activation, prefix, params, conv_layout)

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_r", "_z", "_o")

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        # MXNet names these nodes with a doubled underscore (ConvGRU_t0__r_act); kept
        name = self._step_name()
        i2h, h2h = self._conv_forward(inputs, states, name)
        i2h_r, i2h_z, i2h_n = sym.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h_n = sym.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = sym.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = sym.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        candidate = self._get_activation(i2h_n + reset_gate * h2h_n, self._activation,
                                         name=f"{name}_h_act")
        next_h = sym.elemwise_add((1.0 - update_gate) * candidate, update_gate * states[0],
                                  name=f"{name}out")
        return next_h, [next_h]
