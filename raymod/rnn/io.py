"""Text data for bucketed language models: ``encode_sentences`` and ``BucketSentenceIter``."""
from __future__ import annotations

import bisect
import warnings
from typing import Any, Hashable, Sequence

import numpy as np

from .. import random as _random
from ..io.base import DataBatch, DataDesc, DataIter


def encode_sentences(sentences: Sequence[Sequence[Hashable]], vocab: dict | None = None,
                     invalid_label: int = -1, invalid_key: Hashable = "\n", start_label: int = 0,
                     unknown_token: Hashable | None = None) -> tuple[list[list[int]], dict]:
    """Map the tokens of sentences to integer ids, building the vocabulary as it goes.

    Parameters
    ----------
    sentences : list of list of str
        The sentences, each a list of tokens.
    vocab : dict of str to int, optional
        An existing vocabulary. When None, a new one is built, starting with
        ``{invalid_key: invalid_label}``, and every new token gets the next free id.
    invalid_label : int, default -1
        The id reserved for padding / end of sentence; never given to a token.
    invalid_key : str, default '\\n'
        The token that maps to ``invalid_label`` in a new vocabulary.
    start_label : int, default 0
        The first id given to a token.
    unknown_token : str, optional
        Only used with a given ``vocab``: the token that stands for every token not in it
        (added to the vocabulary if missing, with the next free id counted from
        ``start_label``). Without it, a token not in a given ``vocab`` is an error. A new
        vocabulary simply takes every token.

    Returns
    -------
    encoded : list of list of int
        The sentences as ids.
    vocab : dict of str to int
        The vocabulary used (the given dict, extended in place, or the new one).

    Raises
    ------
    KeyError
        A token is not in the given ``vocab`` and no ``unknown_token`` was given.

    Notes
    -----
    New ids count up from ``start_label``, skipping ``invalid_label``, as in MXNet 1.9.1,
    which gives the same ids for a new vocabulary and for MXNet's own given-vocabulary test.
    Two defects of MXNet are corrected: it gave ``unknown_token`` a fresh id for every
    unknown token it met (so each got a different id, and the vocabulary kept only the
    last), also when building a new vocabulary; and with a given ``vocab`` it could hand
    out an id the vocabulary already used. Here the unknown token keeps one id, and ids
    already in the given vocabulary are skipped.
    """
    new_vocab = vocab is None
    if new_vocab:
        vocab = {invalid_key: invalid_label}
    taken = {int(v) for v in vocab.values() if isinstance(v, (int, np.integer))}
    next_id = start_label

    def fresh_id() -> int:
        nonlocal next_id
        while next_id == invalid_label or next_id in taken:
            next_id += 1
        taken.add(next_id)
        next_id += 1
        return next_id - 1

    encoded = []
    for sentence in sentences:
        ids = []
        for token in sentence:
            if token not in vocab:
                if new_vocab:
                    vocab[token] = fresh_id()
                elif unknown_token is None:
                    raise KeyError(f"unknown token {token!r}: it is not in the given vocab "
                                   "(pass unknown_token= to map such tokens to one id)")
                else:
                    if unknown_token not in vocab:
                        vocab[unknown_token] = fresh_id()
                    token = unknown_token
            ids.append(vocab[token])
        encoded.append(ids)
    return encoded, vocab


