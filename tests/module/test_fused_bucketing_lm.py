"""A BucketingModule language model on the fused RNN op (rm.rnn.FusedRNNCell, as MXNet's
example/rnn/bucketing/cudnn_rnn_bucketing.py) trains: validation perplexity falls every epoch."""
import numpy as np
import pytest

import raymod as rm

VOCAB, HIDDEN = 30, 24


def sym_gen(seq_len):
    data = rm.sym.Variable("data")
    embed = rm.sym.Embedding(data, input_dim=VOCAB, output_dim=HIDDEN, name="embed")
    cell = rm.rnn.FusedRNNCell(HIDDEN, num_layers=2, mode="lstm", prefix="lstm_")
    outputs, _ = cell.unroll(seq_len, inputs=embed, merge_outputs=True)
    pred = rm.sym.FullyConnected(rm.sym.Reshape(outputs, shape=(-1, HIDDEN)),
                                 num_hidden=VOCAB, name="pred")
    label = rm.sym.Reshape(rm.sym.Variable("softmax_label"), shape=(-1,))
    net = rm.sym.SoftmaxOutput(pred, label, name="softmax", use_ignore=True, ignore_label=-1)
    return net, ("data",), ("softmax_label",)


def sentences(n, seed):
    """Sentences of length 3..12 whose next word mostly follows from the last one."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        sent = [int(rng.integers(1, VOCAB))]
        for _ in range(int(rng.integers(3, 13)) - 1):
            sent.append(1 + (sent[-1] * 7 + int(rng.integers(0, 2))) % (VOCAB - 1))
        out.append(sent)
    return out


def test_fused_lstm_bucketing_lm_validation_perplexity_falls_every_epoch():
    rm.random.seed(3)
    train = rm.rnn.BucketSentenceIter(sentences(320, 0), 16, buckets=[6, 12])
    val = rm.rnn.BucketSentenceIter(sentences(96, 1), 16, buckets=[6, 12])
    perplexity = []
    with pytest.warns(UserWarning, match="NTC layout"):  # the iterator feeds batch-major
        mod = rm.mod.BucketingModule(sym_gen, default_bucket_key=train.default_bucket_key)
        mod.fit(train, eval_data=val, eval_metric=rm.metric.Perplexity(-1), num_epoch=3,
                optimizer="adam", optimizer_params={"learning_rate": 0.02},
                initializer=rm.init.Xavier(factor_type="in", magnitude=2.34),
                eval_end_callback=lambda p: perplexity.append(p.eval_metric.get()[1]))
    assert len(perplexity) == 3
    assert perplexity[0] > perplexity[1] > perplexity[2], perplexity
    assert perplexity[2] < 0.5 * VOCAB, perplexity  # well below guessing among the words
