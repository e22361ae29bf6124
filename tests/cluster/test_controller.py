"""The elastic controller's policy, stepped without actors: each failure type maps to one
recovery, the transitions follow the table, and endless failures end in FAILED."""
import pytest

from raymod.base import MXNetError
from raymod.cluster import controller as c
from raymod.cluster.controller import Phase

POLICY = c.Policy(min_workers=2, max_attempts=3, max_losses=4)


def decide(phase, event, attempts=0, losses=0, snapshot=True):
    return c.decide(phase, event, POLICY, c.Facts(attempts, losses, snapshot))


@pytest.mark.parametrize("event, actions", [
    (c.WorkerDied(3, "step", (5, 6)), [c.Forget(3)]),
    (c.WorkerHung((1, 2), "step"), [c.StopWorkers((1, 2))]),
    (c.ServerDied("get_params"), [c.RestoreServers("snapshot"), c.Retry("get_params")]),
    (c.TooFewWorkers(1, 2, "step", True), [c.WaitForWorkers(2)]),
    (c.NoReplacements(1, "step", mid_step=True), [c.GoShortHanded()]),
    (c.NodeDraining((4,)), [c.LeaveNodes((4,))]),
])
def test_each_failure_while_running_has_one_recovery(event, actions):
    decision = decide(Phase.RUNNING, event)
    assert list(decision.actions) == actions
    expected = Phase.RESIZING if isinstance(event, c.NodeDraining) else Phase.RECOVERING
    assert decision.phase is expected


def test_a_server_lost_before_any_snapshot_sets_up_again():
    assert decide(Phase.STARTING, c.ServerDied("init_optimizer"), snapshot=False) == \
        c.Decision(Phase.STARTING, (c.RestoreServers("setup"), c.Retry("init_optimizer")))
    # while starting the set-up is redone even if an old snapshot exists (force_init)
    assert decide(Phase.STARTING, c.ServerDied("init_optimizer")).actions[0] == \
        c.RestoreServers("setup")
    assert decide(Phase.RUNNING, c.ServerDied("step"), snapshot=False).actions[0] == \
        c.RestoreServers("setup")


def test_no_replacements_stops_at_a_boundary_or_without_survivors():
    for event in (c.NoReplacements(1, "step boundary"), c.NoReplacements(0, "step", True)):
        decision = decide(Phase.RECOVERING, event)
        assert decision.phase is Phase.FAILED
        (fail,) = decision.actions
        assert isinstance(fail, c.Fail) and fail.unavailable


def test_limits_end_in_failed():
    assert decide(Phase.RECOVERING, c.ServerDied("step"), attempts=2).phase is Phase.FAILED
    assert decide(Phase.RECOVERING, c.ServerDied("step"), attempts=1).phase is Phase.RECOVERING
    assert decide(Phase.RECOVERING, c.WorkerDied(1, "step"), losses=3).phase is Phase.FAILED
    assert decide(Phase.RECOVERING, c.WorkerHung((1,), "step"), attempts=2).phase is Phase.FAILED


def test_stopping_repairs_nothing_and_calls_end_it():
    assert decide(Phase.STOPPING, c.WorkerDied(1, "call")) == c.Decision(Phase.STOPPING, ())
    assert decide(Phase.STOPPING, c.CallDone("close")).phase is Phase.STOPPED
    assert decide(Phase.RUNNING, c.StopRequested()).phase is Phase.STOPPING


#: one instance of every event type, in the shapes call sites report them
SAMPLES = [c.WorkerDied(3, "window", (5,), 7), c.WorkerHung((1,), "step 4"),
           c.ServerDied("window", "gone", 9), c.NodeDraining((2,)),
           c.TooFewWorkers(1, 2, "step", True), c.NoReplacements(1, "step boundary"),
           c.NoReplacements(1, "step", mid_step=True), c.NoReplacements(0, "step", True),
           c.MembershipChanged(joined=(5,)), c.MembershipChanged(left=(1,)),
           c.CallDone("window"), c.StopRequested(), c.StopRequested(failed=True)]


