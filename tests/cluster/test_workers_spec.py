"""``Workers``: the run-ahead window rule (pure arithmetic, no Ray)."""
import pytest

import raymod as rm
from raymod.cluster.workers import (MAX_RUN_AHEAD, MAX_WINDOW_SECONDS, MIN_RUN_AHEAD,
                                    WINDOW_PER_WORKER, WINDOW_SECONDS)

PER = WINDOW_PER_WORKER


@pytest.mark.parametrize("live, seconds, expected", [
    (1, None, PER),                                 # no step time yet: PER per live worker
    (8, None, 8 * PER),
    (1, MAX_WINDOW_SECONDS / 4, MIN_RUN_AHEAD),     # long steps: the floor still holds
    (1, WINDOW_SECONDS / 50, 50),                   # short steps: about WINDOW_SECONDS
    (8, WINDOW_SECONDS / 10, 8 * PER),              # never below PER per live worker ...
    (16, MAX_WINDOW_SECONDS / 100, 100),            # ... unless that is over MAX_WINDOW_SECONDS
    (1, 1e-6, MAX_RUN_AHEAD),                       # capped
])
def test_default_window_follows_pool_and_step_time(live, seconds, expected):
    assert rm.Workers(1).window(live, seconds) == expected


def test_explicit_run_ahead_wins():
    assert rm.Workers(1, run_ahead=3).window(8, 1e-6) == 3
    assert rm.Workers(1, run_ahead=1).window(1, None) == 1


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_run_ahead_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"run_ahead=\.\.\.\) must be an int >= 1, got"):
        rm.Workers(1, run_ahead=bad)
