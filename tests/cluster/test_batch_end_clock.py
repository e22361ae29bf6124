"""On Ray workers running ahead, batch-end callbacks run after their steps completed; each
gets when its step completed on the servers (``BatchEndParam.completed_at``), the clock
Speedometer and TensorBoard's speed scalars use."""
import time

import pytest

import raymod as rm

from nets import argmax_rows, mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def test_callbacks_get_their_steps_completion_times(close_modules):
    seen = []

    def record(param):
        seen.append((param.completed_at, time.time()))

    mod = rm.mod.Module(mlp(), workers=rm.Workers(2, run_ahead=4))
    close_modules(mod)
    mod.fit(argmax_rows(24), num_epoch=1, kvstore="dist_sync", batch_end_callback=record,
            optimizer_params={"learning_rate": 0.1})
    assert len(seen) == 24
    done = [completed for completed, _ in seen]
    assert None not in done
    assert done == sorted(done)  # steps complete in order
    # a step completes before its callback runs (same machine: one clock)
    assert all(completed <= called for completed, called in seen)
