import json
import pickle

import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.base import AttributeValueError, MXNetError, ShapeError


def mlp(prefix=""):
    data = sym.Variable("data")
    fc1 = sym.FullyConnected(data, num_hidden=8, name=prefix + "fc1")
    act = sym.Activation(fc1, act_type="relu", name=prefix + "relu1")
    return sym.FullyConnected(act, num_hidden=3, name=prefix + "fc2")


def test_auto_names_and_lists():
    with sym.NameManager():
        data = sym.Variable("data")
        a = sym.FullyConnected(data, num_hidden=4)
        b = sym.FullyConnected(a, num_hidden=2)
    assert a.name == "fullyconnected0" and b.name == "fullyconnected1"
    assert b.list_arguments() == ["data", "fullyconnected0_weight", "fullyconnected0_bias",
                                  "fullyconnected1_weight", "fullyconnected1_bias"]
    assert b.list_outputs() == ["fullyconnected1_output"]
    assert b.list_inputs() == b.list_arguments() and b.list_auxiliary_states() == []


def test_prefix_applies_to_given_and_automatic_names():
    with sym.Prefix("net_"):
        data = sym.Variable("data")
        fc = sym.FullyConnected(data, num_hidden=4, name="fc")
        act = sym.Activation(fc, act_type="tanh")
    assert fc.name == "net_fc" and act.name.startswith("net_activation")
    assert "net_fc_weight" in act.list_arguments()


def test_hidden_attributes_reach_auto_created_variables_only():
    data = sym.Variable("data")
    bias = sym.Variable("fc1_bias", lr_mult=1.0)
    fc1 = sym.FullyConnected(data=data, bias=bias, name="fc1", num_hidden=10, lr_mult=0)
    attrs = fc1.attr_dict()
    assert attrs["fc1_weight"]["__lr_mult__"] == "0"
    assert attrs["fc1_bias"]["__lr_mult__"] == "1.0"
    assert attrs["fc1"]["num_hidden"] == "10"
    assert fc1.attr("lr_mult") == "0"
    with rm.symbol.AttrScope(ctx_group="dev1"):
        g = sym.FullyConnected(data, num_hidden=2, name="g")
    assert g.attr("ctx_group") == "dev1" and g.attr_dict()["g_weight"]["__ctx_group__"] == "dev1"


def test_internals_indexing_and_group():
    net = mlp()
    internals = net.get_internals()
    assert internals.list_outputs() == ["data", "fc1_weight", "fc1_bias", "fc1_output",
                                        "relu1_output", "fc2_weight", "fc2_bias", "fc2_output"]
    fc1 = internals["fc1_output"]
    assert fc1.list_outputs() == ["fc1_output"] and internals[3].name == "fc1"
    group = sym.Group([fc1, net])
    assert group.list_outputs() == ["fc1_output", "fc2_output"]
    assert len(group) == 2 and [s.name for s in group] == ["fc1", "fc2"]
    with pytest.raises(ValueError, match="no output named 'nope'"):
        internals["nope"]


def test_compose_replaces_variables_by_name():
    head = sym.FullyConnected(sym.Variable("x"), num_hidden=2, name="head")
    body = sym.Activation(sym.Variable("data"), act_type="relu", name="body")
    net = head(x=body)
    assert net.list_arguments() == ["data", "head_weight", "head_bias"]
    assert head.list_arguments() == ["x", "head_weight", "head_bias"]  # unchanged
    with pytest.raises(MXNetError, match="no variable named 'y'"):
        head(y=body)


def test_arithmetic_builds_mxnet_ops():
    a, b = sym.Variable("a"), sym.Variable("b")
    c = a + 2 * b - 1
    assert c.list_arguments() == ["a", "b"]
    ops = [n["op"] for n in json.loads(c.tojson())["nodes"]]
    assert ops[-1] == "_minus_scalar" and "elemwise_add" in ops and "_mul_scalar" in ops
    ex = c.bind(rm.cpu(), {"a": np.ones(3), "b": np.full(3, 2.0)})
    np.testing.assert_allclose(ex.forward()[0], [4, 4, 4])