def test_the_table_is_total_every_phase_times_every_event():
    assert {type(e) for e in SAMPLES} == set(c.EVENTS)
    assert set(c.TRANSITIONS) == {(p, e) for p in Phase for e in c.EVENTS}
    for phase in Phase:
        for event in SAMPLES:
            for attempts, losses, snapshot in ((0, 0, True), (0, 0, False), (2, 3, True)):
                decision = decide(phase, event, attempts, losses, snapshot)
                assert isinstance(decision.phase, Phase), (phase, event)
                assert all(type(a) in c.Action.__args__ for a in decision.actions)
                if decision.phase is not Phase.FAILED:  # the table, unless a limit is hit
                    assert decision.phase is c.TRANSITIONS[(phase, type(event))]
                else:
                    assert any(isinstance(a, c.Fail) for a in decision.actions)


def test_recovering_takes_joins_and_drains_and_a_completed_call_ends_it():
    # a replacement joins while a loss inside a run-ahead window is being repaired
    joined = decide(Phase.RECOVERING, c.MembershipChanged(joined=(4,)))
    assert joined == c.Decision(Phase.RECOVERING, ())
    drained = decide(Phase.RECOVERING, c.NodeDraining((2,)))
    assert drained == c.Decision(Phase.RECOVERING, (c.LeaveNodes((2,)),))
    assert decide(Phase.STARTING, c.NodeDraining((2,))).actions == (c.LeaveNodes((2,)),)
    assert decide(Phase.RECOVERING, c.CallDone("window")).phase is Phase.RUNNING


def test_after_close_late_reports_change_nothing():
    for event in SAMPLES:
        if not isinstance(event, c.StopRequested):
            assert decide(Phase.STOPPED, event) == c.Decision(Phase.STOPPED, ())
    assert decide(Phase.STOPPED, c.StopRequested()).phase is Phase.STOPPING  # close again
    with pytest.raises(TypeError, match="one of the controller's events"):
        decide(Phase.RUNNING, "worker died")


def test_every_phase_accepts_a_stop_and_failed_accepts_the_next_call():
    for phase in Phase:
        assert decide(phase, c.StopRequested()).phase is Phase.STOPPING
    assert decide(Phase.FAILED, c.CallDone("step")).phase is Phase.RUNNING
    assert decide(Phase.FAILED, c.WorkerDied(1, "step")).phase is Phase.RECOVERING


def test_the_controller_runs_handlers_counts_failures_and_records_transitions():
    ctl = c.ElasticController(POLICY)
    done = []
    ctl.register(c.RestoreServers, lambda action, event: done.append((action, event.during)))
    ctl.register(c.Forget, lambda action, event: done.append(action))
    ctl.handle(c.ServerDied("init_optimizer"))
    ctl.done("init_optimizer")
    assert ctl.phase is Phase.RUNNING
    ctl.handle(c.WorkerDied(2, "step"))
    ctl.handle(c.ServerDied("step"), have_snapshot=True)
    assert done == [(c.RestoreServers("setup"), "init_optimizer"), c.Forget(2),
                    (c.RestoreServers("snapshot"), "step")]
    ctl.handle(c.ServerDied("step"), have_snapshot=True)
    with pytest.raises(MXNetError, match="after 2 failed attempts in a row"):
        ctl.handle(c.ServerDied("step"), have_snapshot=True)  # the third in a row
    assert ctl.phase is Phase.FAILED
    ctl.done("step")  # a later call that completes
    assert ctl.phase is Phase.RUNNING
    assert [h["to"] for h in ctl.history] == ["starting", "running", "recovering", "recovering",
                                             "recovering", "failed", "running"]


def test_a_completed_call_resets_the_count():
    ctl = c.ElasticController(POLICY)
    ctl.done("init_optimizer")
    for _ in range(5):  # never three in a row
        ctl.handle(c.ServerDied("step"), have_snapshot=True)
        ctl.handle(c.ServerDied("step"), have_snapshot=True)
        ctl.done("step")
    assert ctl.phase is Phase.RUNNING
