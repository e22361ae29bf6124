"""rm.metric against reference formulas written out here (MXNet 1.x semantics, spec section 7)."""
import json
import math

import numpy as np
import pytest

import raymod.metric as metric
from raymod.context import gpu_available

RNG = np.random.default_rng(0)


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def probs(n, c, rng=RNG):
    return softmax(rng.normal(size=(n, c))).astype(np.float32)


def classes(n, c, rng=RNG):
    return rng.integers(0, c, size=n).astype(np.float32)


def assert_same(a, b, rtol=1e-12):
    """Two metric values (numbers or lists) equal up to rounding, NaN equal to NaN."""
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64),
                               rtol=rtol, atol=0, equal_nan=True)


# ----- registry and create ---------------------------------------------------------------------
@pytest.mark.parametrize("name, cls, kwargs", [
    ("acc", metric.Accuracy, {}), ("accuracy", metric.Accuracy, {}),
    ("top_k_accuracy", metric.TopKAccuracy, {"top_k": 2}),
    ("top_k_acc", metric.TopKAccuracy, {"top_k": 2}),
    ("f1", metric.F1, {}), ("mcc", metric.MCC, {}),
    ("perplexity", metric.Perplexity, {"ignore_label": None}),
    ("mae", metric.MAE, {}), ("mse", metric.MSE, {}), ("rmse", metric.RMSE, {}),
    ("ce", metric.CrossEntropy, {}), ("cross-entropy", metric.CrossEntropy, {}),
    ("nll_loss", metric.NegativeLogLikelihood, {}), ("pearsonr", metric.PearsonCorrelation, {}),
    ("pcc", metric.PCC, {}), ("loss", metric.Loss, {}),
    ("composite", metric.CompositeEvalMetric, {}),
    ("ACC", metric.Accuracy, {}),
])
def test_create_by_name(name, cls, kwargs):
    assert type(metric.create(name, **kwargs)) is cls


def test_create_other_forms():
    acc = metric.Accuracy()
    assert metric.create(acc) is acc
    comp = metric.create(["acc", "f1"])
    assert isinstance(comp, metric.CompositeEvalMetric)
    assert [type(m) for m in comp.metrics] == [metric.Accuracy, metric.F1]

    def my_feval(label, pred):
        return 1.0
    custom = metric.create(my_feval)
    assert isinstance(custom, metric.CustomMetric) and custom.name == "my_feval"
    assert metric.create(lambda l, p: 0.0).name == "custom(<lambda>)"
    assert metric.create('["acc", {"axis": 0}]').axis == 0
    assert metric.create(metric.F1, average="micro").average == "micro"


def test_create_unknown_name_lists_known():
    with pytest.raises(ValueError, match="known metrics: .*acc.*rmse"):
        metric.create("no_such_metric")


@pytest.mark.parametrize("args, kwargs", [
    (("acc",), {"axis": 0}), (("f1",), {}), (("f1",), {"average": "micro"}), (("mcc",), {}),
    (("perplexity", -1), {}), (("pearsonr",), {}), (("pcc",), {}), (("nll_loss",), {}),
    (("loss",), {}), ((["acc", "f1"],), {}), (("ce",), {"eps": 1e-6}), (("mse",), {}),
    (("mae",), {}), (("rmse",), {}), (("top_k_acc",), {"top_k": 3}),
    (("acc",), {"output_names": ["softmax_output"], "label_names": ["softmax_label"]}),
])
def test_get_config_round_trip(args, kwargs):
    m = metric.create(*args, **kwargs)
    config = m.get_config()
    again = metric.create(json.dumps(config))
    assert type(again) is type(m)
    assert again.get_config() == config
    assert again.name == m.name


def test_custom_metric_config_not_serialisable():
    with pytest.raises(NotImplementedError):
        metric.np(lambda l, p: 0.0).get_config()


# ----- reset_local / get_global ----------------------------------------------------------------
def _class_batch(c):
    return lambda rng: ([classes(12, c, rng)], [probs(12, c, rng)])


def _reg_batch(rng):
    label = rng.normal(size=(10, 1))
    return [label], [label + rng.normal(scale=0.5, size=(10, 1))]


def _loss_batch(rng):
    return None, [rng.random(size=(10,))]


def _mean_abs(label, pred):
    return float(np.abs(label - pred).mean())