def test_infer_shape_full_partial_and_conflict():
    net = mlp()
    arg, out, aux = net.infer_shape(data=(5, 7))
    assert dict(zip(net.list_arguments(), arg))["fc1_weight"] == (8, 7) and out == [(5, 3)]
    assert net.infer_shape() == (None, None, None)
    arg, out, _ = net.infer_shape_partial()
    shapes = dict(zip(net.list_arguments(), arg))
    assert shapes["data"] == () and shapes["fc2_weight"] == (3, 0) and out == [()]
    with pytest.raises(ShapeError, match=r"FullyConnected 'fc2'.*weight.*\(3, 9\).*\(3, 8\)"):
        net.infer_shape(data=(5, 7), fc2_weight=(3, 9))
    arg_t, out_t, _ = net.infer_type(data=np.float64)
    assert set(arg_t) == {np.dtype(np.float64)} and out_t == [np.dtype(np.float64)]


def test_json_round_trip_and_pickle():
    net = mlp()
    again = sym.load_json(net.tojson())
    assert again.tojson() == net.tojson()
    assert again.list_arguments() == net.list_arguments()
    assert pickle.loads(pickle.dumps(net)).tojson() == net.tojson()
    graph = json.loads(net.tojson())
    assert graph["attrs"]["mxnet_version"] == ["int", 10901]
    assert [n["name"] for n in graph["nodes"] if n["op"] == "null"] == net.list_arguments()


def test_bad_input_is_named():
    data = sym.Variable("data")
    with pytest.raises(AttributeValueError, match="FullyConnected: unknown attribute.*'num_hiden'"):
        sym.FullyConnected(data, num_hiden=3)
    with pytest.raises(AttributeValueError, match="Activation: attribute 'act_type' must be one of"):
        sym.Activation(data, act_type="swish")
    with pytest.raises(AttributeValueError, match="required attribute 'num_hidden'"):
        sym.FullyConnected(data)
    with pytest.raises(TypeError, match="Variable name must be a str"):
        sym.Variable(3)
    bad = mlp().tojson().replace('"num_hidden": "8"', '"num_hidden": "8", "flavour": "x"')
    with pytest.raises(AttributeValueError, match="unknown attribute.*'flavour'"):
        sym.load_json(bad)
    with pytest.raises(MXNetError, match="not a symbol JSON"):
        sym.load_json("{}")


def test_bind_errors_name_the_argument():
    net = mlp()
    with pytest.raises(MXNetError, match="args is missing 'fc2_bias'"):
        net.bind(rm.cpu(), {"data": np.zeros((2, 4)), "fc1_weight": np.zeros((8, 4)),
                            "fc1_bias": np.zeros(8), "fc2_weight": np.zeros((3, 8))})
    with pytest.raises(MXNetError, match="cannot infer the shape of 'data'"):
        net.simple_bind(rm.cpu())
    with pytest.raises(TypeError, match="shape of 'data' must be a tuple"):
        net.simple_bind(rm.cpu(), data=np.zeros((2, 3)))


def test_duplicate_variable_names_are_refused_at_bind():
    net = sym.Variable("x") + sym.Activation(sym.Variable("x"), act_type="relu")
    with pytest.raises(MXNetError, match="several different variables are named 'x'"):
        net.simple_bind(rm.cpu(), x=(2, 3))


def test_json_keeps_attribute_strings_as_given():
    s = sym.SliceChannel(sym.Variable("d"), num_outputs=2, squeeze_axis=1, name="s")
    assert json.loads(s.tojson())["nodes"][-1]["attrs"] == {"num_outputs": "2", "squeeze_axis": "1"}


def test_variable_shape_may_be_an_int_as_in_mxnet():
    """MXNet writes ``str(shape)``: ``shape=3`` is the 1-d shape (3,) (its FM test uses it)."""
    assert rm.sym.Variable("b", shape=3).attr_dict()["b"]["__shape__"] == "(3,)"
    with pytest.raises(TypeError, match="shape must be a tuple"):
        rm.sym.Variable("b", shape="3")
