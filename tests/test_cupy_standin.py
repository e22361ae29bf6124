"""The CuPy stand-in is as strict as CuPy where the suite relies on it (see its docstring)."""
import numpy as np
import pytest

import cupy_standin as cp


def test_refuses_implicit_conversion_to_numpy():
    x = cp.asarray(np.ones(3))
    for convert in (np.asarray, np.array, lambda a: a.__array__()):
        with pytest.raises(TypeError, match="Implicit conversion"):
            convert(x)


@pytest.mark.parametrize("mix", [lambda x, h: x + h, lambda x, h: h * x, lambda x, h: np.add(x, h),
                                 lambda x, h: np.concatenate([x, h]), lambda x, h: cp.dot(x, h),
                                 lambda x, h: x.dot(h), lambda x, h: x + h[:1].reshape(())])
def test_refuses_numpy_array_operands_including_0d(mix):
    with pytest.raises(TypeError, match="numpy.ndarray"):
        mix(cp.asarray(np.ones(3)), np.ones(3))


def test_refuses_writing_a_host_array_but_takes_host_scalars_and_indices():
    x = cp.zeros(4)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray"):
        x[...] = np.ones(4)
    with pytest.raises(TypeError, match="list"):
        x[...] = [1.0, 2.0, 3.0, 4.0]
    x[np.array([1, 3])] = np.float32(2)
    x += 1
    assert x.tolist() == [1.0, 3.0, 1.0, 3.0]


def test_results_stay_on_the_device_and_come_back_only_explicitly():
    x = cp.asarray(np.arange(6.0).reshape(2, 3))
    for result in (np.exp(x), x.sum(), x[0, 0], np.sum(x, axis=0), x.T, cp.random.normal(size=2),
                   cp.random.default_rng(0).random(2)):
        assert isinstance(result, cp.ndarray) and not isinstance(result, np.ndarray)
    assert float(x.sum()) == 15.0 and int(x[1, 2]) == 5 and bool(x[0, 1])
    np.testing.assert_array_equal(x.get(), cp.asnumpy(x))
    assert cp.get_array_module(x) is cp and cp.get_array_module(np.ones(1)) is np