RESET_CASES = {
    "acc": (lambda: metric.create("acc"), _class_batch(3)),
    "top_k": (lambda: metric.create("top_k_acc", top_k=3), _class_batch(5)),
    "f1_macro": (lambda: metric.create("f1"), _class_batch(2)),
    "f1_micro": (lambda: metric.create("f1", average="micro"), _class_batch(2)),
    "mcc_macro": (lambda: metric.create("mcc"), _class_batch(2)),
    "mcc_micro": (lambda: metric.create("mcc", average="micro"), _class_batch(2)),
    "perplexity": (lambda: metric.create("perplexity", -1), _class_batch(4)),
    "pearsonr": (lambda: metric.create("pearsonr"), _reg_batch),
    "pearsonr_micro": (lambda: metric.create("pearsonr", average="micro"), _reg_batch),
    "pcc": (lambda: metric.create("pcc"), _class_batch(3)),
    "nll_loss": (lambda: metric.create("nll_loss"), _class_batch(3)),
    "loss": (lambda: metric.create("loss"), _loss_batch),
    "ce": (lambda: metric.create("ce"), _class_batch(3)),
    "mae": (lambda: metric.create("mae"), _reg_batch),
    "mse": (lambda: metric.create("mse"), _reg_batch),
    "rmse": (lambda: metric.create("rmse"), _reg_batch),
    "custom": (lambda: metric.np(_mean_abs), _reg_batch),
    "composite": (lambda: metric.create(["acc", "f1", "pcc"]), _class_batch(2)),
}


@pytest.mark.parametrize("case", sorted(RESET_CASES))
def test_reset_local_and_global(case):
    make, batch = RESET_CASES[case]
    rng = np.random.default_rng(1)
    first, second = batch(rng), batch(rng)
    twin, resetting, fresh = make(), make(), make()
    for m in (twin, resetting):
        m.update(*first)
    resetting.reset_local()
    assert math.isnan(np.asarray(resetting.get()[1], dtype=float).ravel()[0])
    for m in (twin, resetting, fresh):
        m.update(*second)
    assert_same(resetting.get_global()[1], twin.get()[1])
    assert_same(resetting.get()[1], fresh.get()[1])
    assert_same(resetting.get_global()[1], twin.get_global()[1])
    assert resetting.get_global_name_value()[0][0] == twin.get_name_value()[0][0]
    resetting.reset()
    assert math.isnan(np.asarray(resetting.get_global()[1], dtype=float).ravel()[0])


# ----- values against reference formulas -------------------------------------------------------
def test_accuracy():
    label, pred = classes(20, 4), probs(20, 4)
    m = metric.Accuracy()
    assert math.isnan(m.get()[1])
    m.update([label], [pred])
    assert m.get() == ("accuracy", np.mean(pred.argmax(axis=1) == label))
    assert (m.sum_metric, m.num_inst) == ((pred.argmax(axis=1) == label).sum(), 20)
    # 2-D labels are flattened; a bare array works like a one-element list
    m2 = metric.Accuracy()
    m2.update(label.reshape(20, 1), pred)
    assert m2.get() == m.get()
    # class indices as predictions (same shape as labels) are compared directly
    m3 = metric.Accuracy()
    m3.update([label], [pred.argmax(axis=1).astype(np.float32)])
    assert m3.get() == m.get()


def test_accuracy_axis0():
    label, pred = classes(6, 3), probs(6, 3)
    m = metric.Accuracy(axis=0)
    m.update([label], [pred.T])
    assert m.get()[1] == np.mean(pred.argmax(axis=1) == label)


def test_label_count_mismatch():
    with pytest.raises(ValueError, match="does not match"):
        metric.Accuracy().update([classes(4, 2)], [probs(4, 2), probs(4, 2)])
    with pytest.raises(ValueError):
        metric.Accuracy().update([classes(4, 2)], [probs(5, 2)])


def test_top_k_accuracy():
    label, pred = classes(30, 6), probs(30, 6)
    m = metric.create("top_k_accuracy", top_k=3)
    assert m.name == "top_k_accuracy_3"
    m.update([label], [pred])
    top3 = np.argsort(-pred, axis=1)[:, :3]
    assert m.get()[1] == np.mean([lab in row for lab, row in zip(label, top3)])
    with pytest.raises(ValueError):
        metric.TopKAccuracy(top_k=1)
    # top_k beyond the number of classes counts every sample as a hit
    big = metric.TopKAccuracy(top_k=10)
    big.update([label], [pred])
    assert big.get()[1] == 1.0


