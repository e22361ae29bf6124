"""Who a run-ahead window's hang detection stops, and when (``HungWorkers._stop_hung``), on a
stand-in for the servers' progress: no Ray needed."""
from types import SimpleNamespace

from raymod.cluster.recovery.worker_hung import HungWorkers
from raymod.cluster.steps import Window

FIRST_STEP, ORDINARY = 60.0, 5.0


class Deadlines:
    def step(self, steps=1, first=False):
        return FIRST_STEP if first else ORDINARY * steps


class Group(HungWorkers):
    """The parts of RayExecutorGroup that HungWorkers reads."""

    def __init__(self, steps_done, pending, windows):
        progress = [{"steps_done": steps_done, "pending": pending}]
        self.state = SimpleNamespace(kv=SimpleNamespace(progress=lambda: progress),
                                     inflight=windows)
        self.stopped = []
        self.pool = SimpleNamespace(deadlines=Deadlines(),
                                    hung=lambda ranks, during: self.stopped.append(
                                        (set(ranks), during)))
        self._seasoned = set()


def window(first_step, steps, ranks):
    """One window of ``steps`` steps from ``first_step``, each rank holding slice ``rank`` of
    every step."""
    plan = {r: [(s, [{"slice": r}], None) for s in range(first_step, first_step + steps)]
            for r in ranks}
    return Window(0, [], {r: (None, plan[r]) for r in ranks}, 0.0)


def test_a_worker_hung_inside_its_first_window_gets_the_ordinary_deadline():
    # steps 1-7 of an 8-step window are done, the servers lack worker 0's slice of step 8:
    # worker 0 has completed steps, so 6 s without progress stop it (not 60 s)
    win = window(1, 8, [0, 1, 2, 3])
    group = Group(7, {8: [1, 2, 3]}, [win])
    assert group._stop_hung(win, idle=6.0) is None
    assert group.stopped == [({0}, "step 8")]
    assert group._seasoned == {0, 1, 2, 3}


def test_a_worker_on_its_first_step_is_given_the_first_step_deadline():
    # no step of the window is done yet and only worker 3 lags: it may still be binding
    win = window(1, 8, [0, 1, 2, 3])
    group = Group(0, {1: [0, 1, 2]}, [win])
    assert group._stop_hung(win, idle=6.0) == FIRST_STEP
    assert group.stopped == [] and group._seasoned == set()
    # past the first-step deadline it is stopped all the same
    assert group._stop_hung(win, idle=61.0) is None
    assert group.stopped == [({3}, "step 1")]
