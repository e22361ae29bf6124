import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.ops.detection._common import greedy_nms
from raymod.test_utils import bind, check_gradient, op_symbol


def extent(box, fmt):
    if fmt == "corner":
        return box
    x, y, w, h = box
    return [x - w / 2, y - h / 2, x + w / 2, y + h / 2]


def area(box, fmt):
    w, h = (box[2] - box[0], box[3] - box[1]) if fmt == "corner" else (box[2], box[3])
    return 0.0 if w < 0 or h < 0 else w * h


def reference_box_nms(data, overlap_thresh=0.5, valid_thresh=0.0, topk=-1, coord_start=2,
                      score_index=1, id_index=-1, background_id=-1, force_suppress=False,
                      in_format="corner", out_format="corner"):
    """Returns (output, source row of each output row) for data (..., n, k)."""
    rows = data.reshape(-1, *data.shape[-2:])
    n = rows.shape[1]
    k = n if topk < 0 else min(n, topk)
    if k < 1:
        return data.copy(), np.arange(rows.shape[0] * n).reshape(data.shape[:-1] + (1,))
    out, src = -np.ones_like(rows), -np.ones(rows.shape[:2] + (1,))
    valid = [[r[score_index] > valid_thresh and (id_index < 0 or r[id_index] != background_id)
              for r in batch] for batch in rows]
    if not np.any(valid):
        return out.reshape(data.shape), src.reshape(data.shape[:-1] + (1,))
    for b, batch in enumerate(rows):
        order = sorted((i for i in range(n) if valid[b][i]), key=lambda i: -batch[i, score_index])
        order = order[:k]
        alive = [True] * len(order)
        for p in range(len(order)):
            if not alive[p]:
                continue
            ref = batch[order[p]]
            for q in range(p + 1, len(order)):
                other = batch[order[q]]
                if not alive[q] or (not force_suppress and id_index >= 0
                                    and int(ref[id_index]) != int(other[id_index])):
                    continue
                a = extent(ref[coord_start:coord_start + 4], in_format)
                c = extent(other[coord_start:coord_start + 4], in_format)
                iw = max(0.0, min(a[2], c[2]) - max(a[0], c[0]))
                ih = max(0.0, min(a[3], c[3]) - max(a[1], c[1]))
                union = (area(ref[coord_start:coord_start + 4], in_format)
                         + area(other[coord_start:coord_start + 4], in_format) - iw * ih)
                if union != 0 and iw * ih / union > overlap_thresh:
                    alive[q] = False
        kept = [i for i, keep in zip(order, alive) if keep]
        for slot, i in enumerate(kept):
            row = batch[i].copy()
            box = row[coord_start:coord_start + 4]
            if in_format != out_format and box[0] >= 0:
                row[coord_start:coord_start + 4] = (
                    extent(box, "center") if out_format == "corner"
                    else [(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, box[2] - box[0],
                          box[3] - box[1]])
            out[b, slot], src[b, slot] = row, b * n + i
    return out.reshape(data.shape), src.reshape(data.shape[:-1] + (1,))


def make_boxes(rng, shape, classes=1, fmt="corner", grid=None):
    x1, y1 = rng.uniform(0, 0.8, shape), rng.uniform(0, 0.8, shape)
    w, h = rng.uniform(0.02, 0.4, shape), rng.uniform(0.02, 0.4, shape)
    coords = ([x1, y1, x1 + w, y1 + h] if fmt == "corner" else [x1 + w / 2, y1 + h / 2, w, h])
    score = rng.uniform(0, 1, shape)
    data = np.stack([rng.integers(-1, classes, shape), score, *coords, rng.uniform(0, 1, shape)],
                    -1)
    if grid:  # equal scores and overlaps
        data[..., 1:6] = np.round(data[..., 1:6] * grid) / grid
    return data


CASES = [
    ({"overlap_thresh": 0.3}, (2, 30), 1, "corner", None),
    ({"overlap_thresh": 0.3, "id_index": 0, "valid_thresh": 0.2}, (3, 40), 3, "corner", 8),
    ({"id_index": 0, "force_suppress": True, "topk": 10}, (2, 30), 3, "corner", None),
    ({"in_format": "center", "out_format": "corner", "id_index": 0, "background_id": 0,
      "topk": 25}, (2, 2, 30), 4, "center", None),
    ({"out_format": "center"}, (40,), 1, "corner", None),
    ({"topk": 0}, (2, 10), 1, "corner", None),
    ({"valid_thresh": 2.0}, (2, 10), 1, "corner", None),
    ({"in_format": "center", "out_format": "center", "overlap_thresh": 0.2}, (2, 30), 1,
     "center", 4)]


@pytest.mark.parametrize("attrs, shape, classes, fmt, grid", CASES)
def test_box_nms_matches_reference(ctx, rng, attrs, shape, classes, fmt, grid):
    data = make_boxes(rng, shape, classes, fmt, grid)
    sym = op_symbol("_contrib_box_nms", ["data"], **attrs)
    out, source = reference_box_nms(data, **attrs)
    ex = bind(sym, {"data": data}, ctx)
    outs = ex.forward(is_train=True)
    np.testing.assert_array_equal(as_numpy(outs[0]), out)
    # backward: each output row's gradient lands on its source row
    g = rng.standard_normal(data.shape)
    ex.backward([ctx.xp.asarray(g)])
    expected = np.zeros(data.size).reshape(-1, data.shape[-1])
    for i, s in enumerate(source.reshape(-1)):
        if s >= 0:
            expected[int(s)] = g.reshape(-1, data.shape[-1])[i]
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["data"]).reshape(expected.shape), expected)


