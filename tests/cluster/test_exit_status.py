"""A script that starts a local multi-node cluster, fits on workers and ends without
``rm.cluster.shutdown()`` exits with status 0 (it once exited with 1: Ray's own exit hook
was left to stop the cluster)."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np
    import raymod as rm

    rm.cluster.init(num_cpus=2, multi_node=True, include_dashboard=False)
    data = rm.sym.Variable("data")
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(data, num_hidden=4), name="softmax")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = x[:, :4].argmax(axis=1).astype(np.float32)
    mod = rm.mod.Module(net, workers=2)
    mod.fit(rm.io.NDArrayIter(x, y, batch_size=16), num_epoch=1, kvstore="dist_sync")
    print("fitted")
""")


def test_a_script_that_ends_without_shutdown_exits_0():
    # a process of its own: the suite's session cluster is already up in this one
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300)
    assert "fitted" in done.stdout, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
