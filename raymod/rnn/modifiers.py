"""Cells that change what another cell does: dropout, zoneout, residual connections.

As in MXNet 1.x, wrapping a cell in a :class:`ModifierCell` marks the wrapped cell as
modified: from then on only the wrapper builds graphs with it.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Sequence

from .. import symbol as sym
from ..base import MXNetError
from ..symbol.symbol import Symbol
from .cells import _MODIFIED_MSG, BaseRNNCell, BidirectionalCell, RNNParams, _normalize_sequence


class DropoutCell(BaseRNNCell):
    """Dropout on the input, as a stateless cell to put between the layers of a stack.

    Parameters
    ----------
    dropout : float
        The fraction of elements zeroed during training (1 - the fraction kept).
    prefix : str, default 'dropout_'
        Prefix of the cell's names.
    params : RNNParams, optional
        Unused (the cell has no weights); accepted for a uniform signature.
    """

    def __init__(self, dropout: float, prefix: str = "dropout_", params: RNNParams | None = None):
        super().__init__(prefix, params)
        if not isinstance(dropout, numbers.Real) or isinstance(dropout, bool):
            raise TypeError(f"dropout must be a number, got {type(dropout).__name__}")
        self.dropout = dropout

    @property
    def state_info(self) -> list:
        return []

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        if self.dropout > 0:
            inputs = sym.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Apply dropout to the whole sequence at once when it is (or is to be) one symbol,
        else step by step. See :meth:`BaseRNNCell.unroll` for the arguments."""
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, Symbol):
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Base class of cells that wrap another cell and change its behaviour.

    The wrapped cell keeps its weights and states (``params``, ``state_info`` and
    ``begin_state`` are the base cell's) but may no longer be called on its own.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The cell to modify.
    """

    def __init__(self, base_cell: BaseRNNCell):
        self.base_cell = base_cell
        super().__init__()
        base_cell._modified = True

    def _children(self) -> list[BaseRNNCell]:
        # MXNet leaves the base cell's counters alone here, so a second unroll of a
        # modifier cell numbered its steps on from the first; raymod restarts them.
        return [self.base_cell]

    @property
    def params(self) -> RNNParams:
        """The base cell's weight container."""
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self) -> list:
        return self.base_cell.state_info

    def begin_state(self, init_sym: Callable[..., Symbol] = sym.zeros, **kwargs: Any) -> list:
        """The base cell's begin states.

        Parameters
        ----------
        init_sym : callable, default :func:`raymod.symbol.zeros`
            The state-creating function (``func`` is accepted as another name for it, so a
            SequentialRNNCell can pass its ``func`` through).
        **kwargs
            More arguments for it.
        """
        if self._modified:
            raise MXNetError(_MODIFIED_MSG)
        if "func" in kwargs:
            init_sym = kwargs.pop("func")
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(init_sym, **kwargs)
        finally:
            self.base_cell._modified = True

    def unpack_weights(self, args: dict) -> dict:
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args: dict) -> dict:
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        raise NotImplementedError(f"{type(self).__name__} does not implement one step")


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al., 2016): during training, randomly keep the previous step's
    values instead of the new ones.

    Each element of the output (and of each state) is replaced, with probability
    ``zoneout_outputs`` (``zoneout_states``), by its value at the previous step; the mask
    is a ``Dropout`` of ones, so outside training nothing is replaced. The output before
    the first step counts as zeros.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The cell to apply zoneout to; it must be steppable (not a BidirectionalCell).
    zoneout_outputs : float, default 0.
        Probability of keeping the previous output.
    zoneout_states : float, default 0.
        Probability of keeping the previous states.
    """

    def __init__(self, base_cell: BaseRNNCell, zoneout_outputs: float = 0.0,
                 zoneout_states: float = 0.0):
        if isinstance(base_cell, BidirectionalCell):
            raise MXNetError("a BidirectionalCell cannot take zoneout (it cannot be stepped); "
                             "wrap the cells inside it in ZoneoutCell instead")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output: Symbol | None = None

    def reset(self) -> None:
        super().reset()
        self.prev_output = None

    @staticmethod
    def _zoneout(p: float, new: Symbol, old: Symbol) -> Symbol:
        """``new`` where a Dropout(p) mask of ones is kept, ``old`` where it is dropped."""
        if p == 0:
            return new
        mask = sym.Dropout(sym.ones_like(new), p=p)
        return sym.where(mask, new, old)

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        next_output, next_states = self.base_cell(inputs, states)
        prev_output = self.prev_output
        if prev_output is None and self.zoneout_outputs != 0:
            prev_output = sym.zeros(shape=(0, 0))
        output = self._zoneout(self.zoneout_outputs, next_output, prev_output)
        next_states = [self._zoneout(self.zoneout_states, new, old)
                       for new, old in zip(next_states, states)]
        self.prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """Add the cell's input to its output (Wu et al., 2016), so a stack learns residuals.

    The input and the base cell's output must have the same width. The sum is named
    ``<output name>_plus_residual``.

    Parameters
    ----------
    base_cell : BaseRNNCell
        The cell whose output gets the input added.
    """

    def __call__(self, inputs: Symbol, states: list) -> tuple[Symbol, list]:
        output, states = self.base_cell(inputs, states)
        return _residual(output, inputs), states

    def unroll(self, length: int, inputs: Symbol | Sequence[Symbol], begin_state: list | None = None,
               layout: str = "NTC", merge_outputs: bool | None = None) -> tuple[Any, list]:
        """Unroll the base cell, then add the inputs to its outputs (merged or per step).

        See :meth:`BaseRNNCell.unroll` for the arguments.
        """
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs,
                                                    begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs)
        finally:
            self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, Symbol)
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if merge_outputs:
            return _residual(outputs, inputs), states
        return [_residual(o, i) for o, i in zip(outputs, inputs)], states


def _residual(output: Symbol, inputs: Symbol) -> Symbol:
    return sym.elemwise_add(output, inputs, name=f"{output.name}_plus_residual")