def binary_counts(label, pred):
    p = pred.argmax(axis=1) == 1
    y = label == 1
    return (p & y).sum(), (p & ~y).sum(), (~p & y).sum(), (~p & ~y).sum()


def f1_reference(tp, fp, fn, tn):
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def mcc_reference(tp, fp, fn, tn):
    tp, fp, fn, tn = map(float, (tp, fp, fn, tn))
    terms = [t for t in (tp + fp, tp + fn, tn + fp, tn + fn) if t]
    return (tp * tn - fp * fn) / math.sqrt(np.prod(terms)) if tp + fp + fn + tn else 0.0


@pytest.mark.parametrize("cls, reference", [(metric.F1, f1_reference), (metric.MCC, mcc_reference)])
def test_binary_micro_and_macro(cls, reference):
    rng = np.random.default_rng(3)
    batches = [(classes(n, 2, rng), probs(n, 2, rng)) for n in (16, 9, 25)]
    micro, macro = cls(average="micro"), cls(average="macro")
    assert math.isnan(micro.get()[1]) and math.isnan(macro.get()[1])
    for label, pred in batches:
        micro.update([label], [pred])
        macro.update([label], [pred])
    pooled = np.sum([binary_counts(*b) for b in batches], axis=0)
    assert_same(micro.get()[1], reference(*pooled))
    assert micro.num_inst == 50
    assert_same(macro.get()[1], np.mean([reference(*binary_counts(*b)) for b in batches]))
    assert macro.num_inst == 3


@pytest.mark.parametrize("name", ["f1", "mcc"])
@pytest.mark.parametrize("average", ["micro", "macro"])
def test_binary_all_negative_is_zero(name, average):
    m = metric.create(name, average=average)
    m.update([np.zeros(8)], [np.tile([[0.9, 0.1]], (8, 1))])
    assert m.get()[1] == 0.0


def test_mcc_equals_pearson_of_binary_vectors():
    label, pred = classes(40, 2), probs(40, 2)
    m = metric.MCC(average="micro")
    m.update([label], [pred])
    assert_same(m.get()[1], np.corrcoef(label, pred.argmax(axis=1))[0, 1], rtol=1e-9)


def test_binary_metrics_reject_multiclass():
    with pytest.raises(ValueError, match="binary"):
        metric.F1().update([np.array([0, 1, 2.0])], [probs(3, 3)])


def test_perplexity():
    label = np.array([0, 1, 1, 2, -1, 0], dtype=np.float32)
    pred = probs(6, 3)
    keep = label != -1
    p = pred[np.arange(6)[keep], label[keep].astype(int)].astype(np.float64)
    expected = math.exp(-np.log(p).sum() / keep.sum())
    m = metric.create("perplexity", -1)
    m.update([label], [pred])
    assert_same(m.get()[1], expected)
    assert m.num_inst == 5
    # without ignore_label every position counts (the -1 picks the last class)
    m2 = metric.Perplexity(ignore_label=None)
    m2.update([label[keep]], [pred[keep]])
    assert_same(m2.get()[1], expected)


def test_perplexity_time_major_and_axis():
    rng = np.random.default_rng(4)
    label = classes(12, 5, rng).reshape(3, 4)
    pred = probs(12, 5, rng).reshape(3, 4, 5)
    picked = pred.reshape(12, 5)[np.arange(12), label.ravel().astype(int)]
    expected = math.exp(-np.mean(np.log(picked)))
    m = metric.Perplexity(None)
    m.update([label], [pred])
    assert_same(m.get()[1], expected, rtol=1e-6)
    m1 = metric.Perplexity(None, axis=1)
    m1.update([label], [np.moveaxis(pred, 2, 1)])
    assert_same(m1.get()[1], m.get()[1])


@pytest.mark.parametrize("name, per_array", [
    ("mae", lambda d: np.abs(d).mean()),
    ("mse", lambda d: (d ** 2).mean()),
    ("rmse", lambda d: np.sqrt((d ** 2).mean())),
])
def test_regression_error_per_update(name, per_array):
    rng = np.random.default_rng(5)
    updates = [(rng.normal(size=(n,)), rng.normal(size=(n, 1))) for n in (5, 30)]
    m = metric.create(name)
    for label, pred in updates:
        m.update([label], [pred])
    expected = np.mean([per_array(label.reshape(-1, 1) - pred) for label, pred in updates])
    assert_same(m.get()[1], expected)
    assert m.num_inst == 2  # averaged over updates (arrays), not samples