class BucketSentenceIter(DataIter):
    """Batches of equal-length padded sentences, for a BucketingModule language model.

    Each sentence goes into the smallest bucket at least as long as it, padded to the
    bucket's length with ``invalid_label``; sentences longer than the largest bucket are
    dropped (with a warning). Every batch holds ``batch_size`` sentences of one bucket and
    carries the bucket length as ``bucket_key``. The label of a sentence is the sentence
    shifted left by one token, ending with ``invalid_label``: the next token to predict.
    Rows within each bucket, and the order of the batches, are reshuffled at every
    :meth:`reset` (also at construction) from :func:`raymod.random.generator`; rows that do
    not fill a whole batch in a bucket are left out of that epoch.

    Parameters
    ----------
    sentences : list of list of int
        Encoded sentences (see :func:`encode_sentences`).
    batch_size : int
        Sentences per batch.
    buckets : list of int, optional
        The bucket lengths. When None (or empty): every sentence length that at least
        ``batch_size`` sentences have.
    invalid_label : int, default -1
        The padding value of data and labels.
    data_name : str, default 'data'
        Name of the data input.
    label_name : str, default 'softmax_label'
        Name of the label input.
    dtype : str, default 'float32'
        Element type of data and labels.
    layout : str, default 'NT'
        'NT' gives (batch, length) arrays; 'TN' gives (length, batch).

    Attributes
    ----------
    buckets : list of int
        The bucket lengths, sorted.
    default_bucket_key : int
        The largest bucket: BucketingModule binds it first and the other buckets share its
        memory.
    """

    def __init__(self, sentences: Sequence[Sequence[int]], batch_size: int,
                 buckets: Sequence[int] | None = None, invalid_label: int = -1,
                 data_name: str = "data", label_name: str = "softmax_label",
                 dtype: Any = "float32", layout: str = "NT"):
        super().__init__(batch_size)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not buckets:
            counts = np.bincount([len(s) for s in sentences]) if len(sentences) else []
            buckets = [length for length, n in enumerate(counts) if n >= batch_size]
        buckets = sorted(int(b) for b in buckets)
        if not buckets:
            raise ValueError(f"no bucket: no sentence length occurs {batch_size} (batch_size) "
                             "times or more; pass buckets explicitly")
        self.major_axis = layout.find("N")
        if self.major_axis not in (0, 1):
            raise ValueError(f"invalid layout {layout!r}: use 'NT' (batch major) or 'TN' "
                             "(time major)")
        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.layout = layout
        self.default_bucket_key = max(buckets)
        self.data = self._fill_buckets(sentences)
        self.idx = [(b, start) for b, rows in enumerate(self.data)
                    for start in range(0, len(rows) - batch_size + 1, batch_size)]
        self.curr_idx = 0
        self.nddata: list[np.ndarray] = []
        self.ndlabel: list[np.ndarray] = []
        self._current: tuple[np.ndarray, np.ndarray, int] | None = None
        shape = self._shape(self.default_bucket_key)
        self._provide_data = [DataDesc(data_name, shape, np.dtype(dtype), layout)]
        self._provide_label = [DataDesc(label_name, shape, np.dtype(dtype), layout)]
        self.reset()

    def _fill_buckets(self, sentences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """One (rows, bucket length) array per bucket, padded with ``invalid_label``."""
        rows: list[list[np.ndarray]] = [[] for _ in self.buckets]
        discarded = 0
        for sentence in sentences:
            b = bisect.bisect_left(self.buckets, len(sentence))
            if b == len(self.buckets):
                discarded += 1
                continue
            row = np.full((self.buckets[b],), self.invalid_label, dtype=self.dtype)
            row[:len(sentence)] = sentence
            rows[b].append(row)
        if discarded:
            warnings.warn(f"BucketSentenceIter discarded {discarded} sentences longer than the "
                          f"largest bucket ({self.default_bucket_key})", stacklevel=3)
        return [np.asarray(r, dtype=self.dtype).reshape(len(r), length)
                for r, length in zip(rows, self.buckets)]

    def _shape(self, length: int) -> tuple[int, int]:
        return (self.batch_size, length) if self.major_axis == 0 else (length, self.batch_size)

    @property
    def provide_data(self) -> list[DataDesc]:
        """The data descriptor of the default (largest) bucket."""
        return self._provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        """The label descriptor of the default (largest) bucket."""
        return self._provide_label

    def reset(self) -> None:
        """Start a new epoch: reshuffle rows within buckets and the order of the batches."""
        rng = _random.generator()
        self.curr_idx = 0
        self._current = None
        self.idx = [self.idx[k] for k in rng.permutation(len(self.idx))]
        self.data = [rows[rng.permutation(len(rows))] for rows in self.data]
        self.nddata, self.ndlabel = [], []
        for rows in self.data:
            label = np.empty_like(rows)
            label[:, :-1] = rows[:, 1:]
            label[:, -1:] = self.invalid_label
            self.nddata.append(rows)
            self.ndlabel.append(label)

    def iter_next(self) -> bool:
        if self.curr_idx == len(self.idx):
            self._current = None
            return False
        b, start = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[b][start:start + self.batch_size]
        label = self.ndlabel[b][start:start + self.batch_size]
        if self.major_axis == 1:
            data, label = np.ascontiguousarray(data.T), np.ascontiguousarray(label.T)
        self._current = (data, label, self.buckets[b])
        return True

    def _require_batch(self) -> tuple[np.ndarray, np.ndarray, int]:
        if self._current is None:
            raise RuntimeError("no current batch: call iter_next() (or next()) first")
        return self._current

    def getdata(self) -> list[np.ndarray]:
        return [self._require_batch()[0]]

    def getlabel(self) -> list[np.ndarray]:
        return [self._require_batch()[1]]

    def getpad(self) -> int:
        return 0

    def next(self) -> DataBatch:
        """The next batch, with its ``bucket_key`` and its own data/label descriptors."""
        if not self.iter_next():
            raise StopIteration
        data, label, key = self._current
        dtype = np.dtype(self.dtype)
        return DataBatch([data], [label], pad=0, bucket_key=key,
                         provide_data=[DataDesc(self.data_name, data.shape, dtype, self.layout)],
                         provide_label=[DataDesc(self.label_name, label.shape, dtype,
                                                 self.layout)])
