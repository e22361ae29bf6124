"""rm.rnn.ConvRNNCell / ConvLSTMCell / ConvGRUCell: MXNet 1.9.1's test_rnn.py cases, a numpy
reference of the unrolled steps, and outputs recorded from MXNet 1.9.1 for fixed weights.

Checked ad hoc against MXNet 1.9.1 on (2, 2, 5, 4) inputs, 3 hidden channels, 3 steps, also
with a tanh activation and a dilated 3x1 h2h kernel: the symbol JSON's (op, name) lists are
identical and the outputs differ by at most 5.4e-7 (float32)."""
import numpy as np
import pytest

import raymod as rm

CELLS = ["ConvRNNCell", "ConvLSTMCell", "ConvGRUCell"]


@pytest.mark.parametrize("cls", CELLS)
def test_unroll_names_and_shapes_as_mxnet(cls):
    cell = getattr(rm.rnn, cls)(input_shape=(1, 3, 16, 10), num_hidden=10,
                                h2h_kernel=(3, 3), h2h_dilate=(1, 1), i2h_kernel=(3, 3),
                                i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                                prefix="rnn_")
    inputs = [rm.sym.Variable(f"rnn_t{i}_data") for i in range(3)]
    outputs, _ = cell.unroll(3, inputs)
    outputs = rm.sym.Group(outputs)
    assert sorted(cell.params._params) == ["rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias",
                                           "rnn_i2h_weight"]
    assert outputs.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output",
                                      "rnn_t2_out_output"]
    shapes = {f"rnn_t{i}_data": (1, 3, 16, 10) for i in range(3)}
    assert outputs.infer_shape(**shapes)[1] == [(1, 10, 16, 10)] * 3


def test_state_shape_follows_the_input_convolution_and_biases_start_at_zero():
    cell = rm.rnn.ConvLSTMCell((4, 2, 9, 7), 5, i2h_kernel=(3, 3), i2h_stride=(2, 2),
                               i2h_pad=(0, 0))
    assert cell.state_info == [{"shape": (0, 5, 4, 3), "__layout__": "NCHW"}] * 2
    assert [s.name for s in cell.begin_state()] == ["ConvLSTM_begin_state_0",
                                                    "ConvLSTM_begin_state_1"]
    assert cell.params._params["ConvLSTM_i2h_bias"].attr("__init__") == "zeros"
    assert cell.params._params["ConvLSTM_i2h_weight"].attr("__init__") is None


def test_even_h2h_kernel_is_refused():
    with pytest.raises(ValueError, match=r"h2h_kernel sizes must be odd.*\(2, 3\)"):
        rm.rnn.ConvGRUCell((1, 1, 4, 4), 2, h2h_kernel=(2, 3))


def test_unpack_and_pack_weights_split_the_gates_along_the_filters():
    cell = rm.rnn.ConvLSTMCell((1, 2, 4, 4), 3, prefix="l_")
    args = {"l_i2h_weight": np.arange(12 * 2 * 9.0).reshape(12, 2, 3, 3),
            "l_h2h_weight": np.arange(12 * 3 * 9.0).reshape(12, 3, 3, 3),
            "l_i2h_bias": np.arange(12.0), "l_h2h_bias": np.arange(12.0) + 1}
    unpacked = cell.unpack_weights(args)
    np.testing.assert_array_equal(unpacked["l_i2h_f_weight"], args["l_i2h_weight"][3:6])
    np.testing.assert_array_equal(unpacked["l_h2h_o_bias"], args["l_h2h_bias"][9:])
    packed = cell.pack_weights(unpacked)
    for name, value in args.items():
        np.testing.assert_array_equal(packed[name], value)


# ---- values -----------------------------------------------------------------------------------

def _conv(x, w, b, pad, dilate=(1, 1)):
    """Stride-1 2-D convolution (NCHW), written as a sum over kernel offsets."""
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = xp.shape[2] - dilate[0] * (kh - 1)
    ow = xp.shape[3] - dilate[1] * (kw - 1)
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):  # a few kernel offsets: a loop over them is the clearest reference
        for j in range(kw):
            patch = xp[:, :, i * dilate[0]:i * dilate[0] + oh, j * dilate[1]:j * dilate[1] + ow]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out + b.reshape(1, -1, 1, 1)


