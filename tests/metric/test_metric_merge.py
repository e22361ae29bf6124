"""Mergeable metric state: k workers' partial metrics merge to what one process computes."""
import json

import numpy as np
import pytest

import raymod.metric as metric


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def class_batch(c, n=24, outputs=2):
    """labels / class-score predictions for ``outputs`` heads."""
    def make(rng):
        labels = [rng.integers(0, c, size=n).astype(np.float32) for _ in range(outputs)]
        preds = [softmax(rng.normal(size=(n, c))).astype(np.float32) for _ in range(outputs)]
        return labels, preds
    return make


def reg_batch(n=24, outputs=2):
    def make(rng):
        labels = [rng.normal(loc=3.0, size=(n, 1)) for _ in range(outputs)]
        return labels, [l + rng.normal(scale=0.7, size=(n, 1)) for l in labels]
    return make


def loss_batch(rng):
    return None, [rng.random(size=(24, 3)), rng.random(size=(24,))]


def sum_abs(label, pred):
    return float(np.abs(label - pred).sum()), int(label.size)


CASES = {
    "acc": (lambda: metric.Accuracy(), class_batch(4)),
    "top_k_acc": (lambda: metric.TopKAccuracy(top_k=2), class_batch(5)),
    "f1_macro": (lambda: metric.F1(), class_batch(2)),
    "f1_micro": (lambda: metric.F1(average="micro"), class_batch(2)),
    "mcc_macro": (lambda: metric.MCC(), class_batch(2)),
    "mcc_micro": (lambda: metric.MCC(average="micro"), class_batch(2)),
    "pcc": (lambda: metric.PCC(), class_batch(5)),
    "perplexity": (lambda: metric.Perplexity(ignore_label=0), class_batch(4)),
    "ce": (lambda: metric.CrossEntropy(), class_batch(4)),
    "nll_loss": (lambda: metric.NegativeLogLikelihood(), class_batch(4)),
    "mae": (lambda: metric.MAE(), reg_batch()),
    "mse": (lambda: metric.MSE(), reg_batch()),
    "rmse": (lambda: metric.RMSE(), reg_batch()),
    "pearsonr_macro": (lambda: metric.PearsonCorrelation(), reg_batch()),
    "pearsonr_micro": (lambda: metric.PearsonCorrelation(average="micro"), reg_batch()),
    "loss": (lambda: metric.Loss(), loss_batch),
    "custom_sum_count": (lambda: metric.CustomMetric(sum_abs), reg_batch()),
    "composite": (lambda: metric.CompositeEvalMetric(["acc", "f1", "mse", "pcc"]), class_batch(2)),
}


def split(batch, k):
    """Split every array of (labels, preds) into k row ranges; one (labels, preds) per part."""
    labels, preds = batch
    n = len(preds[0])
    bounds = np.array_split(np.arange(n), k)
    part = lambda arrays, idx: None if arrays is None else [a[idx] for a in arrays]
    return [(part(labels, idx), part(preds, idx)) for idx in bounds]


def assert_same_metric(a, b, rtol=1e-12):
    for getter in ("get", "get_global"):
        va, vb = getattr(a, getter)(), getattr(b, getter)()
        assert va[0] == vb[0]
        np.testing.assert_allclose(np.asarray(va[1], float), np.asarray(vb[1], float),
                                   rtol=rtol, equal_nan=True)
    for x, y in zip(getattr(a, "metrics", [a]), getattr(b, "metrics", [b])):
        if not isinstance(x, metric.CompositeEvalMetric):
            assert x.num_inst == y.num_inst and x.global_num_inst == y.global_num_inst
            np.testing.assert_allclose(float(x.sum_metric), float(y.sum_metric), rtol=1e-10,
                                       equal_nan=True)


def part_states(make, parts):
    """What each worker returns for one step: the state of a fresh metric updated once."""
    states = []
    for labels, preds in parts:
        worker = make()
        worker.update(labels, preds)
        states.append(worker.state())
    return states


