"""Constant(...).dumps() and its ``_kwargs`` are plain JSON, as MXNet 1.9.1's test_init checks:
``init.dumps() == json.dumps([init.__class__.__name__.lower(), init._kwargs])``."""
import json

import numpy as np
import pytest

import raymod as rm


@pytest.mark.parametrize("value, text", [
    (np.ones((2, 3)), '["constant", {"value": [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]}]'),
    (np.ones(2, np.float32), '["constant", {"value": [1.0, 1.0]}]'),
    (1, '["constant", {"value": 1}]'),
    (2.5, '["constant", {"value": 2.5}]'),
])
def test_constant_dumps_as_mxnet(value, text):
    init = rm.init.Constant(value)
    assert init.dumps() == text  # the strings MXNet 1.9.1 writes
    assert init.dumps() == json.dumps([init.__class__.__name__.lower(), init._kwargs])


def test_constant_from_its_dump_initialises_the_same():
    init = rm.init.Constant(np.arange(3.0))
    again = rm.init.create(init.dumps())
    out = np.zeros(3, np.float32)
    again(rm.init.InitDesc("w_weight"), out)
    np.testing.assert_array_equal(out, [0, 1, 2])
