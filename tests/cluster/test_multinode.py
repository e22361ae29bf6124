"""Modules on several Ray nodes: raylets added to the session's loopback cluster, workers and
KVServers placed on them with custom resources, nodes removed and added mid-fit. Every run
ends within 1e-5 of the same training in one process."""
import time

import numpy as np
import pytest
import ray

import raymod as rm
from raymod.kvstore.dist import DistKVStore

from nets import mlp

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]

STEPS_PER_EPOCH = 20
BATCH = 60
#: hidden widths: 38k parameters (150 kB), so that a KVServer's snapshot is too big to ride
#: inline in its answer and lives in the object store of the server's node
HIDDEN = (256, 128)
WORKER = "mn_worker"  # the custom resource of nodes that take workers
SERVER = "mn_server"  # ... and of nodes that take KVServers
LOST_SERVER = "mn_server_lost"  # ... and of the nodes of the server lost with its node
STANDBY = "mn_standby"  # ... and of the two nodes of a server and its hot standby


def fit(workers=None, close=None, on_batch=None, epochs=2, kvstore="local"):
    """Two epochs of an MLP: in process (``workers=None``) or on worker actors."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS_PER_EPOCH * BATCH, 16)).astype(np.float32)
    y = (x[:, :10].argmax(axis=1)).astype(np.float32)
    rm.random.seed(1)
    mod = rm.mod.Module(mlp(*HIDDEN), workers=workers)
    if workers is not None:
        close(mod)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=BATCH, shuffle=True, seed=2), num_epoch=epochs,
            kvstore=kvstore, optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=rm.init.Xavier(), batch_end_callback=on_batch)
    return mod, {k: v.copy() for k, v in mod.get_params()[0].items()}


@pytest.fixture(scope="module")
def reference():
    """The parameters the training ends with in one process."""
    return fit()[1]


def assert_close(a, b, tol=1e-5):
    assert sorted(a) == sorted(b)
    for name in a:
        err = np.abs(a[name] - b[name]).max() / max(np.abs(a[name]).max(), 1e-3)
        assert err < tol, f"{name}: max relative difference {err:.2e}"


class Nodes:
    """Raylets added on the session cluster; :meth:`remove_all` removes those still there."""

    def __init__(self):
        self.cluster, self.added = rm.cluster.local_cluster(), []
        if self.cluster is None:
            pytest.fail("the session's Ray cluster is not a LocalCluster: Ray was started "
                        "before the ray_cluster fixture, without multi_node=True")

    def add(self, num_cpus=1, **resources):
        node = self.cluster.add_node(num_cpus=num_cpus, resources=resources)
        self.added.append(node)
        return node

    def remove(self, node):
        self.cluster.remove_node(node)

    def remove_all(self):
        for node in self.added:
            if node in self.cluster.nodes:
                self.cluster.remove_node(node)


@pytest.fixture(scope="module")
def shared(ray_cluster):
    """Nodes the tests share (started once: a node takes seconds): two for workers, one for
    a KVServer. Tests leave them in place."""
    made = Nodes()
    yield {"workers": [made.add(**{WORKER: 1}) for _ in range(2)],
           "server": made.add(num_cpus=0, **{SERVER: 1})}
    made.remove_all()


@pytest.fixture
def nodes(shared):
    """Nodes of one test, removed after it."""
    made = Nodes()
    yield made
    made.remove_all()


@pytest.fixture
def kvstore():
    """``make(**options)``: a dist_sync store (closed after the test) whose server sits on the
    shared server node unless told otherwise, so that removing a worker's node never takes
    the server along by chance."""
    made = []

    def make(**options):
        options.setdefault("server_resources", {SERVER: 1})
        made.append(DistKVStore("dist_sync", **options))
        return made[-1]
    yield make
    for kv in made:
        kv.close()


def on_step(actions):
    """A batch-end callback running ``actions[step](module)`` after that global step."""
    def run(param):
        action = actions.get(param.epoch * STEPS_PER_EPOCH + param.nbatch)
        if action is not None:
            action(param.locals["self"])
    return run


def worker_nodes(pool):
    return {rank: pool.info[rank]["node"] for rank in pool.ranks}


def server_node(server):
    return ray.get(server.__ray_call__.remote(
        lambda _: ray.get_runtime_context().get_node_id()))


def test_workers_over_three_nodes_match_one_process(shared, nodes, close_modules, kvstore,
                                                    reference):
    added = shared["workers"] + [nodes.add(**{WORKER: 1})]
    kv = kvstore()
    mod, got = fit(rm.Workers(3, resources={WORKER: 1}), close_modules, kvstore=kv)
    assert_close(reference, got)
    assert sorted(worker_nodes(mod._pool).values()) == sorted(n.node_id for n in added)
    assert server_node(kv.servers[0]) == shared["server"].node_id
    # five raylets (the head, the shared three, this test's), every one on loopback
    assert [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]] == ["127.0.0.1"] * 5


def test_worker_node_removed_mid_fit(nodes, close_modules, kvstore, reference):
    third = nodes.add(**{WORKER: 1})
    removed = []

    def remove_a_worker_node(mod):
        mod._pool.wait_for(3, 120)  # the third worker may still be starting on a loaded machine
        rank, = [r for r, node in worker_nodes(mod._pool).items() if node == third.node_id]
        nodes.remove(third)
        removed.append((rank, third.node_id))

    mod, got = fit(rm.Workers(2, 3, resources={WORKER: 1}), close_modules,
                   on_step({7: remove_a_worker_node}), kvstore=kvstore())
    assert_close(reference, got)
    assert not mod._exec_group.state.recoveries  # the server was elsewhere
    (rank, node), = removed
    lost = [e for e in mod._pool.events if e["event"] == "lost"]
    # seen in the first window still to complete after step 7's callback (step 8 or later)
    # or, when the windows in flight finished before the node went, by the epoch end's
    # call for the parameters (a call, no step)
    assert [e["rank"] for e in lost] == [rank] and lost[0].get("step", 8) >= 8
    assert node not in worker_nodes(mod._pool).values() and len(mod._pool) == 2


def test_kvserver_node_removed_mid_fit(nodes, close_modules, kvstore, reference):
    # the servers go back to the driver's last snapshot (taken before step 22 on the node
    # removed at step 22: it must survive the node) and replay every step since
    first = nodes.add(num_cpus=0, **{LOST_SERVER: 1})
    kv = kvstore(server_resources={LOST_SERVER: 1})
    assert server_node(kv.servers[0]) == first.node_id
    moved = []

    def move_the_server(mod):
        moved.append(nodes.add(num_cpus=0, **{LOST_SERVER: 1}))  # for the replacement
        nodes.remove(first)

    mod, got = fit(rm.Workers(2, resources={WORKER: 1}), close_modules,
                   on_step({22: move_the_server}), kvstore=kv)
    assert_close(reference, got)
    recoveries = mod._exec_group.state.recoveries
    (recovery,) = recoveries
    assert recovery["shards"] == [0] and recovery["snapshot_step"] < 22
    # every step since the snapshot up to 22 at least; with workers running ahead, up to
    # the end of the windows in flight when the node went
    assert recovery["steps_replayed"] >= 22 - recovery["snapshot_step"]
    assert server_node(kv.servers[0]) == moved[0].node_id
    assert not [e for e in mod._pool.events if e["event"] == "lost"]


def test_kvserver_node_removed_with_a_hot_standby_on_another_node(nodes, close_modules,
                                                                   kvstore, reference):
    """With ``standby=True`` the standby goes to the other node offering the servers'
    resource (each node could hold both); removing the primary's node promotes it: no
    snapshot restored, the trajectory kept."""
    both = [nodes.add(num_cpus=0, **{STANDBY: 2}) for _ in range(2)]
    kv = kvstore(server_resources={STANDBY: 1}, standby=True)
    placed = {}

    def remove_the_primarys_node(mod):
        deadline = time.monotonic() + 60
        while 0 not in kv.standbys.attached:
            assert time.monotonic() < deadline, "the standby never attached"
            time.sleep(0.05)
            kv.tend_standbys()
        placed["primary"] = server_node(kv.servers[0])
        placed["standby"] = server_node(kv.standbys.attached[0])
        nodes.remove(next(n for n in both if n.node_id == placed["primary"]))

    mod, got = fit(rm.Workers(2, resources={WORKER: 1}, run_ahead=2), close_modules,
                   on_step({22: remove_the_primarys_node}), kvstore=kv)
    assert_close(reference, got)
    assert placed["primary"] != placed["standby"]
    (recovery,) = mod._exec_group.state.recoveries
    assert recovery["standby_promoted"] and recovery["snapshot_step"] is None
    assert server_node(kv.servers[0]) == placed["standby"]


def test_node_added_mid_fit_workers_grow_onto_it(nodes, close_modules, kvstore, reference):
    grown = []

    def add_a_node(mod):
        grown.append(nodes.add(num_cpus=2, **{WORKER: 2}))

    def wait_for_joiners(mod):
        mod._pool.wait_for(4, 120)  # they join at the next step boundary once started

    mod, got = fit(rm.Workers(2, 6, resources={WORKER: 1}), close_modules,
                   on_step({5: add_a_node, 6: wait_for_joiners}), kvstore=kvstore())
    assert_close(reference, got)
    placed = worker_nodes(mod._pool)
    assert len(placed) == 4 and list(placed.values()).count(grown[0].node_id) == 2
    joins = [e for e in mod._pool.events if e["event"] == "join"]
    assert len(joins) == 4 and not [e for e in mod._pool.events if e["event"] == "lost"]


def test_bytes_cross_nodes_through_the_object_store(shared, close_modules, kvstore,
                                                    reference):
    kv = kvstore(shared_memory=False)
    reports = []

    def look(mod):
        pool = mod._pool
        roads = [ray.get(pool.workers[r].__ray_call__.remote(lambda w: list(w.client.local)))
                 for r in pool.ranks]
        reports.append((roads, list(pool.call_all("memory_report").values())))

    mod, got = fit(rm.Workers(2, resources={WORKER: 1}), close_modules, on_step({25: look}),
                   kvstore=kv)
    assert_close(reference, got)
    assert server_node(kv.servers[0]) == shared["server"].node_id
    assert sorted(worker_nodes(mod._pool).values()) == sorted(n.node_id
                                                              for n in shared["workers"])
    roads, memory = reports[0]
    assert roads == [[False], [False]]  # no shared memory with the server: Ray carries it
    assert [m["params_in_place"] + m["grads_in_place"] for m in memory] == [0, 0]


def test_bad_arguments_are_named_before_anything_starts(ray_cluster):
    cluster = rm.cluster.local_cluster()
    count = len(cluster.nodes)
    with pytest.raises(ValueError, match="num_cpus must be a number >= 0, got -1"):
        cluster.add_node(num_cpus=-1)
    with pytest.raises(ValueError, match="resources must map names to amounts >= 0"):
        cluster.add_node(resources={"x": "many"})
    with pytest.raises(ValueError, match="not a node added to this cluster"):
        cluster.remove_node(object())
    assert len(cluster.nodes) == count
    with pytest.raises(ValueError, match="takes no address, got address='auto'"):
        rm.cluster.init(address="auto", multi_node=True)
    with pytest.raises(ValueError, match=r"server_resources must map .* got \{'ps': 0\}"):
        DistKVStore("dist_sync", server_resources={"ps": 0})
