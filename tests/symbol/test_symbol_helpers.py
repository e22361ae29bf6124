"""rm.sym.maximum / minimum / pow / power: Symbol and number combinations as MXNet 1.9.1's
python/mxnet/symbol/symbol.py helpers, with the op names, node names and scalar attributes
MXNet writes (recorded from MXNet 1.9.1)."""
import json

import numpy as np
import pytest

import raymod as rm

A, B = rm.sym.Variable("a"), rm.sym.Variable("b")
X = np.array([1.0, 4.0, 2.0], np.float32)
Y = np.array([3.0, 2.0, 2.0], np.float32)


def _node(sym):
    node = json.loads(sym.tojson())["nodes"][-1]
    return node["op"], node["name"], node.get("attrs")


@pytest.mark.parametrize("make, op, name, attrs", [
    (lambda: rm.sym.maximum(A, B), "_maximum", "_maximum0", None),
    (lambda: rm.sym.maximum(A, 2), "_maximum_scalar", "_maximumscalar0", {"scalar": "2"}),
    (lambda: rm.sym.maximum(2, A), "_maximum_scalar", "_maximumscalar0", {"scalar": "2"}),
    (lambda: rm.sym.minimum(A, B), "_minimum", "_minimum0", None),
    (lambda: rm.sym.minimum(A, 2.5), "_minimum_scalar", "_minimumscalar0", {"scalar": "2.5"}),
    (lambda: rm.sym.pow(A, B), "_power", "_power0", None),
    (lambda: rm.sym.pow(A, 2), "_power_scalar", "_powerscalar0", {"scalar": "2"}),
    (lambda: rm.sym.pow(2, A), "_rpower_scalar", "_rpowerscalar0", {"scalar": "2"}),
    (lambda: rm.sym.power(A, 3), "_power_scalar", "_powerscalar0", {"scalar": "3"}),
])
def test_json_as_mxnet_writes_it(make, op, name, attrs):
    with rm.name.NameManager():
        assert _node(make()) == (op, name, attrs)


@pytest.mark.parametrize("make, expected", [
    (lambda: rm.sym.maximum(A, B), np.maximum(X, Y)),
    (lambda: rm.sym.maximum(A, 2), np.maximum(X, 2)),
    (lambda: rm.sym.maximum(2, A), np.maximum(X, 2)),
    (lambda: rm.sym.minimum(A, B), np.minimum(X, Y)),
    (lambda: rm.sym.minimum(3, A), np.minimum(X, 3)),
    (lambda: rm.sym.pow(A, B), X ** Y),
    (lambda: rm.sym.pow(A, 2), X ** 2),
    (lambda: rm.sym.pow(2, A), 2 ** X),
    (lambda: rm.sym.power(A, B), X ** Y),
])
def test_values(make, expected):
    sym = make()
    args = {n: {"a": X, "b": Y}[n] for n in sym.list_arguments()}
    np.testing.assert_allclose(sym.eval(**args)[0], expected, rtol=1e-6)


def test_two_numbers_give_a_number():
    assert rm.sym.maximum(2, 3) == 3 and rm.sym.minimum(2, 3) == 2
    assert rm.sym.pow(2, 3) == 8 and rm.sym.power(2.0, 0.5) == 2.0 ** 0.5


@pytest.mark.parametrize("fn", [rm.sym.maximum, rm.sym.minimum, rm.sym.pow])
def test_other_types_are_refused(fn):
    with pytest.raises(TypeError, match="types .*str.*Symbol.* not supported"):
        fn("x", A)


def test_contrib_namespace_names_nodes_by_the_short_name_as_mxnet():
    data, rois = rm.sym.Variable("data"), rm.sym.Variable("rois")
    with rm.sym.NameManager():
        align = rm.sym.contrib.ROIAlign(data, rois, pooled_size=(2, 2), spatial_scale=1.0)
        nms = rm.sym.contrib.box_nms(data)
    assert (align.name, nms.name) == ("roialign0", "box_nms0")  # what MXNet 1.9.1 names them
    assert json.loads(nms.tojson())["nodes"][-1]["op"] == "_contrib_box_nms"
    assert "MultiBoxPrior" in dir(rm.sym.contrib)
    with pytest.raises(AttributeError, match="no operator 'NoSuchOp'"):
        rm.sym.contrib.NoSuchOp


# (expression, op, node name, scalar attribute) as MXNet 1.9.1 writes them
OPERATOR_NODES = [
    (lambda a, b: a % b, "_mod", "_mod0", None),
    (lambda a, b: a % 2, "_mod_scalar", "_modscalar0", "2"),
    (lambda a, b: 2 % a, "_rmod_scalar", "_rmodscalar0", "2"),
    (lambda a, b: a == b, "_equal", "_equal0", None),
    (lambda a, b: a == 2, "_equal_scalar", "_equal_scalar0", "2"),
    (lambda a, b: a != b, "_not_equal", "_not_equal0", None),
    (lambda a, b: a > 2, "_greater_scalar", "_greater_scalar0", "2"),
    (lambda a, b: 2 < a, "_greater_scalar", "_greater_scalar0", "2"),
    (lambda a, b: a >= b, "_greater_equal", "_greater_equal0", None),
    (lambda a, b: a < 2, "_lesser_scalar", "_lesser_scalar0", "2"),
    (lambda a, b: a <= b, "_lesser_equal", "_lesser_equal0", None),
    (lambda a, b: rm.sym.hypot(a, b), "_hypot", "_hypot0", None),
    (lambda a, b: rm.sym.hypot(a, 2), "_hypot_scalar", "_hypotscalar0", "2"),
]


@pytest.mark.parametrize("build, op, name, scalar", OPERATOR_NODES)
def test_operators_write_mxnet_nodes(build, op, name, scalar):
    with rm.sym.NameManager():
        node = json.loads(build(A, B).tojson())["nodes"][-1]
    assert (node["op"], node["name"], node.get("attrs", {}).get("scalar")) == (op, name, scalar)


def test_comparisons_compute_and_symbols_still_hash():
    y = np.array([4.0, 1.0, 2.0], np.float32)
    out = (A > B).eval(a=X, b=y)[0]
    np.testing.assert_array_equal(out, (X > y).astype(np.float32))
    np.testing.assert_allclose((A % 3).eval(a=X)[0], X % 3)
    assert len({A, B, A}) == 2 and rm.sym.hypot(3, 4) == 5.0
