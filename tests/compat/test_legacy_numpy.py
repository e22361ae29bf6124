"""``raymod run`` gives MXNet-era scripts the numpy names newer numpy removed (MXNet 1.9.1
pins numpy<1.24): ``np.int`` and friends, and ``np.fromstring``'s binary mode."""
import numpy as np
import pytest

import raymod.compat
from raymod.compat import legacy_numpy


@pytest.fixture
def installed():
    raymod.compat.install()
    yield
    raymod.compat.uninstall()


def test_removed_aliases_mean_the_builtins(installed):
    assert np.int is int and np.float is float and np.object is object and np.str is str
    assert np.dtype(np.bool) == np.dtype(bool)  # numpy 2 has np.bool again: left as it is
    labels = np.array([1.0, 2.0]).astype(np.int)  # MXNet's custom_softmax.py does this
    assert labels.dtype == np.dtype(int)


def test_binary_fromstring_reads_bytes_into_a_writable_copy(installed):
    raw = np.arange(6, dtype=np.uint8).tobytes()
    out = np.fromstring(raw, dtype=np.uint8)  # MXNet's train_mnist.py reads idx files so
    np.testing.assert_array_equal(out, np.arange(6))
    out[0] = 9
    assert raw[0] == 0
    np.testing.assert_array_equal(np.fromstring("1 2 3", dtype=int, sep=" "), [1, 2, 3])


def test_uninstall_takes_them_back():
    had_int = hasattr(np, "int")
    raymod.compat.install()
    raymod.compat.uninstall()
    assert hasattr(np, "int") == had_int
    assert np.fromstring is legacy_numpy._original_fromstring