@pytest.mark.parametrize("name, value", [("mse", 0.01), ("mae", 0.1), ("rmse", 0.1)])
def test_regression_bare_array(name, value):
    label = np.array([0.5, 1.5, 2.5, 3.5])
    m = metric.create(name)
    m.update(label, label + 0.1)
    assert_same(m.get()[1], value, rtol=1e-9)


@pytest.mark.parametrize("name", ["ce", "nll_loss"])
def test_cross_entropy_and_nll(name):
    label, pred = classes(15, 4), probs(15, 4)
    m = metric.create(name)
    m.update([label.reshape(15, 1)], [pred])
    picked = pred[np.arange(15), label.astype(int)].astype(np.float64)
    assert_same(m.get()[1], np.mean(-np.log(picked + 1e-12)))
    assert m.num_inst == 15


def test_loss_bare_array_equals_list():
    pred = RNG.random(size=(4, 3))
    bare, listed = metric.Loss(), metric.Loss()
    bare.update(None, pred)
    listed.update(None, [pred])
    assert bare.get() == listed.get() == ("loss", pred.sum() / pred.size)


def test_pearson_macro_and_micro():
    rng = np.random.default_rng(6)
    updates = [(rng.normal(size=(n, 2)), rng.normal(size=(n, 2))) for n in (7, 13)]
    updates = [(label, label + pred) for label, pred in updates]
    macro, micro = metric.PearsonCorrelation(), metric.PearsonCorrelation(average="micro")
    assert math.isnan(macro.get()[1]) and math.isnan(micro.get()[1])
    for label, pred in updates:
        macro.update([label], [pred])
        micro.update([label], [pred])
    expected_macro = np.mean([np.corrcoef(p.ravel(), l.ravel())[0, 1] for l, p in updates])
    all_l = np.concatenate([l.ravel() for l, _ in updates])
    all_p = np.concatenate([p.ravel() for _, p in updates])
    assert_same(macro.get()[1], expected_macro, rtol=1e-10)
    assert_same(micro.get()[1], np.corrcoef(all_p, all_l)[0, 1], rtol=1e-10)
    with pytest.raises(ValueError):
        macro.update([np.zeros(3)], [np.zeros(4)])


def pcc_reference(cm):
    """Gorodkin's K-class correlation written from its definition over samples."""
    n = cm.sum()
    k = cm.shape[0]
    num = sum(cm[a, a] * cm[b, c] - cm[a, b] * cm[c, a]
              for a in range(k) for b in range(k) for c in range(k))
    den_p = sum(cm[a, :].sum() * sum(cm[g, :].sum() for g in range(k) if g != a) for a in range(k))
    den_l = sum(cm[:, a].sum() * sum(cm[:, g].sum() for g in range(k) if g != a) for a in range(k))
    assert n > 0
    return num / math.sqrt(den_p * den_l)


def test_pcc_multiclass_formula_and_order_independence():
    rng = np.random.default_rng(7)
    label, pred = classes(60, 4, rng), probs(60, 4, rng)
    cm = np.zeros((4, 4))
    for p, l in zip(pred.argmax(axis=1), label.astype(int)):
        cm[p, l] += 1
    whole = metric.PCC()
    whole.update([label], [pred])
    assert_same(whole.get()[1], pcc_reference(cm), rtol=1e-10)
    np.testing.assert_array_equal(whole.gcm, cm)
    order = rng.permutation(60)
    chunked = metric.PCC()
    for idx in np.array_split(order, 7):
        chunked.update([label[idx]], [pred[idx].argmax(axis=1)])  # class indices also accepted
    assert_same(chunked.get()[1], whole.get()[1])
    assert chunked.num_inst == 7 and whole.num_inst == 1


def test_pcc_binary_equals_mcc_and_grows():
    label, pred = classes(30, 2), probs(30, 2)
    pcc, mcc = metric.PCC(), metric.MCC(average="micro")
    pcc.update([label], [pred])
    mcc.update([label], [pred])
    assert_same(pcc.get()[1], mcc.get()[1], rtol=1e-10)
    assert_same(pcc.get()[1], np.corrcoef(label, pred.argmax(axis=1))[0, 1], rtol=1e-9)
    assert pcc.k == 2
    pcc.update([np.array([5.0])], [np.array([5.0])])
    assert pcc.k == 6 and pcc.lcm.shape == (6, 6)
    assert math.isnan(metric.PCC().get()[1])


