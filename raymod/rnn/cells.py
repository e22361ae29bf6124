"""Recurrent cells that build unrolled graphs step by step, as MXNet 1.x's ``mx.rnn`` cells.

A cell turns ``(input, states)`` for one time step into ``(output, new states)`` with ordinary
symbols (FullyConnected, SliceChannel, Activation, elementwise arithmetic). :meth:`unroll`
repeats that ``length`` times, sharing one set of weight variables across the steps, so that
a graph for a sequence of any length has the same parameters: what BucketingModule needs.

Node names follow MXNet, so checkpoints and symbol JSON written by either can be exchanged:
weights are ``<prefix>i2h_weight``, ``<prefix>i2h_bias``, ``<prefix>h2h_weight``,
``<prefix>h2h_bias``; step ``t`` of an LSTM makes ``<prefix>t<t>_i2h``, ``..._h2h``,
``..._slice``, ``..._i/_f/_c/_o``, ``..._state`` and ``..._out`` (whose output is
``<prefix>t<t>_out_output``); begin states are ``<prefix>begin_state_<k>``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .. import symbol as sym
from ..base import MXNetError
from ..context import context_of
from ..symbol.symbol import Symbol

_MODIFIED_MSG = ("after wrapping a cell in a modifier cell (DropoutCell, ZoneoutCell, "
                 "ResidualCell...) use the modifier cell, not the wrapped cell")


def _normalize_sequence(length: int | None, inputs: Symbol | Sequence[Symbol], layout: str,
                        merge: bool | None,
                        in_layout: str | None = None) -> tuple[Symbol | list[Symbol], int]:
    """Bring a sequence into the wanted form: a list of per-step symbols or one merged symbol.

    ``merge`` False splits a single symbol along its time axis into ``length`` symbols (the
    time axis squeezed away); True stacks a list along the time axis of ``layout``; None keeps
    whichever form was given. Returns the sequence and the time axis of ``layout``.
    """
    if inputs is None:
        raise ValueError("unroll needs inputs: create the input variables outside unroll "
                         "(unroll(inputs=None) was removed in MXNet 1.x)")
    axis = layout.find("T")
    in_axis = axis if in_layout is None else in_layout.find("T")
    if axis < 0 or in_axis < 0:
        raise ValueError(f"layout {layout!r} has no time axis 'T'")
    if isinstance(inputs, Symbol):
        if merge is False:
            if len(inputs) != 1:
                raise ValueError("unroll takes a single-output symbol or a list of symbols; "
                                 f"got a group of {len(inputs)} outputs (pass list(group))")
            inputs = list(sym.split(inputs, axis=in_axis, num_outputs=length,
                                    squeeze_axis=True))
    else:
        inputs = list(inputs)
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll of length {length} got {len(inputs)} input symbols")
        if merge is True:
            stacked = [sym.expand_dims(step, axis=axis) for step in inputs]
            inputs = sym.Concat(*stacked, dim=axis)
            in_axis = axis
    if isinstance(inputs, Symbol) and axis != in_axis:
        inputs = sym.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


def _concatenate(parts: list) -> Any:
    """Join numpy or CuPy arrays along axis 0."""
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return context_of(parts[0]).xp.concatenate(parts)


class RNNParams:
    """A container of weight variables, so that several cells can share parameters.

    Parameters
    ----------
    prefix : str, default ''
        Put in front of every variable name the container creates.
    """

    def __init__(self, prefix: str = ""):
        self._prefix = prefix
        self._params: dict[str, Symbol] = {}

    def get(self, name: str, **kwargs: Any) -> Symbol:
        """The variable ``prefix + name``, created on first request and shared afterwards.

        Parameters
        ----------
        name : str
            The name without the prefix (``'i2h_weight'``).
        **kwargs
            Passed to :func:`raymod.symbol.Variable` when the variable is created
            (``init=``, ``lr_mult=``...); ignored when it already exists.
        """
        full = self._prefix + name
        if full not in self._params:
            self._params[full] = sym.Variable(full, **kwargs)
        return self._params[full]


class BaseRNNCell:
    """Base class of recurrent cells: one step as symbols, and ``unroll`` over many.

    A subclass defines :attr:`state_info` and ``__call__(inputs, states)``.

    Parameters
    ----------
    prefix : str, default ''
        Put in front of the names of the nodes the cell creates, and of its weights when
        ``params`` is None.
    params : RNNParams, optional
        A container to take (and share) the weights from; a new one with ``prefix`` when None.
    """

    def __init__(self, prefix: str = "", params: RNNParams | None = None):
        if params is None:
            params = RNNParams(prefix)
            self._own_params = True
        else:
            self._own_params = False
        self._prefix = prefix
        self._params = params
        self._modified = False
        self.reset()

    def _children(self) -> list["BaseRNNCell"]:
        """Cells this one is made of (reset together with it)."""
        return list(getattr(self, "_cells", []))

    def reset(self) -> None:
        """Restart the step and begin-state counters, before building another graph.

        :meth:`unroll` calls it; call it yourself before stepping a cell by hand again.
        """
        self._init_counter = -1
        self._counter = -1
        for cell in self._children():
            cell.reset()

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        """Build one time step.

        Parameters
        ----------
        inputs : Symbol
            This step's input, shape (batch, input size).
        states : list of Symbol
            The states from the previous step, or from :meth:`begin_state`.

        Returns
        -------
        output : Symbol
            This step's output, shape (batch, num_hidden).
        states : list of Symbol
            The states for the next step, in the same structure as ``begin_state()``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement one step")

    @property
    def params(self) -> RNNParams:
        """The weight container; handing it out marks the weights as shared."""
        self._own_params = False
        return self._params

    @property
    def state_info(self) -> list[dict | None]:
        """Per state: a dict with its ``shape`` (0 = batch, filled in by inference) and
        ``__layout__``, passed to the state-creating function of :meth:`begin_state`."""
        raise NotImplementedError

    @property
    def state_shape(self) -> list[tuple]:
        """The shape of each state, batch as 0."""
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self) -> Sequence[str]:
        """Suffixes of the gates stacked in the i2h/h2h weights (for (un)pack_weights)."""
        return ()

    def begin_state(self, func: Callable[..., Symbol] = sym.zeros, **kwargs: Any) -> list:
        """Symbols for the states before the first step.

        Parameters
        ----------
        func : callable, default :func:`raymod.symbol.zeros`
            Called once per state as ``func(name=..., shape=..., __layout__=..., **kwargs)``;
            ``rm.sym.Variable`` makes states that are fed as inputs instead.
        **kwargs
            More arguments for ``func`` (``dtype``...).

        Returns
        -------
        list of Symbol
            One symbol per entry of :attr:`state_info`, named ``<prefix>begin_state_<k>``
            with ``k`` counting up from the last :meth:`reset`.
        """
        if self._modified:
            raise MXNetError(_MODIFIED_MSG)
        func = sym.zeros if func is None else func
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}",
                               **kwargs))
        return states

    def unpack_weights(self, args: dict) -> dict:
        """Split the stacked i2h/h2h weights and biases of this cell into one per gate.

        Parameters
        ----------
        args : dict of str to array
            Parameters by name, e.g. the first dict of ``Module.get_params()``.

        Returns
        -------
        dict of str to array
            A copy of ``args`` where ``<prefix>i2h_weight`` becomes
            ``<prefix>i2h<gate>_weight`` for each gate (``_i``, ``_f``, ``_c``, ``_o`` for an
            LSTM), and likewise for h2h and the biases.
        """
        args = dict(args)
        gates = self._gate_names
        if not gates:
            return args
        h = self._num_hidden
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                packed = args.pop(f"{self._prefix}{group}_{kind}")
                for j, gate in enumerate(gates):
                    args[f"{self._prefix}{group}{gate}_{kind}"] = packed[j * h:(j + 1) * h].copy()
        return args

    def pack_weights(self, args: dict) -> dict:
        """The inverse of :meth:`unpack_weights`: stack per-gate weights into one array."""
        args = dict(args)
        gates = self._gate_names
        if not gates:
            return args
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                parts = [args.pop(f"{self._prefix}{group}{gate}_{kind}") for gate in gates]
                args[f"{self._prefix}{group}_{kind}"] = _concatenate(parts)
        return args

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Repeat the cell over ``length`` time steps.

        Parameters
        ----------
        length : int
            How many steps.
        inputs : Symbol or list of Symbol
            One symbol of shape (batch, length, ...) for layout 'NTC' or (length, batch, ...)
            for 'TNC' (split along the time axis here), or a list of ``length`` symbols of
            shape (batch, ...).
        begin_state : list of Symbol, optional
            The states before the first step; :meth:`begin_state` when None.
        layout : str, default 'NTC'
            Where the time axis ``T`` of a single-symbol input (and merged output) is.
        merge_outputs : bool, optional
            True: return one symbol with the outputs stacked along the time axis. False: a
            list of per-step symbols. None: whichever is cheaper (a list here).

        Returns
        -------
        outputs : Symbol or list of Symbol
        states : list of Symbol
            The states after the last step, in the structure of ``begin_state()``.
        """
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        outputs = []
        for step in range(length):
            output, states = self(inputs[step], states)
            outputs.append(output)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    @staticmethod
    def _get_activation(inputs: Symbol, activation: Any, **kwargs: Any) -> Symbol:
        """Apply ``activation``: an ``Activation`` act_type name, or a symbol function."""
        if isinstance(activation, str):
            return sym.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)

    def _step_name(self) -> str:
        """Advance the step counter; the node-name prefix of this step (``lstm_t3_``)."""
        self._counter += 1
        return f"{self._prefix}t{self._counter}_"

    def _weights(self) -> None:
        """Fetch the four standard weight variables from the container."""
        self._iW = self._params.get("i2h_weight")
        self._iB = self._params.get("i2h_bias")
        self._hW = self._params.get("h2h_weight")
        self._hB = self._params.get("h2h_bias")


def _one_state(num_hidden: int) -> dict:
    return {"shape": (0, num_hidden), "__layout__": "NC"}


class RNNCell(BaseRNNCell):
    """The simple (Elman) recurrent cell: ``h' = act(W_i x + b_i + W_h h + b_h)``.

    Parameters
    ----------
    num_hidden : int
        Size of the output and of the state.
    activation : str or callable, default 'tanh'
        An ``Activation`` act_type ('tanh', 'relu', ...) or a function taking a symbol and
        ``name=``.
    prefix : str, default 'rnn_'
        Prefix of node and weight names.
    params : RNNParams, optional
        Share weights with another cell.
    """

    def __init__(self, num_hidden: int, activation: Any = "tanh", prefix: str = "rnn_",
                 params: RNNParams | None = None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._weights()

    @property
    def state_info(self) -> list[dict]:
        return [_one_state(self._num_hidden)]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("",)

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        name = self._step_name()
        i2h = sym.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                 num_hidden=self._num_hidden, name=f"{name}i2h")
        h2h = sym.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                 num_hidden=self._num_hidden, name=f"{name}h2h")
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class LSTMCell(BaseRNNCell):
    """Long short-term memory cell (Hochreiter & Schmidhuber, 1997).

    The i2h and h2h layers each produce the four gates stacked as (input, forget, cell
    candidate, output); the states are ``[h, c]``.

    Parameters
    ----------
    num_hidden : int
        Size of the output and of each state.
    prefix : str, default 'lstm_'
        Prefix of node and weight names.
    params : RNNParams, optional
        Share weights with another cell.
    forget_bias : float, default 1.0
        Initial value of the forget-gate part of ``i2h_bias``, set through an
        ``LSTMBias`` initializer attached to that variable.
    """

    def __init__(self, num_hidden: int, prefix: str = "lstm_", params: RNNParams | None = None,
                 forget_bias: float = 1.0):
        super().__init__(prefix=prefix, params=params)
        from ..initializer import LSTMBias  # initializers sit above symbols; import late
        self._num_hidden = num_hidden
        self._iW = self._params.get("i2h_weight")
        self._hW = self._params.get("h2h_weight")
        self._iB = self._params.get("i2h_bias", init=LSTMBias(forget_bias=forget_bias))
        self._hB = self._params.get("h2h_bias")

    @property
    def state_info(self) -> list[dict]:
        return [_one_state(self._num_hidden), _one_state(self._num_hidden)]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        name = self._step_name()
        width = 4 * self._num_hidden
        i2h = sym.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                 num_hidden=width, name=f"{name}i2h")
        h2h = sym.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                 num_hidden=width, name=f"{name}h2h")
        gates = sym.SliceChannel(i2h + h2h, num_outputs=4, name=f"{name}slice")
        in_gate = sym.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = sym.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        candidate = sym.Activation(gates[2], act_type="tanh", name=f"{name}c")
        out_gate = sym.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = sym.elemwise_add(forget_gate * states[1], in_gate * candidate,
                                  name=f"{name}state")
        next_h = sym.elemwise_mul(out_gate, sym.Activation(next_c, act_type="tanh"),
                                  name=f"{name}out")
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """Gated recurrent unit, in the cuDNN form (the reset gate scales ``W_h h + b_h``).

    With i2h and h2h each split into (reset, update, new) parts::

        r = sigmoid(i2h_r + h2h_r)
        z = sigmoid(i2h_z + h2h_z)
        n = tanh(i2h_n + r * h2h_n)
        h' = (1 - z) * n + z * h

    Parameters
    ----------
    num_hidden : int
        Size of the output and of the state.
    prefix : str, default 'gru_'
        Prefix of node and weight names.
    params : RNNParams, optional
        Share weights with another cell.
    """

    def __init__(self, num_hidden: int, prefix: str = "gru_", params: RNNParams | None = None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._weights()

    @property
    def state_info(self) -> list[dict]:
        return [_one_state(self._num_hidden)]

    @property
    def _gate_names(self) -> Sequence[str]:
        return ("_r", "_z", "_o")

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        # MXNet names this cell's nodes with a doubled underscore (gru_t0__i2h); kept as is
        name = self._step_name()
        prev_h = states[0]
        width = 3 * self._num_hidden
        i2h = sym.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                 num_hidden=width, name=f"{name}_i2h")
        h2h = sym.FullyConnected(data=prev_h, weight=self._hW, bias=self._hB,
                                 num_hidden=width, name=f"{name}_h2h")
        i2h_r, i2h_z, i2h_n = sym.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h_n = sym.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = sym.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = sym.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        candidate = sym.Activation(i2h_n + reset_gate * h2h_n, act_type="tanh",
                                   name=f"{name}_h_act")
        next_h = sym.elemwise_add((1.0 - update_gate) * candidate, update_gate * prev_h,
                                  name=f"{name}out")
        return next_h, [next_h]


def _merge_params(owner: BaseRNNCell, cells: Sequence[BaseRNNCell], override: bool,
                  what: str) -> None:
    """Pool the child cells' weight variables into ``owner``'s container (and, with
    ``override``, the owner's variables into the children's).

    Goes through ``cell.params``, which for a modifier cell is the wrapped cell's container.
    """
    for cell in cells:
        if override:
            if not cell._own_params:
                raise MXNetError(f"give params either to the {what} or to its cells, not both")
            cell.params._params.update(owner._params._params)
    for cell in cells:
        owner._params._params.update(cell.params._params)


class SequentialRNNCell(BaseRNNCell):
    """A stack of cells: each cell's output is the next cell's input.

    Parameters
    ----------
    params : RNNParams, optional
        A container for the weights of every cell added; the cells must then own theirs.
    """

    def __init__(self, params: RNNParams | None = None):
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells: list[BaseRNNCell] = []

    def add(self, cell: BaseRNNCell) -> None:
        """Put ``cell`` on top of the stack.

        Parameters
        ----------
        cell : BaseRNNCell
            It takes the output of the cell added before it (or the stack's input).
        """
        self._cells.append(cell)
        _merge_params(self, [cell], self._override_cell_params, "SequentialRNNCell")

    @property
    def state_info(self) -> list:
        return [info for cell in self._cells for info in cell.state_info]

    def begin_state(self, **kwargs: Any) -> list:
        """Every cell's begin states, bottom cell first (``kwargs`` go to each cell)."""
        if self._modified:
            raise MXNetError(_MODIFIED_MSG)
        return [s for cell in self._cells for s in cell.begin_state(**kwargs)]

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def _split_states(self, states: list):
        """Pair each cell with its slice of the flat state list."""
        start = 0
        for cell in self._cells:
            count = len(cell.state_info)
            yield cell, list(states[start:start + count])
            start += count

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        self._counter += 1
        next_states = []
        for cell, cell_states in self._split_states(states):
            if isinstance(cell, BidirectionalCell):
                raise MXNetError("a SequentialRNNCell holding a BidirectionalCell cannot be "
                                 "stepped; use unroll")
            inputs, cell_states = cell(inputs, cell_states)
            next_states.extend(cell_states)
        return inputs, next_states

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Unroll each cell over the whole sequence in turn, bottom cell first.

        Intermediate layers hand lists of per-step symbols upwards; only the top cell applies
        ``merge_outputs``. See :meth:`BaseRNNCell.unroll` for the arguments.
        """
        self.reset()
        states = self.begin_state() if begin_state is None else begin_state
        last = len(self._cells) - 1
        next_states = []
        for i, (cell, cell_states) in enumerate(self._split_states(states)):
            inputs, cell_states = cell.unroll(length, inputs=inputs, begin_state=cell_states,
                                              layout=layout,
                                              merge_outputs=merge_outputs if i == last else None)
            next_states.extend(cell_states)
        return inputs, next_states


class BidirectionalCell(BaseRNNCell):
    """Run one cell forwards and another backwards over the sequence; join their outputs.

    The output at each step is the two cells' outputs concatenated (width
    ``2 * num_hidden`` for two equal cells). It can only be unrolled, not stepped.

    Parameters
    ----------
    l_cell : BaseRNNCell
        The cell run from the first step to the last.
    r_cell : BaseRNNCell
        The cell run from the last step to the first.
    params : RNNParams, optional
        A container for both cells' weights; the cells must then own theirs.
    output_prefix : str, default 'bi_'
        Prefix of the output nodes: ``<output_prefix>t<i>`` per step, or
        ``<output_prefix>out`` when merged.
    """

    def __init__(self, l_cell: BaseRNNCell, r_cell: BaseRNNCell, params: RNNParams | None = None,
                 output_prefix: str = "bi_"):
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        _merge_params(self, [l_cell, r_cell], self._override_cell_params, "BidirectionalCell")
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        raise NotImplementedError("a BidirectionalCell cannot be stepped; use unroll")

    @property
    def state_info(self) -> list:
        return [info for cell in self._cells for info in cell.state_info]

    def begin_state(self, **kwargs: Any) -> list:
        """The left cell's begin states, then the right cell's."""
        if self._modified:
            raise MXNetError(_MODIFIED_MSG)
        return [s for cell in self._cells for s in cell.begin_state(**kwargs)]

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Unroll both directions and concatenate their outputs step by step.

        Returns ``(outputs, [l_states, r_states])``: as MXNet, the states are a list of the
        two cells' state lists. See :meth:`BaseRNNCell.unroll` for the arguments.
        """
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        l_cell, r_cell = self._cells
        n_left = len(l_cell.state_info)
        l_out, l_states = l_cell.unroll(length, inputs=inputs, begin_state=states[:n_left],
                                        layout=layout, merge_outputs=merge_outputs)
        r_out, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)),
                                        begin_state=states[n_left:], layout=layout,
                                        merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = isinstance(l_out, Symbol) and isinstance(r_out, Symbol)
            if not merge_outputs:
                l_out, r_out = (list(sym.SliceChannel(o, axis=axis, num_outputs=length,
                                                      squeeze_axis=True))
                                if isinstance(o, Symbol) else o for o in (l_out, r_out))
        if merge_outputs:
            return (sym.Concat(l_out, sym.reverse(r_out, axis=axis), dim=2,
                               name=f"{self._output_prefix}out"), [l_states, r_states])
        outputs = [sym.Concat(l_o, r_o, dim=1, name=f"{self._output_prefix}t{i}")
                   for i, (l_o, r_o) in enumerate(zip(l_out, reversed(list(r_out))))]
        return outputs, [l_states, r_states]