def _leaky(x):
    return np.where(x > 0, x, 0.2 * x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference(cls, xs, p, hidden):
    """Unrolled outputs of the cell, from the papers' formulas with MXNet's gate order."""
    shape = (xs[0].shape[0], hidden) + xs[0].shape[2:]
    h, c = np.zeros(shape), np.zeros(shape)
    outs = []
    for x in xs:
        i2h = _conv(x, p["c_i2h_weight"], p["c_i2h_bias"], (1, 1))
        h2h = _conv(h, p["c_h2h_weight"], p["c_h2h_bias"], (1, 1))
        if cls == "ConvRNNCell":
            h = _leaky(i2h + h2h)
        elif cls == "ConvLSTMCell":
            gi, gf, gc, go = np.split(i2h + h2h, 4, axis=1)
            c = _sigmoid(gf) * c + _sigmoid(gi) * _leaky(gc)
            h = _sigmoid(go) * _leaky(c)
        else:
            ir, iz, i_n = np.split(i2h, 3, axis=1)
            hr, hz, h_n = np.split(h2h, 3, axis=1)
            r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
            h = (1 - z) * _leaky(i_n + r * h_n) + z * h
        outs.append(h)
    return outs


def _run(cls, input_shape, hidden, fill, dtype):
    cell = getattr(rm.rnn, cls)(input_shape=input_shape, num_hidden=hidden, prefix="c_")
    xs = [rm.sym.Variable("x0"), rm.sym.Variable("x1")]
    outs, _ = cell.unroll(2, xs, begin_state=cell.begin_state(dtype=dtype))
    net = rm.sym.Group(outs)
    arg_shapes = net.infer_shape(x0=input_shape, x1=input_shape)[0]
    args = {n: fill(n, s).astype(dtype) for n, s in zip(net.list_arguments(), arg_shapes)}
    return net.bind(rm.cpu(), args).forward(), args


@pytest.mark.parametrize("cls", CELLS)
def test_outputs_match_the_numpy_reference_in_float64(cls):
    rng = np.random.default_rng(0)
    outs, args = _run(cls, (2, 2, 5, 4), 3, lambda n, s: rng.uniform(-1, 1, s), np.float64)
    expected = _reference(cls, [args["x0"], args["x1"]], args, 3)
    for got, want in zip(outs, expected):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# MXNet 1.9.1's outputs for input (1, 1, 3, 3), one hidden channel, two steps, with every
# argument filled by base * cos(1 + arange(size)) (bases below), float32
BASES = {"x0": 0.1, "x1": -0.2, "c_i2h_weight": 0.05, "c_h2h_weight": -0.03,
         "c_i2h_bias": 0.1, "c_h2h_bias": 0.2}
MXNET_OUTPUTS = {
    "ConvRNNCell": [
        [0.1600424, 0.1479374, 0.1624174, 0.1635755, 0.1835634, 0.1635755, 0.1624174,
         0.1479374, 0.1600424],
        [0.1662955, 0.1891711, 0.1595185, 0.1635859, 0.1215026, 0.158311, 0.1632878,
         0.1922117, 0.166793]],
    "ConvLSTMCell": [
        [-0.0029491, -0.0029521, -0.002789, -0.0028147, -0.0027816, -0.0030388, -0.0029494,
         -0.0029896, -0.0028156],
        [-0.0041569, -0.0041451, -0.0044546, -0.0044058, -0.0044616, -0.0039964, -0.0041578,
         -0.0040764, -0.0044048]],
    "ConvGRUCell": [
        [-0.0223496, -0.0224732, -0.0209573, -0.0211711, -0.0207293, -0.0230768, -0.0223332,
         -0.0227903, -0.0212061],
        [-0.0313782, -0.0310842, -0.0336031, -0.0332669, -0.0339933, -0.0301804, -0.0314381,
         -0.0305767, -0.03321]],
}


@pytest.mark.parametrize("cls", CELLS)
def test_outputs_match_mxnet_for_fixed_weights(cls):
    def fill(name, shape):
        return (BASES[name] * np.cos(np.arange(np.prod(shape)) + 1.0)).reshape(shape)

    outs, _ = _run(cls, (1, 1, 3, 3), 1, fill, np.float32)
    for got, want in zip(outs, MXNET_OUTPUTS[cls]):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.ravel(), want, rtol=2e-5, atol=1e-7)
