"""Faults at any moment of a fit, on the session's loopback multi-node cluster: the cases
seen to crash or hang the driver, then seeded schedules (``raymod.chaos``). Every fit ends on
the one-process trajectory (1e-5), directly or through the checkpoint it stopped with; a
failure prints the command that replays its schedule."""
import pytest

from raymod.chaos import Fault, Rig, Schedule, generate

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

#: the suite's schedules: SEED's first COUNT (bench/bench_faults.py runs many more)
SEED, COUNT = 7, 10


@pytest.fixture(scope="module")
def rig(ray_cluster):
    made = Rig()
    yield made
    made.close()


def check(rig, schedule):
    outcome = rig.run(schedule)
    assert outcome.ok, (f"{schedule}: {outcome.result}, max error {outcome.max_error:.1e}; "
                        f"replay: {schedule.replay}\n{outcome.error}")
    return outcome


@pytest.mark.parametrize("run_ahead", [None, 8, 1])
def test_a_worker_node_removed_at_the_first_batch_end(rig, run_ahead):
    # once crashed fit (MembershipChanged in RECOVERING) or hung in _peer_state
    outcome = check(rig, Schedule((Fault("batch_end", 1, "worker_node"),), run_ahead))
    assert outcome.fired == ["worker_node@batch_end#1"]


def test_the_kvserver_node_removed_then_two_worker_nodes(rig):
    outcome = check(rig, Schedule((Fault("batch_end", 4, "server_node"),
                                   Fault("batch_end", 9, "worker_node"),
                                   Fault("window.launched", 4, "worker_node", pick=1)), None))
    assert len(outcome.fired) == 3


def test_faults_during_a_recovery_and_a_joiner_set_up(rig):
    check(rig, Schedule((Fault("batch_end", 3, "worker_kill"),
                         Fault("recovery", 1, "worker_kill", pick=1),
                         Fault("worker.joining", 5, "worker_kill")), 8))


def test_a_spare_killed_as_it_joins_and_its_node_removed(rig):
    schedule = Schedule((Fault("batch_end", 3, "worker_kill"),
                         Fault("worker.joining", 5, "worker_kill"),
                         Fault("batch_end", 12, "worker_node", pick=2)), 8, spares=1)
    outcome = check(rig, schedule)
    # the fifth worker.joining moment is the spare's promotion when all four workers joined
    # before the first loss; on a loaded machine the fourth may still be starting then (it
    # joins later, or its node goes), which moves the count: the fit must survive either way
    events = [e.split(":")[0] for e in outcome.events]
    first_loss = events.index("lost") if "lost" in events else len(events)
    report = f"{outcome.fired}, events {outcome.events}; replay: {schedule.replay}"
    assert {"worker_kill@batch_end#3", "worker_node@batch_end#12"} <= set(outcome.fired), report
    if events[:first_loss].count("join") == 4:
        assert len(outcome.fired) == 3, report


def test_a_hung_worker_and_a_failed_start(rig):
    outcome = check(rig, Schedule((Fault("batch_end", 5, "worker_stop"),
                                   Fault("worker.starting", 5, "start_fail")), None))
    assert outcome.recovery_s[0] < 15, outcome.recovery_s


@pytest.mark.parametrize("schedule", generate(SEED, COUNT), ids=str)
def test_seeded_schedules(rig, schedule):
    check(rig, schedule)


def test_a_drained_node_s_workers_leave_without_a_loss(rig):
    outcome = check(rig, Schedule((Fault("batch_end", 3, "node_drain"),), None))
    assert "leave: node draining" in outcome.events and "lost" not in outcome.events, \
        outcome.events


def test_the_sparse_model_through_kills_a_node_loss_and_a_resume(rig):
    """csr batches and a row_sparse table on the KVServers: a worker and a server killed,
    then worker nodes removed until too few workers are left: the fit stops with a
    checkpoint holding the table, and its resume lands on the one-process trajectory."""
    outcome = check(rig, Schedule((Fault("batch_end", 3, "worker_kill"),
                                   Fault("batch_end", 7, "server_kill"),
                                   Fault("batch_end", 17, "worker_node"),
                                   Fault("batch_end", 19, "worker_node", pick=1),
                                   Fault("batch_end", 21, "worker_node", pick=2)),
                                  8, sparse=True))
    assert len(outcome.fired) >= 3, outcome.fired
    if len(outcome.fired) == 5:  # no worker left: stopped with a checkpoint, then resumed
        assert outcome.result == "resumed", outcome.row()
