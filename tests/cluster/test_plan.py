"""``raymod.cluster.plan``: compact step tasks and packed windows (pure data, no Ray)."""
import pickle

import numpy as np
import pytest

from raymod.cluster.plan import RankPlan, SliceTasks, cuts, expand_window, pack_window
from raymod.parallel.slicing import split_input_slice

SLICES = split_input_slice(10, [1] * 4)  # 3, 2, 3, 2 rows


def _rows(kind):
    return range(20, 30) if kind == "range" else np.array([7, 3, 9, 1, 0, 4, 8, 2, 6, 5])


@pytest.mark.parametrize("kind", ["range", "array"])
def test_slice_tasks_are_each_slice_of_the_rows(kind):
    rows = _rows(kind)
    tasks = SliceTasks(3, (5, ["ref"]), rows, SLICES)
    assert len(tasks) == 4
    for i, (task, s) in enumerate(zip(tasks, SLICES)):
        assert task["group"] == 3 and task["slice"] == i and task["num_slices"] == 4
        assert task["source"] == (5, ["ref"])
        assert list(task["rows"]) == list(np.asarray(rows)[s])
    assert tasks[1] is list(tasks)[1]  # built once: changes to a task stay


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
def test_each_worker_cuts_out_its_run_and_together_they_cover_every_slice_once(workers):
    steps = [(s, SliceTasks(0, (1, ["ref"]), _rows(kind), SLICES), s % 2 == 0)
             for s, kind in enumerate(["range", "array", "range"])]
    window = pickle.loads(pickle.dumps(pack_window(steps), protocol=5))
    seen = {s: [] for s, _, _ in steps}
    for position in range(workers):
        plan = expand_window(window, position, workers)
        assert [(s, svrg) for s, _, svrg in plan] == [(s, svrg) for s, _, svrg in steps]
        edges = cuts(len(SLICES), workers)
        for (step, tasks, _), (_, full, _) in zip(plan, steps):
            assert [t["slice"] for t in tasks] == list(range(edges[position],
                                                            edges[position + 1]))
            for t in tasks:  # the source travels by id: the worker holds its reader
                want = full[t["slice"]]
                assert t["source"] == (1, None)
                assert list(t["rows"]) == list(want["rows"])
                assert t["group"] == want["group"] and t["num_slices"] == want["num_slices"]
            seen[step] += [t["slice"] for t in tasks]
        # what the driver keeps of this worker's part (for hung-worker checks)
        driver_side = list(RankPlan(steps, position, workers))
        assert [(s, [t["slice"] for t in ts]) for s, ts, _ in driver_side] == \
            [(s, [t["slice"] for t in ts]) for s, ts, _ in plan]
    assert all(sorted(v) == [0, 1, 2, 3] for v in seen.values())


def test_cuts_are_contiguous_and_as_even_as_possible():
    assert cuts(16, 4) == (0, 4, 8, 12, 16)
    assert cuts(3, 5)[-1] == 3 and list(cuts(3, 5)) == sorted(cuts(3, 5))
    sizes = np.diff(cuts(10, 3))
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 10