def test_box_nms_gradient_is_finite_differences(ctx, rng):
    sym = op_symbol("_contrib_box_nms", ["data"], overlap_thresh=0.3, id_index=0)
    data = make_boxes(rng, (2, 12), 2)
    data[..., 0] = np.abs(data[..., 0]) + 0.5  # ids compare as ints: keep nudges inside one
    check_gradient(sym, {"data": data}, ctx, max_elements=100)


def test_box_nms_mxnet_doc_example(ctx):
    x = np.array([[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
                  [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]], np.float32)
    sym = op_symbol("_contrib_box_nms", ["data"], overlap_thresh=0.1, id_index=0,
                    force_suppress=True)
    ex = bind(sym, {"data": x}, ctx)
    out = ex.forward(is_train=True)[0]
    assert out.dtype == np.float32 and sym.list_outputs() == ["op_output0"]
    np.testing.assert_array_equal(as_numpy(out), [x[3], x[0], [-1] * 6, [-1] * 6])
    ex.backward([ctx.xp.asarray(np.repeat([[0.1], [0.2], [0.3], [0.4]], 6, 1), np.float32)])
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]),
                               np.repeat([[0.2], [0], [0], [0.1]], 6, 1))


@pytest.mark.parametrize("groups, max_keep", [(False, None), (True, None), (False, 3)])
def test_greedy_nms_helper_matches_a_plain_loop(rng, groups, max_keep):
    """The shared NMS loop (grouping, column skipping, compaction) against the textbook one."""
    boxes = make_boxes(rng, (4, 300), 3)[..., 2:6]
    classes = rng.integers(0, 3, (4, 300)).astype(float)
    candidates = rng.uniform(size=(4, 300)) < 0.8

    def rule(xp, ref, data):
        iw = xp.maximum(0, xp.minimum(ref[:, None, 2], data[..., 2])
                        - xp.maximum(ref[:, None, 0], data[..., 0]))
        ih = xp.maximum(0, xp.minimum(ref[:, None, 3], data[..., 3])
                        - xp.maximum(ref[:, None, 1], data[..., 1]))
        return iw * ih > 0.01

    kept = greedy_nms(np, boxes, candidates, rule, classes if groups else None, max_keep)
    for b in range(4):
        mine, dead = [], set()
        for i in range(300):
            if not candidates[b, i] or i in dead or (max_keep and len(mine) == max_keep):
                continue
            mine.append(i)
            hit = rule(np, boxes[b, i][None], boxes[b][None])[0]
            same = classes[b] == classes[b, i] if groups else np.ones(300, bool)
            dead |= set(np.flatnonzero(hit & same).tolist())
        assert np.flatnonzero(kept[b]).tolist() == mine


def test_box_nms_shapes_and_errors():
    sym = op_symbol("_contrib_box_nms", ["data"], id_index=0)
    assert sym.infer_shape(data=(2, 3, 100, 6))[1] == [(2, 3, 100, 6)]
    with pytest.raises(ShapeError, match=r"_contrib_box_nms.*need width >= 6.*\(2, 100, 5\)"):
        sym.infer_shape(data=(2, 100, 5))
    with pytest.raises(ShapeError, match=r"_contrib_box_nms.*at least 2-D"):
        sym.infer_shape(data=(100,))
    with pytest.raises(AttributeValueError, match=r"_contrib_box_nms.*score_index=3 falls in"):
        op_symbol("_contrib_box_nms", ["data"], score_index=3)
    with pytest.raises(AttributeValueError, match=r"_contrib_box_nms.*id_index=1 clashes"):
        op_symbol("_contrib_box_nms", ["data"], id_index=1)
    with pytest.raises(AttributeValueError, match=r"_contrib_box_nms.*in_format.*'corner'"):
        op_symbol("_contrib_box_nms", ["data"], in_format="xyxy")
    alias = op_symbol("_contrib_box_non_maximum_suppression", ["data"])
    assert alias.infer_shape(data=(5, 6))[1] == [(5, 6)]
