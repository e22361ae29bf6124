"""``rm.rnn``: MXNet 1.x's symbolic recurrent cells and bucketing text iterator.

Build an unrolled recurrent graph with the cells (``rm.rnn.LSTMCell(200, prefix='lstm_l0_')``
and ``cell.unroll(seq_len, embed, merge_outputs=True)``), stack them with
:class:`SequentialRNNCell`, and feed a BucketingModule with :class:`BucketSentenceIter`.
"""
from .cells import (BaseRNNCell, BidirectionalCell, GRUCell, LSTMCell, RNNCell, RNNParams,
                    SequentialRNNCell)
from .fused import FusedRNNCell
from .conv_cells import BaseConvRNNCell, ConvGRUCell, ConvLSTMCell, ConvRNNCell
from .io import BucketSentenceIter, encode_sentences
from .modifiers import DropoutCell, ModifierCell, ResidualCell, ZoneoutCell

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "SequentialRNNCell",
           "BidirectionalCell", "FusedRNNCell", "DropoutCell", "ModifierCell", "ZoneoutCell", "ResidualCell",
           "BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell", "ConvGRUCell",
           "encode_sentences", "BucketSentenceIter"]
