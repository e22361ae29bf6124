"""Which worker a fault schedule's worker fault strikes (``raymod.chaos``'s injector), on a
stand-in for the pool and real processes: no Ray needed."""
import subprocess
import sys
from types import SimpleNamespace

from raymod.chaos import Fault, Schedule
from raymod.chaos.harness import _Injector


class Rig:
    """The rig's node operations: every node but ``gone`` can be removed or drained."""

    def __init__(self, gone=()):
        self.gone, self.removed, self.drained = set(gone), [], []

    def remove_node(self, node):
        if node in self.gone:
            return False
        self.gone.add(node)
        self.removed.append(node)
        return True

    def drain_node(self, node):
        if node in self.gone:
            return False
        self.drained.append(node)
        return True


def pool(infos):
    """The parts of WorkerPool the injector reads: live ranks (as the pool sees them) and
    each one's pid and node."""
    return SimpleNamespace(workers=dict.fromkeys(infos), ranks=sorted(infos), info=infos)


def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def strike(rig, kind, workers, pick=0):
    injector = _Injector(rig, Schedule((Fault("batch_end", 1, kind, pick=pick),), None))
    injector("batch_end", {"pool": pool(workers)})
    return injector.fired


def test_a_worker_already_gone_passes_the_fault_to_the_next_live_one():
    # worker 1's process died with its node, and the pool has not noticed yet (a fault
    # schedule once found 2 of its 3 faults fired for this)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live, spare = sleeper(), sleeper()
    try:
        fired = strike(Rig(), "worker_kill",
                       {1: {"pid": dead.pid, "node": "a"}, 2: {"pid": live.pid, "node": "b"},
                        3: {"pid": spare.pid, "node": "c"}})
        assert fired == ["worker_kill@batch_end#1"]
        assert live.wait(timeout=10) == -9  # the next one after the pick, not the last
        assert spare.poll() is None
    finally:
        for proc in (live, spare):
            proc.kill()
            proc.wait()


def test_a_removed_node_passes_node_faults_on_and_pick_wraps_around():
    rig = Rig(gone={"b"})
    workers = {1: {"pid": 0, "node": "a"}, 2: {"pid": 0, "node": "b"},
               3: {"pid": 0, "node": "c"}}
    assert strike(rig, "worker_node", workers, pick=1) == ["worker_node@batch_end#1"]
    assert rig.removed == ["c"]  # pick 1 is rank 2, whose node is gone: rank 3's next
    assert strike(rig, "node_drain", workers, pick=5) == ["node_drain@batch_end#1"]
    assert rig.drained == ["a"]  # pick 5 wraps to rank 3 (gone now), then rank 1
    # nothing left to strike: the fault does not fire
    assert strike(Rig(gone={"a", "b", "c"}), "worker_node", workers) == []
