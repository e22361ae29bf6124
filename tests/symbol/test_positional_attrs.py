"""Op attributes given positionally, in MXNet's generated-function order.

MXNet 1.9.1's ``mx.sym.<Op>`` functions take the op's inputs first (in argument order, then
auxiliary states), then its attributes in the order the op declares them, then ``name`` and
``attr``. The expected attribute dicts below were recorded from MXNet 1.9.1.
"""
import json

import numpy as np
import pytest

import raymod as rm
from raymod.ops import OPS


def _attrs(sym):
    return json.loads(sym.tojson())["nodes"][-1].get("attrs", {})


def test_dropout_probability_positionally():
    data = rm.sym.Variable("data")
    net = rm.sym.Dropout(data, 0.5)
    assert _attrs(net) == {"p": "0.5"}
    assert net.list_arguments() == ["data"]


def test_convolution_attributes_follow_the_inputs():
    data = rm.sym.Variable("data")
    net = rm.sym.Convolution(data, None, None, (3, 3), (2, 2), (1, 1), (1, 1), 8, name="c")
    assert _attrs(net) == {"kernel": "(3, 3)", "stride": "(2, 2)", "dilate": "(1, 1)",
                           "pad": "(1, 1)", "num_filter": "8"}
    assert net.list_arguments() == ["data", "c_weight", "c_bias"]
    assert net.infer_shape(data=(1, 2, 6, 6))[1] == [(1, 8, 3, 3)]


def test_fully_connected_given_weight_then_num_hidden():
    data, w = rm.sym.Variable("data"), rm.sym.Variable("w")
    net = rm.sym.FullyConnected(data, w, None, 10, name="fc")
    assert _attrs(net) == {"num_hidden": "10"}
    assert net.list_arguments() == ["data", "w", "fc_bias"]


def test_a_number_in_an_input_slot_is_refused_naming_the_input():
    # MXNet: "Argument weight must be Symbol instances, but got 10"
    with pytest.raises(TypeError, match=r"FullyConnected.*'weight'.*Symbol.*10"):
        rm.sym.FullyConnected(rm.sym.Variable("data"), 10)


def test_batch_norm_attributes_come_after_its_auxiliary_states():
    data = rm.sym.Variable("data")
    net = rm.sym.BatchNorm(data, None, None, None, None, 1e-3, 0.8, False, name="bn")
    assert _attrs(net) == {"eps": "0.001", "momentum": "0.8", "fix_gamma": "False"}
    assert net.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]


def test_symbols_alone_fill_arguments_then_auxiliary_states():
    v = rm.sym.Variable
    net = rm.sym.BatchNorm(v("d"), v("g"), v("b"), v("mm"), v("mv"), name="bn")
    assert net.list_arguments() == ["d", "g", "b"]
    assert net.list_auxiliary_states() == ["mm", "mv"]


def test_reductions_slices_and_fluent_methods():
    data = rm.sym.Variable("data")
    assert _attrs(rm.sym.sum(data, 1, True)) == {"axis": "1", "keepdims": "True"}
    assert _attrs(rm.sym.slice_axis(data, 1, 0, 2)) == {"axis": "1", "begin": "0", "end": "2"}
    assert _attrs(data.reshape((2, 3))) == {"shape": "(2, 3)"}
    assert _attrs(data.sum(1)) == {"axis": "1"}


def test_name_may_follow_the_attributes_as_in_mxnet():
    net = rm.sym.Activation(rm.sym.Variable("data"), "relu", "act1")
    assert net.name == "act1" and _attrs(net) == {"act_type": "relu"}


def test_zeros_takes_shape_then_dtype():
    assert _attrs(rm.sym.zeros((2, 3), "float64")) == {"shape": "(2, 3)", "dtype": "float64"}
    out = rm.sym.ones((2,), np.float64).eval()[0]
    assert out.dtype == np.float64 and out.tolist() == [1.0, 1.0]


def test_too_many_positional_arguments_is_a_clear_error():
    data = rm.sym.Variable("data")
    with pytest.raises(TypeError, match=r"Dropout takes at most 7 positional arguments "
                                        r"\(data, p, mode, axes, cudnn_off, name, attr\), "
                                        r"got 8"):
        rm.sym.Dropout(data, 0.5, "always", (1,), False, "d", None, 3)
    with pytest.raises(TypeError, match=r"Dropout: positional argument 6 is 'name'.*got 3"):
        rm.sym.Dropout(data, 0.5, "always", (1,), False, 3)


def test_an_attribute_given_twice_is_refused():
    with pytest.raises(TypeError, match=r"Dropout got attribute 'p' both by position and "
                                        r"by keyword"):
        rm.sym.Dropout(rm.sym.Variable("data"), 0.5, p=0.2)


# MXNet 1.9.1's generated signatures (help(mx.sym.X)): inputs, then attributes
MXNET_SIGNATURES = {
    "Activation": ["data", "act_type"],
    "BatchNorm": ["data", "gamma", "beta", "moving_mean", "moving_var", "eps", "momentum",
                  "fix_gamma", "use_global_stats", "output_mean_var", "axis", "cudnn_off",
                  "min_calib_range", "max_calib_range"],
    "Convolution": ["data", "weight", "bias", "kernel", "stride", "dilate", "pad",
                    "num_filter", "num_group", "workspace", "no_bias", "cudnn_tune",
                    "cudnn_off", "layout"],
    "Deconvolution": ["data", "weight", "bias", "kernel", "stride", "dilate", "pad", "adj",
                      "target_shape", "num_filter", "num_group", "workspace", "no_bias",
                      "cudnn_tune", "cudnn_off", "layout"],
    "Dropout": ["data", "p", "mode", "axes", "cudnn_off"],
    "Embedding": ["data", "weight", "input_dim", "output_dim", "dtype", "sparse_grad"],
    "FullyConnected": ["data", "weight", "bias", "num_hidden", "no_bias", "flatten"],
    "LeakyReLU": ["data", "gamma", "act_type", "slope", "lower_bound", "upper_bound"],
    "Pooling": ["data", "kernel", "pool_type", "global_pool", "cudnn_off",
                "pooling_convention", "stride", "pad", "p_value", "count_include_pad",
                "layout"],
    "Reshape": ["data", "shape", "reverse", "target_shape", "keep_highest"],
    "SliceChannel": ["data", "num_outputs", "axis", "squeeze_axis"],
    "SoftmaxOutput": ["data", "label", "grad_scale", "ignore_label", "multi_output",
                      "use_ignore", "preserve_shape", "normalization", "out_grad",
                      "smooth_alpha"],
    "_zeros": ["shape", "ctx", "dtype"],
    "_ones": ["shape", "ctx", "dtype"],
    "clip": ["data", "a_min", "a_max"],
    "slice_axis": ["data", "axis", "begin", "end"],
    "sum": ["data", "axis", "keepdims", "exclude"],
    "transpose": ["data", "axes"],
}


@pytest.mark.parametrize("op_name", sorted(MXNET_SIGNATURES))
def test_op_signature_order_matches_mxnet(op_name):
    op = OPS.get(op_name)
    assert list(op.inputs) + list(op.aux) + list(op.params) == MXNET_SIGNATURES[op_name]
