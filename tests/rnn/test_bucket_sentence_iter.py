"""rm.rnn.BucketSentenceIter and encode_sentences."""
import numpy as np
import pytest

import raymod as rm
from raymod import rnn
from raymod.io import DataBatch, DataIter


def sentences_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [list(rng.integers(1, 50, size=n)) for n in lengths]


def test_batches_fall_into_the_smallest_fitting_bucket():
    sentences = sentences_of([3] * 4 + [5] * 5 + [7] * 4 + [12] * 2)
    with pytest.warns(UserWarning, match="discarded 2 sentences"):
        it = rnn.BucketSentenceIter(sentences, batch_size=2, buckets=[8, 4])
    assert isinstance(it, DataIter)
    assert it.buckets == [4, 8] and it.default_bucket_key == 8
    assert it.provide_data[0].name == "data" and it.provide_data[0].shape == (2, 8)
    assert it.provide_label[0].name == "softmax_label" and it.provide_label[0].shape == (2, 8)
    batches = list(it)
    # bucket 4: 4 sentences of length 3 -> 2 batches; bucket 8: 9 sentences -> 4 batches
    assert sorted(b.bucket_key for b in batches) == [4, 4, 8, 8, 8, 8]
    for batch in batches:
        assert isinstance(batch, DataBatch) and batch.pad == 0
        data, label = batch.data[0], batch.label[0]
        assert data.shape == label.shape == (2, batch.bucket_key)
        assert batch.provide_data[0].shape == data.shape
        assert batch.provide_label[0].shape == label.shape
        assert data.dtype == np.float32
        # label: the data shifted left by one, then padding
        np.testing.assert_array_equal(label[:, :-1], data[:, 1:])
        np.testing.assert_array_equal(label[:, -1], -1)
        for row in data:
            length = int(np.sum(row != -1))
            assert np.all(row[length:] == -1) and np.all(row[:length] >= 1)
            assert length <= batch.bucket_key
            smaller = [b for b in it.buckets if b < batch.bucket_key]
            assert not smaller or length > max(smaller)


def test_every_kept_sentence_appears_once_per_epoch():
    sentences = sentences_of([2] * 6 + [4] * 6, seed=1)
    it = rnn.BucketSentenceIter(sentences, batch_size=3, buckets=[2, 4], invalid_label=0)
    for _ in range(2):
        rows = sorted(tuple(int(v) for v in row if v != 0)
                      for batch in it for row in batch.data[0])
        assert rows == sorted(tuple(int(v) for v in s) for s in sentences)
        it.reset()


def test_automatic_buckets_are_lengths_with_a_full_batch():
    sentences = sentences_of([3] * 4 + [5] * 1 + [6] * 4 + [9] * 3)
    with pytest.warns(UserWarning, match="discarded 3"):
        it = rnn.BucketSentenceIter(sentences, batch_size=4)
    assert it.buckets == [3, 6] and it.default_bucket_key == 6
    with pytest.raises(ValueError, match="no bucket"):
        rnn.BucketSentenceIter(sentences_of([1, 2]), batch_size=4)


def test_time_major_layout_and_options():
    sentences = sentences_of([4] * 4)
    it = rnn.BucketSentenceIter(sentences, batch_size=2, buckets=[5], invalid_label=-7,
                                data_name="words", label_name="next", dtype="int32",
                                layout="TN")
    assert it.provide_data[0].shape == (5, 2) and it.provide_data[0].layout == "TN"
    batch = it.next()
    data, label = batch.data[0], batch.label[0]
    assert data.shape == (5, 2) and data.dtype == np.int32
    assert batch.provide_data[0].name == "words" and batch.provide_label[0].name == "next"
    np.testing.assert_array_equal(data[-1], -7)
    np.testing.assert_array_equal(label[:-1], data[1:])
    with pytest.raises(ValueError, match="layout"):
        rnn.BucketSentenceIter(sentences, batch_size=2, layout="TC")


def test_shuffle_follows_raymod_seed():
    sentences = sentences_of([3] * 8 + [6] * 8, seed=3)

    def epoch_order():
        rm.random.seed(11)
        it = rnn.BucketSentenceIter(sentences, batch_size=2, buckets=[3, 6])
        return [(b.bucket_key, b.data[0].tolist()) for b in it]
    assert epoch_order() == epoch_order()


def test_iterator_protocol_and_reset():
    it = rnn.BucketSentenceIter(sentences_of([2] * 4), batch_size=2, buckets=[2])
    assert it.iter_next()
    assert it.getdata()[0].shape == (2, 2) and it.getpad() == 0
    assert it.iter_next() and not it.iter_next()
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    assert len(list(it)) == 2


# --- encode_sentences -------------------------------------------------------------------------
def test_encode_sentences_builds_a_vocab():
    encoded, vocab = rnn.encode_sentences([["a", "b", "a"], ["c", "b"]])
    assert encoded == [[0, 1, 0], [2, 1]]
    assert vocab == {"\n": -1, "a": 0, "b": 1, "c": 2}


def test_encode_sentences_skips_the_invalid_label():
    encoded, vocab = rnn.encode_sentences([["x", "y", "z"]], invalid_label=1, start_label=0,
                                          invalid_key="<eos>")
    assert encoded == [[0, 2, 3]] and vocab["<eos>"] == 1
    encoded, vocab = rnn.encode_sentences([["x", "y"]], invalid_label=0, start_label=1)
    assert encoded == [[1, 2]] and vocab == {"\n": 0, "x": 1, "y": 2}


def test_encode_sentences_with_a_given_vocab():
    vocab = {"\n": -1, "a": 0, "b": 1}
    encoded, same = rnn.encode_sentences([["b", "a"]], vocab=vocab)
    assert encoded == [[1, 0]] and same is vocab
    with pytest.raises(KeyError, match="unknown token"):
        rnn.encode_sentences([["a", "zzz"]], vocab=dict(vocab))
    encoded, extended = rnn.encode_sentences([["a", "q", "r", "b"]], vocab=dict(vocab),
                                             unknown_token="<unk>")
    assert encoded == [[0, 2, 2, 1]] and extended["<unk>"] == 2 and "q" not in extended


def test_encode_sentences_numbers_new_ids_from_start_label_as_mxnet():
    # MXNet 1.9.1's test_rnn.py::test_encode_sentences
    vocab = {"a": 1, "b": 2, "c": 3}
    encoded, vocab = rnn.encode_sentences([["a", "b", "c"], ["b", "c", "d"]], vocab=vocab,
                                          invalid_label=-1, invalid_key="\n", start_label=0,
                                          unknown_token="UNK")
    assert vocab == {"a": 1, "b": 2, "c": 3, "UNK": 0}
    assert encoded == [[1, 2, 3], [2, 3, 0]]
    # counting from start_label skips invalid_label and, unlike MXNet, ids already taken
    encoded, vocab = rnn.encode_sentences([["x", "q"]], vocab={"x": 0, "\n": 1},
                                          invalid_label=2, start_label=0, unknown_token="<u>")
    assert encoded == [[0, 3]] and vocab["<u>"] == 3