@pytest.mark.parametrize("k", [1, 2, 3, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_split_batch_merges_to_one_update(case, k):
    make, batch_fn = CASES[case]
    batch = batch_fn(np.random.default_rng(10 + k))
    whole = make()
    whole.update(*batch)
    driver = make()
    driver.merge(driver.merge_parts(part_states(make, split(batch, k))))
    assert_same_metric(driver, whole)


@pytest.mark.parametrize("case", sorted(CASES))
def test_steps_of_parts_merge_to_single_process(case):
    """Three steps, each split over a different number of workers, plus reset_local midway."""
    make, batch_fn = CASES[case]
    rng = np.random.default_rng(20)
    single, driver = make(), make()
    for step, k in enumerate((2, 4, 3)):
        batch = batch_fn(rng)
        single.update(*batch)
        driver.merge(driver.merge_parts(part_states(make, split(batch, k))))
        if step == 0:
            single.reset_local()
            driver.reset_local()
        assert_same_metric(driver, single)


@pytest.mark.parametrize("case", ["acc", "top_k_acc", "f1_micro", "mcc_micro", "pcc", "perplexity",
                                  "ce", "nll_loss", "pearsonr_micro", "loss", "custom_sum_count"])
def test_pooled_metrics_merge_whole_worker_histories(case):
    """Pooled metrics: each worker updates over many steps; one merge at the end is exact."""
    make, batch_fn = CASES[case]
    rng = np.random.default_rng(30)
    single, workers = make(), [make() for _ in range(3)]
    for _ in range(4):
        batch = batch_fn(rng)
        single.update(*batch)
        for worker, part in zip(workers, split(batch, 3)):
            worker.update(*part)
    driver = make()
    for worker in workers:
        driver.merge(worker.state())
    values = np.asarray(driver.get()[1], float), np.asarray(single.get()[1], float)
    np.testing.assert_allclose(*values, rtol=1e-12)


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_of_separate_steps_equals_sequential_updates(case):
    """merge() of two metrics' states = one process making both metrics' update calls."""
    make, batch_fn = CASES[case]
    rng = np.random.default_rng(40)
    first, second = batch_fn(rng), batch_fn(rng)
    a, b, single = make(), make(), make()
    a.update(*first)
    b.update(*second)
    single.update(*first)
    single.update(*second)
    assert_same_metric(a.merge(b.state()), single)


def test_merge_parts_rejects_multi_update_states_and_other_classes():
    m = metric.MSE()
    m.update(np.ones(3), np.zeros(3))
    m.update(np.ones(3), np.zeros(3))
    with pytest.raises(ValueError, match="exactly one update"):
        metric.MSE().merge_parts([m.state()])
    with pytest.raises(ValueError, match="at least one"):
        metric.MSE().merge_parts([])
    with pytest.raises(ValueError, match="cannot merge a 'MSE' state into MAE"):
        metric.MAE().merge(m.state())
    with pytest.raises(ValueError):
        metric.F1(average="micro").merge(metric.F1(average="macro").state())
    reset = metric.MSE()
    reset.update(np.ones(3), np.zeros(3))
    reset.reset_local()
    reset.update(np.ones(3), np.zeros(3))
    assert reset.state()["step"] is None  # local 1 update, global 2: not a one-update state


def test_mse_merge_parts_differs_from_plain_merge():
    """The reason merge_parts exists: MSE averages per update, so k parts are not k updates."""
    label = np.arange(6.0)
    pred = label + np.array([0, 0, 0, 3, 3, 3])
    whole = metric.MSE()
    whole.update(label, pred)
    states = part_states(metric.MSE, [(label[:3], pred[:3]), (label[3:], pred[3:])])
    parts = metric.MSE().merge(metric.MSE().merge_parts(states))
    plain = metric.MSE()
    for s in states:
        plain.merge(s)
    assert parts.get()[1] == whole.get()[1] == 4.5 and parts.num_inst == 1
    assert plain.get()[1] == 4.5 and plain.num_inst == 2  # equal here only by balance
    states = part_states(metric.MSE, [(label[:1], pred[:1]), (label[1:], pred[1:])])
    plain = metric.MSE().merge(states[0]).merge(states[1])
    assert metric.MSE().merge(metric.MSE().merge_parts(states)).get()[1] == 4.5
    assert plain.get()[1] == (0 + 9 * 3 / 5) / 2


def test_pcc_merge_pads_confusion_matrices():
    small, big, whole = metric.PCC(), metric.PCC(), metric.PCC()
    l1, p1 = np.array([0, 1, 1, 0.0]), np.array([0, 1, 0, 0.0])
    l2, p2 = np.array([4, 2, 3, 4.0]), np.array([4, 2, 4, 3.0])
    small.update(l1, p1)
    big.update(l2, p2)
    whole.update(np.concatenate([l1, l2]), np.concatenate([p1, p2]))
    merged = metric.PCC().merge(metric.PCC().merge_parts([small.state(), big.state()]))
    np.testing.assert_array_equal(merged.gcm, whole.gcm)
    assert merged.k == 5
    assert merged.get()[1] == whole.get()[1]


def test_pearson_micro_is_stable_with_large_offsets():
    rng = np.random.default_rng(50)
    label = 1e8 + rng.normal(size=(4000, 1))
    pred = label + rng.normal(scale=0.5, size=(4000, 1))
    driver = metric.PearsonCorrelation(average="micro")
    for labels, preds in split(([label], [pred]), 5):
        part = metric.PearsonCorrelation(average="micro")
        part.update(labels, preds)
        driver.merge(part.state())
    expected = np.corrcoef((label - 1e8).ravel(), (pred - 1e8).ravel())[0, 1]
    np.testing.assert_allclose(driver.get()[1], expected, rtol=1e-6)


def test_states_are_small_and_json_able():
    for case, (make, batch_fn) in CASES.items():
        m = make()
        m.update(*batch_fn(np.random.default_rng(60)))
        state = m.state()

        def plain(x):
            return x.tolist() if isinstance(x, np.ndarray) else x
        text = json.dumps(state, default=plain)
        assert len(text) < 4000, case
        # a state sent as JSON (arrays as lists) merges into a fresh metric like the original
        via_json, direct = make().merge(json.loads(text)), make().merge(state)
        assert_same_metric(via_json, direct)


def test_merge_accepts_a_metric_and_keeps_step_of_fresh_target():
    a = metric.Accuracy()
    a.update(np.array([1.0, 0.0]), np.array([[0.2, 0.8], [0.6, 0.4]]))
    b = metric.Accuracy().merge(a)
    assert b.get() == a.get() == ("accuracy", 1.0)
    assert b.state()["step"] == a.state()["step"]  # still a one-update state
    b.merge(a)
    assert b.state()["step"] is None and b.num_inst == 4


@pytest.mark.parametrize("case", sorted(CASES))
def test_part_states_through_json_merge_as_whole_states(case):
    """What a worker pushes (``part_state``, sent as JSON by the doorbell) merges, by parts
    and one at a time, exactly as the full states do."""
    from raymod.kvstore.doorbell import from_json, to_json
    make, batch_fn = CASES[case]
    batch = batch_fn(np.random.default_rng(30))
    parts, wholes = [], []
    for labels, preds in split(batch, 3):
        worker = make()
        worker.update(labels, preds)
        parts.append(from_json(json.loads(json.dumps(to_json(worker.part_state())))))
        wholes.append(worker.state())
    by_parts, by_wholes = make(), make()
    by_parts.merge(by_parts.merge_parts(parts))
    by_wholes.merge(by_wholes.merge_parts(wholes))
    assert_same_metric(by_parts, by_wholes)
    one_by_one, reference = make(), make()
    for part, whole in zip(parts, wholes):
        one_by_one.merge(part)
        reference.merge(whole)
    assert_same_metric(one_by_one, reference)


def test_part_state_is_the_record_of_exactly_one_update():
    m = metric.Accuracy()
    assert m.part_state() == m.state()  # no update: the whole (empty) state
    labels, preds = class_batch(4)(np.random.default_rng(0))
    m.update(labels, preds)
    assert set(m.part_state()) == {"metric", "step"}
    m.update(labels, preds)
    assert m.part_state() == m.state()


def test_mxnet_style_metric_parts_merge_by_addition():
    """A subclass that sets sum_metric / num_inst itself keeps no record: its part is its
    whole state, and the parts add up."""
    class Count(metric.EvalMetric):
        def update(self, labels, preds):
            self.sum_metric += float(len(preds[0]))
            self.num_inst += 1

    parts = []
    for n in (3, 5):
        m = Count("count")
        m.update(None, [np.zeros(n)])
        parts.append(m.part_state())
    driver = Count("count")
    for p in parts:
        driver.merge(p)
    assert (driver.sum_metric, driver.num_inst) == (8.0, 2)
