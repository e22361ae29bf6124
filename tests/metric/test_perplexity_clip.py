"""Perplexity picks probabilities as MXNet 1.9.1's ``pick`` (mode='clip'): labels past the
last class take the last class, negative ones the first; fractional labels truncate.
Expected values were recorded from ``mx.metric.Perplexity`` 1.9.1."""
import numpy as np
import pytest

import raymod as rm

PROBS = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]], np.float32)


@pytest.mark.parametrize("labels, ignore, expected, count", [
    ([3, 0, 1], None, 2.6706290137206716, 3),      # label == vocabulary size
    ([-1, 5, 2.7], None, 4.641588932557334, 3),    # below, above, fractional
    ([3, 0, 1], 3, 3.6514837458228913, 2),         # the out-of-range label is the ignored one
    ([3, 0, 1], 0, 2.3904571821691962, 2),
])
def test_out_of_range_labels_are_clipped_like_mxnet(labels, ignore, expected, count):
    metric = rm.metric.Perplexity(ignore)
    metric.update([np.array(labels, np.float32)], [PROBS])
    name, value = metric.get()
    assert name == "perplexity"
    assert value == pytest.approx(expected, rel=1e-6)
    assert metric.num_inst == count
