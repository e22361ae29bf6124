"""FusedRNNCell: a whole stack of recurrent layers as one ``RNN`` node (MXNet's fused cell)."""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from .. import symbol as sym
from ..context import context_of
from ..initializer import FusedRNN
from ..symbol.symbol import Symbol
from .cells import (BaseRNNCell, BidirectionalCell, GRUCell, LSTMCell, RNNCell, RNNParams,
                    SequentialRNNCell, _normalize_sequence)
from .modifiers import DropoutCell

_GATE_NAMES = {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"),
               "gru": ("_r", "_z", "_o")}


class FusedRNNCell(BaseRNNCell):
    """``num_layers`` recurrent layers run by the fused ``RNN`` operator over a whole sequence.

    All weights live in one flat variable ``<prefix>parameters`` in MXNet's layout, so a graph
    has a single ``RNN`` node named ``<prefix>rnn``. The cell can only be unrolled, not
    stepped; :meth:`unfuse` gives the equivalent stack of ordinary cells, and
    :meth:`unpack_weights` / :meth:`pack_weights` convert the flat vector to and from their
    per-gate weights (``<prefix>l0_i2h_i_weight``, ``<prefix>r1_h2h_o_bias``...).

    Parameters
    ----------
    num_hidden : int
        Units per layer and direction.
    num_layers : int, default 1
    mode : {'rnn_relu', 'rnn_tanh', 'lstm', 'gru'}, default 'lstm'
    bidirectional : bool, default False
        Run every layer in both directions (outputs twice as wide).
    dropout : float, default 0
        Dropout between layers in training.
    get_next_state : bool, default False
        Whether :meth:`unroll` returns the final states (otherwise an empty list).
    forget_bias : float, default 1.0
        Initial LSTM forget-gate bias: the ``parameters`` variable carries a
        :class:`raymod.initializer.FusedRNN` initializer that fills it gate by gate.
    prefix : str, optional
        ``'<mode>_'`` when None.
    params : RNNParams, optional
    """

    def __init__(self, num_hidden: int, num_layers: int = 1, mode: str = "lstm",
                 bidirectional: bool = False, dropout: float = 0.0,
                 get_next_state: bool = False, forget_bias: float = 1.0,
                 prefix: str | None = None, params: RNNParams | None = None):
        if mode not in _GATE_NAMES:
            raise ValueError(f"FusedRNNCell: mode must be one of {', '.join(_GATE_NAMES)}; "
                             f"got {mode!r}")
        super().__init__(prefix=f"{mode}_" if prefix is None else prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._forget_bias = forget_bias
        self._directions = ["l", "r"] if bidirectional else ["l"]
        self._parameter = self._params.get("parameters", init=FusedRNN(
            None, num_hidden, num_layers, mode, bidirectional, forget_bias))

    @property
    def state_info(self) -> list[dict]:
        layers = len(self._directions) * self._num_layers
        count = 2 if self._mode == "lstm" else 1
        return [{"shape": (layers, 0, self._num_hidden), "__layout__": "LNC"}
                for _ in range(count)]

    @property
    def _gate_names(self) -> Sequence[str]:
        return _GATE_NAMES[self._mode]

    def _slices(self, input_size: int) -> list[tuple[str, int, tuple]]:
        """(name, offset, shape) of every per-gate weight and bias in the flat vector."""
        h, dirs = self._num_hidden, self._directions
        out, pos = [], 0
        for layer in range(self._num_layers):
            width = input_size if layer == 0 else len(dirs) * h
            for d in dirs:
                for group, cols in (("i2h", width), ("h2h", h)):
                    for gate in self._gate_names:
                        out.append((f"{self._prefix}{d}{layer}_{group}{gate}_weight", pos,
                                    (h, cols)))
                        pos += h * cols
        for layer in range(self._num_layers):
            for d in dirs:
                for group in ("i2h", "h2h"):
                    for gate in self._gate_names:
                        out.append((f"{self._prefix}{d}{layer}_{group}{gate}_bias", pos, (h,)))
                        pos += h
        return out

    def _total(self, input_size: int) -> int:
        name, pos, shape = self._slices(input_size)[-1]
        return pos + shape[0]

    def unpack_weights(self, args: dict) -> dict:
        """Replace ``<prefix>parameters`` by copies of the per-gate weights and biases."""
        args = dict(args)
        flat = args.pop(self._parameter.name)
        dirs, gates, h = len(self._directions), len(self._gate_names), self._num_hidden
        # the size is (I + h + 2) * h * gates * dirs for layer 0, plus the upper layers
        input_size = (flat.size // dirs // h // gates
                      - (self._num_layers - 1) * (h + dirs * h + 2) - h - 2)
        if input_size <= 0 or self._total(input_size) != flat.size:
            raise ValueError(f"FusedRNNCell: {self._parameter.name} has {flat.size} entries, "
                             f"which fits no input size for this cell")
        for name, pos, shape in self._slices(input_size):
            args[name] = flat[pos:pos + int(np.prod(shape))].reshape(shape).copy()
        return args

    def pack_weights(self, args: dict) -> dict:
        """The inverse of :meth:`unpack_weights`: gather the per-gate arrays into one vector."""
        args = dict(args)
        first = args[f"{self._prefix}l0_i2h{self._gate_names[0]}_weight"]
        slices = self._slices(first.shape[1])
        xp = np if isinstance(first, np.ndarray) else context_of(first).xp
        flat = xp.zeros((self._total(first.shape[1]),), dtype=first.dtype)
        for name, pos, shape in slices:
            flat[pos:pos + int(np.prod(shape))] = args.pop(name).reshape(-1)
        args[self._parameter.name] = flat
        return args

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        raise NotImplementedError("FusedRNNCell cannot be stepped; use unroll")

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Run the whole sequence through one ``RNN`` node (see :meth:`BaseRNNCell.unroll`)."""
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            warnings.warn("NTC layout: FusedRNNCell swaps to TNC (the RNN op's layout); "
                          "feed TNC to save the transposes")
            inputs = sym.swapaxes(inputs, dim1=0, dim2=1)
        elif axis != 0:
            raise ValueError(f"FusedRNNCell: unsupported layout {layout!r}")
        states = self.begin_state() if begin_state is None else list(begin_state)
        named = {"state": states[0]}
        if self._mode == "lstm":
            named["state_cell"] = states[1]
        rnn = sym.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                      num_layers=self._num_layers, bidirectional=self._bidirectional,
                      p=self._dropout, state_outputs=self._get_next_state, mode=self._mode,
                      name=f"{self._prefix}rnn", **named)
        if self._get_next_state:
            count = 2 if self._mode == "lstm" else 1
            out_states = [rnn[k + 1] for k in range(count)]
            for s in out_states:
                s._set_attr(__layout__="LNC")
            outputs = rnn[0]
        else:
            outputs, out_states = rnn, []
        if axis == 1:
            outputs = sym.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, out_states

    def unfuse(self) -> SequentialRNNCell:
        """The same network as ordinary cells (``<prefix>l0_``, ``<prefix>r0_``...), which can
        be stepped; :meth:`unpack_weights` gives the weights they take."""
        make = {"rnn_relu": lambda p: RNNCell(self._num_hidden, activation="relu", prefix=p),
                "rnn_tanh": lambda p: RNNCell(self._num_hidden, activation="tanh", prefix=p),
                "lstm": lambda p: LSTMCell(self._num_hidden, prefix=p),
                "gru": lambda p: GRUCell(self._num_hidden, prefix=p)}[self._mode]
        stack = SequentialRNNCell()
        for layer in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make(f"{self._prefix}l{layer}_"),
                                            make(f"{self._prefix}r{layer}_"),
                                            output_prefix=f"{self._prefix}bi_l{layer}_"))
            else:
                stack.add(make(f"{self._prefix}l{layer}_"))
            if self._dropout > 0 and layer != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{self._prefix}_dropout{layer}_"))
        return stack
