"""Membership events are logged as sentences (the event dicts keep the figures)."""
from raymod.cluster.pool import describe_event


def test_each_kind_reads_as_a_sentence():
    assert describe_event("join", 1, {"setup_s": 0.0016216, "pid": 7}) == \
        "worker 1 joined (set up in 1.6 ms)"
    assert describe_event("leave", 2, {"reason": "node draining", "node": "n1"}) == \
        "worker 2 left (node draining)"
    assert describe_event("lost", 0, {"step": 8, "slices": [0, 1],
                                      "error": "ActorDiedError: gone"}) == \
        "worker 0 lost at step 8: ActorDiedError: gone"
    assert describe_event("start_failed", 3, {"error": "no node"}) == \
        "worker 3 failed to start: no node"
    assert describe_event("recovered", None, {
        "during": "step", "step": 9, "ranks_lost": [0, 2], "slices_recomputed": 3,
        "seconds_to_step": 0.4567}) == \
        "step 9 completed 0.46 s after the loss, without worker(s) 0, 2 (3 slice(s) recomputed)"
    assert describe_event("other", None, {"x": 1, "pid": 5}) == "other worker (x=1)"