def test_custom_metric_scalar_and_tuple():
    label, pred = RNG.normal(size=(6,)), RNG.normal(size=(6,))
    scalar = metric.np(_mean_abs)
    scalar.update([label, label], [pred, pred])
    assert scalar.get() == ("_mean_abs", np.abs(label - pred).mean())
    assert scalar.num_inst == 2
    summed = metric.CustomMetric(lambda l, p: (np.abs(l - p).sum(), l.size), name="sae")
    summed.update([label], [pred])
    assert_same(summed.get()[1], np.abs(label - pred).mean())
    extra = metric.np(_mean_abs, allow_extra_outputs=True)
    extra.update([label], [pred, pred * 100])
    assert extra.num_inst == 1
    assert_same(extra.get()[1], np.abs(label - pred).mean())


def test_composite_update_dict_and_lists():
    label, pred = classes(10, 2), probs(10, 2)
    comp = metric.CompositeEvalMetric(["acc", metric.F1()], output_names=["out"],
                                      label_names=["lab"])
    comp.update_dict({"lab": label, "other": label * 0}, {"out": pred, "junk": pred * 0})
    names, values = comp.get()
    assert names == ["accuracy", "f1"]
    acc = metric.Accuracy()
    acc.update([label], [pred])
    assert values[0] == acc.get()[1]
    assert comp.get_name_value()[0] == ("accuracy", values[0])
    assert comp.get_metric(1).name == "f1"
    with pytest.raises(IndexError):
        comp.get_metric(5)


def test_update_dict_picks_names():
    m = metric.Accuracy(output_names=["b"], label_names=["y"])
    label, good, bad = np.array([1.0, 0.0]), np.array([[0.0, 1.0], [1.0, 0.0]]), np.zeros((2, 2))
    m.update_dict({"x": np.array([0.0, 1.0]), "y": label}, {"a": bad, "b": good})
    assert m.get()[1] == 1.0


def test_check_label_shapes():
    a, b = np.zeros(3), np.zeros(3)
    assert metric.check_label_shapes(a, b, wrap=True) == ([a], [b])
    with pytest.raises(ValueError):
        metric.check_label_shapes(np.zeros((3, 2)), np.zeros((3, 1)), shape=True)


def test_register_and_str():
    @metric.register
    @metric.alias("always_one_alias")
    class AlwaysOne(metric.EvalMetric):
        """Counts every sample as a hit (user metric written MXNet style)."""

        def __init__(self, name="always_one", **kwargs):
            super().__init__(name, **kwargs)

        def update(self, labels, preds):
            self.sum_metric += len(labels)
            self.num_inst += len(labels)

    m = metric.create("always_one_alias")
    m.update([1, 2], [1, 2])
    assert m.get() == ("always_one", 1.0)
    assert str(m) == "EvalMetric: {'always_one': 1.0}"
    assert m.get_global() == m.get()  # no global stats of its own: falls back to get()


class FakeDeviceArray:
    """Looks like a cupy array to raymod.context.as_numpy: has a shape and .get()."""

    def __init__(self, host):
        self._host = host
        self.shape = host.shape

    def get(self):
        return self._host.copy()


@pytest.mark.parametrize("name", sorted(RESET_CASES))
def test_metrics_copy_device_arrays_to_host(name):
    make, batch = RESET_CASES[name]
    labels, preds = batch(np.random.default_rng(8))
    host, dev = make(), make()
    host.update(labels, preds)
    wrap = lambda arrays: None if arrays is None else [FakeDeviceArray(a) for a in arrays]
    dev.update(wrap(labels), wrap(preds))
    assert_same(dev.get()[1], host.get()[1])


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA device")
def test_metrics_accept_cupy_arrays():
    import cupy
    label, pred = classes(16, 3), probs(16, 3)
    cases = {"acc": pred, "ce": pred, "pcc": pred, "perplexity": pred, "loss": pred,
             "mse": pred[:, 0], "pearsonr": pred[:, 0]}
    for name, p in cases.items():
        args = (-1,) if name == "perplexity" else ()
        host, dev = metric.create(name, *args), metric.create(name, *args)
        host.update([label], [p])
        dev.update([cupy.asarray(label)], [cupy.asarray(p)])
        assert_same(dev.get()[1], host.get()[1])
